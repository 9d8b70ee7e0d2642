"""Is the held-out chain τ (2.55 at depth 6) and Spec-Bench's live chain τ (1.79) the same quantity?

For Spec-Bench first turns (float32, eager, the shipped drafter) the engine decodes greedily with a
chain of depth 6 (tree 6/1/7) and records each cycle's accepted tokens. Its tokens are the target's
greedy tokens (float32 is lossless), so the same turns then go through the trainer's held-out
measure (`HeldOutSet`: the training-time test on the target's own tokens). Three numbers per category:

- live: τ of the engine (mean accepted + 1 per target forward);
- held-out measure: the chain τ(6) averaged over every answer position (what the learning curve reports);
- walk: the held-out per-position chains walked as decoding walks them (a cycle starts where the
  previous one stopped), which removes the difference in which positions are counted.

live == walk says the engine drafts what training measures; walk < held-out measure says cycle starts
are harder positions than the average; the held-out measure here against 2.55 says how much harder
Spec-Bench's answers are than ShareGPT's.

python results/eagle3_curve/heldout_gap/gap.py --per-category 5 --json results/eagle3_curve/heldout_gap/gap_stage15.json
"""
import argparse, collections, json, time

import torch

import hf_adaptive_spec as hfas
from hf_adaptive_spec.training.eagle3 import HeldOutSet

p = argparse.ArgumentParser()
p.add_argument("--questions", default="../shared/data/spec_bench/question.jsonl")
p.add_argument("--per-category", type=int, default=5)
p.add_argument("--checkpoint", default=None)
p.add_argument("--depth", type=int, default=6)
p.add_argument("--max-new-tokens", type=int, default=128)
p.add_argument("--json", required=True)
a = p.parse_args()
torch.set_num_threads(2)
model, tok = hfas.load_default_model(dtype=torch.float32)
hfas.enable(model)
drafter = hfas.Eagle3Drafter.from_pretrained(a.checkpoint or hfas.shipped_checkpoint("eagle3"), target=model)
policy = hfas.StaticTreePolicy(depth=a.depth, top_k=1, total_tokens=a.depth + 1)
seen, questions = collections.Counter(), []
for line in open(a.questions):
    q = json.loads(line)
    if seen[q["category"]] < a.per_category:
        seen[q["category"]] += 1
        questions.append(q)

rows = []
for q in questions:
    ids = tok.apply_chat_template([{"role": "user", "content": q["turns"][0]}], add_generation_prompt=True,
                                  return_tensors="pt", return_dict=True)
    start = time.time()
    out = model.generate(**ids, assistant_model=drafter, assistant_policy=policy, do_sample=False,
                         max_new_tokens=a.max_new_tokens, return_dict_in_generate=True)
    prompt = ids["input_ids"][0].tolist()
    answer = out.sequences[0, len(prompt):].tolist()
    sample = {"input_ids": prompt + answer, "loss_mask": [0] * len(prompt) + [1] * len(answer)}
    held = HeldOutSet(model, [sample], drafter.model, depth=a.depth).evaluate(drafter.model)
    chains = held.accepted[0].tolist()  # per answer position, in order
    rows.append({"question_id": q["question_id"], "category": q["category"], "answer_tokens": len(answer),
                 "live_accepted": list(out.speculation.accepted_lengths), "chains": chains, "walked": held.cycles,
                 "first_draft_hits": held.hits[0], "positions": held.answers[0]})
    print(q["question_id"], q["category"], len(answer), "live", round(out.speculation.mean_accepted_tokens, 3),
          "walked", round(1 + sum(held.cycles) / max(len(held.cycles), 1), 3),
          "heldout", round(1 + sum(chains) / max(len(chains), 1), 3), round(time.time() - start, 1), flush=True)
json.dump({"settings": vars(a), "rows": rows}, open(a.json, "w"))
