"""τ of static trees ranked by EAGLE-2's scores (cumulative draft log-probabilities) against the same trees with each
top-ranked child's draft probability replaced by its measured greedy acceptance (calibration.py's step-0 rank-1
table, held-out ShareGPT answers, stage 15). An experiment: it patches the tree builder's `_add_children` in this
process only. Spec-Bench first turns, 128 tokens, the shipped drafter; in float32 both rankings give stock's tokens, so
τ differs only by the trees verified.

python results/eagle3_curve/heldout_gap/tau_calibrated.py --per-category 2 --dtype float32 > results/eagle3_curve/heldout_gap/tau_calibrated_stage15_fp32.log
"""
import argparse, collections, json, time
import numpy as np
import torch
import hf_adaptive_spec as hfas
from hf_adaptive_spec.generation import tree_builder as tb

XS = [0.0, 0.05, 0.15, 0.25, 0.35, 0.45, 0.55, 0.65, 0.75, 0.85, 0.96, 1.0]
YS = [0.05, 0.12, 0.30, 0.42, 0.55, 0.65, 0.75, 0.83, 0.92, 0.96, 0.99, 1.0]
original = tb.TreeBuilder._add_children
MODE = {"calibrated": False}

def calibrated_add_children(self, tree, frontier, rows, config):
    if not MODE["calibrated"] or config.sample_drafts:
        return original(self, tree, frontier, rows, config)
    mapping = self.drafter.draft_to_target
    child_log_probs, draft_ids = rows.topk(min(config.top_k, rows.shape[-1]), dim=-1)
    child_log_probs = child_log_probs.float().clone()
    p1 = child_log_probs[:, 0].exp().cpu().numpy()
    child_log_probs[:, 0] = torch.from_numpy(np.log(np.interp(p1, XS, YS))).to(child_log_probs)
    token_ids = mapping[draft_ids] if mapping is not None else draft_ids
    new_nodes = []
    for parent, tokens, log_probs in zip(frontier, token_ids.tolist(), child_log_probs.tolist()):
        new_nodes += tree.add_children(parent, tokens, log_probs)
    return new_nodes

tb.TreeBuilder._add_children = calibrated_add_children
p = argparse.ArgumentParser()
p.add_argument("--per-category", type=int, default=1)
p.add_argument("--shapes", default="6/8/16,2/4/8")
p.add_argument("--dtype", default="bfloat16")
p.add_argument("--skip", type=int, default=0)
a = p.parse_args()
torch.set_num_threads(2)
model, tok = hfas.load_default_model(dtype=getattr(torch, a.dtype))
hfas.enable(model)
drafter = hfas.Eagle3Drafter.from_pretrained(hfas.shipped_checkpoint("eagle3"), target=model)
shapes = [tuple(int(x) for x in s.split("/")) for s in a.shapes.split(",")]
seen = collections.Counter(); qs = []
for line in open("../shared/data/spec_bench/question.jsonl"):
    q = json.loads(line)
    seen[q["category"]] += 1
    if a.skip < seen[q["category"]] <= a.skip + a.per_category:
        qs.append(q)
tot = collections.defaultdict(lambda: [0, 0])
for q in qs:
    ids = tok.apply_chat_template([{"role": "user", "content": q["turns"][0]}], add_generation_prompt=True, return_tensors="pt", return_dict=True)
    for s in shapes:
        for mode in (False, True):
            MODE["calibrated"] = mode
            pol = hfas.StaticTreePolicy(depth=s[0], top_k=s[1], total_tokens=s[2])
            out = model.generate(**ids, assistant_model=drafter, assistant_policy=pol, do_sample=False, max_new_tokens=128, return_dict_in_generate=True)
            st = out.speculation
            tot[(s, mode)][0] += sum(st.accepted_lengths); tot[(s, mode)][1] += st.cycles
            print(q["question_id"], q["category"], s, "calibrated" if mode else "eagle2", round(1 + sum(st.accepted_lengths) / st.cycles, 3), flush=True)
for (s, mode), (acc, cyc) in sorted(tot.items()):
    print("SHAPE", "/".join(map(str, s)), "calibrated" if mode else "eagle2", "tau", round(1 + acc / cyc, 3), flush=True)
