"""Offline: which draft nodes to verify? EAGLE-2's rerank (cumulative drafter log-probability) against a per-depth
calibrated acceptance estimate (binned, fitted on the first half of the prompts), a depth bonus (cumulative log p +
lam * depth, each node capped at its parent's value so the kept nodes stay a tree of the budget) and the oracle,
on a recording of maximal trees. Every position of each greedy answer is a cycle here (a chain measure, not
decoding's). From the repository root:

    tail -n 100 artifacts/sharegpt_smollm2_regenerated.jsonl > /tmp/heldout.jsonl   # the drafter's held-out set
    .venv/bin/hf-adaptive-spec record --output /tmp/rec_d6k8t64 --prompts-file /tmp/heldout.jsonl --num-prompts 24 \
        --shard-size 6 --depth 6 --top-k 8 --total-tokens 64 --max-new-tokens 128 --num-threads 1   # ~40 min
    .venv/bin/python results/eagle3_curve/tree_rerank/offline_rerank.py /tmp/rec_d6k8t64 7,11,15

argv: the recording, the budgets (candidates besides the root)."""
import sys, math, collections
from hf_adaptive_spec.environments import load_recording

rec = load_recording(sys.argv[1])
BUDGETS = [int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "7,11,15").split(",")]
NBINS = 10

def children(t):
    ch = collections.defaultdict(list)
    for i, p in enumerate(t.parents):
        if i: ch[p].append(i)
    return ch

def accepted_path(t, allowed):
    ch, node, path = children(t), 0, []
    while True:
        nxt = next((c for c in ch[node] if c in allowed and t.tokens[c] == t.target_next[node]), None)
        if nxt is None or t.target_next[node] < 0: return path
        path.append(nxt); node = nxt

def cond_prob(t, i):
    return math.exp(t.scores[i] - (t.scores[t.parents[i]] if t.parents[i] > 0 else 0.0))

def binof(p): return min(int(p * NBINS), NBINS - 1)

def fit(trees):
    hit, tot = collections.Counter(), collections.Counter()
    for t in trees:
        on_path = set([0] + accepted_path(t, set(range(len(t.tokens)))))
        for i in range(1, len(t.tokens)):
            par = t.parents[i]
            if par in on_path and t.target_next[par] >= 0:
                key = (t.depths[i], binof(cond_prob(t, i)))
                tot[key] += 1; hit[key] += t.tokens[i] == t.target_next[par]
    return {k: (hit[k] + 1) / (tot[k] + 2) for k in tot}, tot

def select(t, budget, value):
    cand = [i for i in range(1, len(t.tokens)) if t.target_next[t.parents[i]] >= 0 or t.parents[i] == 0]
    vals = {0: 1.0}
    order = sorted(range(1, len(t.tokens)), key=lambda i: t.depths[i])
    for i in order: vals[i] = min(vals[t.parents[i]], vals[t.parents[i]] * value(t, i)) if t.parents[i] else min(1.0, value(t, i))
    chosen = sorted(cand, key=lambda i: (-vals[i], t.depths[i], i))[:budget]
    s = set(chosen)
    # ancestor closure (should already hold)
    for i in chosen:
        p = t.parents[i]
        while p > 0: s.add(p); p = t.parents[p]
    assert len(s) <= budget, (len(s), budget)
    return s

trees = [t for prompt in rec.prompts for t in prompt]
half = len(rec.prompts) // 2
train = [t for prompt in rec.prompts[:half] for t in prompt]
test = [t for prompt in rec.prompts[half:] for t in prompt]
calib, counts = fit(train)
print("cycles: train", len(train), "test", len(test))
for d in range(1, 7):
    print("depth", d, " ".join(f"{calib.get((d,b),float('nan')):.2f}({counts[(d,b)]})" for b in range(NBINS)))
def drafter(t, i): return cond_prob(t, i)
def calibrated(t, i): return calib.get((t.depths[i], binof(cond_prob(t, i))), cond_prob(t, i))
for budget in BUDGETS:
    for name, evalset in (("test", test), ("train", train)):
        row = {}
        for rule, fn in (("eagle2", drafter), ("calibrated", calibrated)):
            row[rule] = sum(len(accepted_path(t, select(t, budget, fn))) + 1 for t in evalset) / len(evalset)
        row["oracle"] = sum(min(len(accepted_path(t, set(range(len(t.tokens))))), budget) + 1 for t in evalset) / len(evalset)
        row["full64"] = sum(len(accepted_path(t, set(range(len(t.tokens))))) + 1 for t in evalset) / len(evalset)
        print(f"{budget+1:3d} nodes {name:5s} " + "  ".join(f"{k} {v:.3f}" for k, v in row.items()))

print("--- depth bonus: rank by cumulative log p + lam * depth (lam=0: EAGLE-2)")
def bonus(lam):
    return lambda t, i: cond_prob(t, i) * math.exp(lam)
for budget in BUDGETS:
    for name, evalset in (("train", train), ("test", test)):
        row = []
        for lam in (-0.5, -0.25, 0.0, 0.25, 0.5, 1.0, 1.5):
            tau = sum(len(accepted_path(t, select(t, budget, bonus(lam)))) + 1 for t in evalset) / len(evalset)
            row.append(f"{lam:+.2f}:{tau:.3f}")
        print(f"{budget+1:3d} nodes {name:5s} " + "  ".join(row))
