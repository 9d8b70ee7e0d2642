"""Session 69. Per-turn 'other' time (wall - draft - verify - policy) of a bench json's engine method, fitted as
a + b * prompt tokens + c * cycles (least squares): what the 13% is made of."""
import json, sys
import numpy as np
from transformers import AutoTokenizer
from hf_adaptive_spec.bench.conversation import turn_prompt_ids
from hf_adaptive_spec.bench.questions import load_questions
from hf_adaptive_spec.default_model import default_model_cache_dir

path, method = sys.argv[1], sys.argv[2]
d = json.load(open(path))
tok = AutoTokenizer.from_pretrained(default_model_cache_dir())
questions = {q.question_id: q for q in load_questions(d['settings']['questions'])}
ref = {r['question_id']: r for r in d['records'] if r['method'] == 'stock'}  # stock's answers build the later turns
rows = []
for r in d['records']:
    if r['method'] != method:
        continue
    q = questions[r['question_id']]
    answers = [t['output_ids'] for t in ref[r['question_id']]['turns']]
    for t in r['turns']:
        prompt = turn_prompt_ids(tok, q.turns, answers[: t['turn']]).shape[1]
        other = t['wall_time'] - t['draft_time'] - t['verify_time'] - t['policy_time']
        rows.append((prompt, len(t['accepted_lengths']), other, t['wall_time']))
x = np.array(rows)
A = np.c_[np.ones(len(x)), x[:, 0], x[:, 1]]
coef, *_ = np.linalg.lstsq(A, x[:, 2], rcond=None)
pred = A @ coef
r2 = 1 - ((x[:, 2] - pred) ** 2).sum() / ((x[:, 2] - x[:, 2].mean()) ** 2).sum()
print(f"{method}: {len(x)} turns, other {x[:, 2].sum():.1f} s of {x[:, 3].sum():.1f} s wall ({x[:, 2].sum() / x[:, 3].sum():.1%})")
print(f"fit: {coef[0] * 1000:.1f} ms per call + {coef[1] * 1000:.3f} ms per prompt token + {coef[2] * 1000:.3f} ms per cycle (R^2 {r2:.3f})")
parts = np.c_[coef[0] * np.ones(len(x)), coef[1] * x[:, 0], coef[2] * x[:, 1]].sum(0)
print("share of wall time: per call %.1f%%, prompt %.1f%%, cycles %.1f%%" % tuple(100 * parts / x[:, 3].sum()))
print(f"mean prompt {x[:, 0].mean():.0f} tokens, mean cycles {x[:, 1].mean():.0f}")
