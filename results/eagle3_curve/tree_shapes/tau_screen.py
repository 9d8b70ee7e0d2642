"""Screen static tree shapes for tau (tokens per target forward) on Spec-Bench first turns, eager bfloat16,
the shipped drafter (no timing: tau only; the bench's `eagle3@D/K/N` methods measure speed).

python results/eagle3_curve/tree_shapes/tau_screen.py --per-category 1 --shapes 6/4/16,8/8/16,8/4/16,10/4/16,6/1/7
"""
import argparse, collections, json, time
import torch
import hf_adaptive_spec as hfas

p = argparse.ArgumentParser()
p.add_argument("--questions", default="../shared/data/spec_bench/question.jsonl")
p.add_argument("--per-category", type=int, default=1)
p.add_argument("--shapes", required=True)
p.add_argument("--checkpoint", default=None)
p.add_argument("--max-new-tokens", type=int, default=128)
p.add_argument("--dtype", default="bfloat16")
a = p.parse_args()
torch.set_num_threads(2)
dtype = getattr(torch, a.dtype)
model, tok = hfas.load_default_model(dtype=dtype)
hfas.enable(model)
drafter = hfas.Eagle3Drafter.from_pretrained(a.checkpoint or hfas.shipped_checkpoint("eagle3"), target=model)
shapes = [tuple(int(x) for x in s.split("/")) for s in a.shapes.split(",")]
seen = collections.Counter(); qs = []
for line in open(a.questions):
    q = json.loads(line)
    if seen[q["category"]] < a.per_category:
        seen[q["category"]] += 1; qs.append(q)
acc = {s: collections.defaultdict(lambda: [0, 0]) for s in shapes}
for q in qs:
    ids = tok.apply_chat_template([{"role": "user", "content": q["turns"][0]}], add_generation_prompt=True, return_tensors="pt", return_dict=True)
    for s in shapes:
        pol = hfas.StaticTreePolicy(depth=s[0], top_k=s[1], total_tokens=s[2])
        t = time.time()
        out = model.generate(**ids, assistant_model=drafter, assistant_policy=pol, do_sample=False, max_new_tokens=a.max_new_tokens, return_dict_in_generate=True)
        st = out.speculation
        acc[s][q["category"]][0] += sum(st.accepted_lengths); acc[s][q["category"]][1] += st.cycles
        print(q["question_id"], q["category"], s, round(st.mean_accepted_tokens, 2), round(time.time() - t, 1), flush=True)
for s in shapes:
    tot = [sum(v[0] for v in acc[s].values()), sum(v[1] for v in acc[s].values())]
    print("SHAPE", "/".join(map(str, s)), "tau", round(1 + tot[0] / tot[1], 3), {c: round(1 + x / y, 2) for c, (x, y) in acc[s].items()}, flush=True)
