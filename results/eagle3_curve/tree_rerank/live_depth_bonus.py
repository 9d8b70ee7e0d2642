"""Live decoding tau of EAGLE-2's rerank with a depth bonus (best_nodes replaced here, nothing shipped), first turns
of Spec-Bench, float32 eager, the shipped drafter, greedy; the bonuses interleaved per question, and every variant
must give the same tokens (the rerank only chooses what is verified). From the repository root:

    .venv/bin/python results/eagle3_curve/tree_rerank/live_depth_bonus.py 2 6/8/16 0,0.5,1.0 \
        ../shared/data/spec_bench/question.jsonl > results/eagle3_curve/tree_rerank/live_depth_bonus_specbench26_6-8-16.log

argv: questions per category, tree depth/top-k/tokens, bonuses, question file."""
import sys, time, json, statistics
import torch
import hf_adaptive_spec as hfas
from hf_adaptive_spec.generation import tree_builder
from hf_adaptive_spec.bench.questions import load_questions

per_cat = int(sys.argv[1]); d, k, t = map(int, sys.argv[2].split("/")); bonuses = [float(x) for x in sys.argv[3].split(",")]
torch.set_num_threads(1)
original = tree_builder.best_nodes

def with_bonus(lam):
    def best(tree, budget):
        if lam == 0.0:
            return original(tree, budget)
        value = [0.0] * len(tree)
        for i in sorted(range(1, len(tree)), key=lambda i: tree.depths[i]):
            own = tree.scores[i] + lam * tree.depths[i]
            value[i] = own if tree.parents[i] == 0 else min(value[tree.parents[i]], own)
        ranked = sorted(range(1, len(tree)), key=lambda i: (-value[i], tree.depths[i], i))
        return sorted(ranked[:budget])
    return best

model, tok = hfas.load_default_model(dtype=torch.float32)
hfas.enable(model)
drafter = hfas.Eagle3Drafter.from_pretrained(hfas.shipped_checkpoint("eagle3"), target=model)
qs = load_questions(sys.argv[4], per_category=per_cat)
res = {lam: [] for lam in bonuses}
ref = {}
for n, q in enumerate(qs):
    ids = tok.apply_chat_template([{"role": "user", "content": q.turns[0]}], add_generation_prompt=True, return_tensors="pt", return_dict=True)["input_ids"]
    for lam in bonuses:
        tree_builder.best_nodes = with_bonus(lam)
        out = model.generate(ids, max_new_tokens=128, do_sample=False, assistant_model=drafter,
                             assistant_policy=hfas.StaticTreePolicy(depth=d, top_k=k, total_tokens=t), return_dict_in_generate=True)
        seq = out.sequences[0].tolist()
        if n not in ref: ref[n] = seq
        assert seq == ref[n], "lossless violated"
        res[lam].append((out.speculation.mean_accepted_tokens, out.speculation.cycles, len(seq) - ids.shape[1], q.category))
    print(n, q.category, " ".join(f"{lam}:{res[lam][-1][0]:.2f}" for lam in bonuses), flush=True)
for lam in bonuses:
    toks = sum(r[2] for r in res[lam]); cyc = sum(r[1] for r in res[lam])
    print(f"bonus {lam}: decoding tau (tokens/cycles) {toks/cyc:.3f}; mean per question {statistics.mean(r[0] for r in res[lam]):.3f}")
