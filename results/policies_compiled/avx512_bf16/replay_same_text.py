"""Does the replay reproduce live bfloat16 cycles where the texts agree, and what sets the second level's worth?

    python results/policies_compiled/avx512_bf16/replay_same_text.py artifacts/replay/specbench13-d6k4-shipped \
        results/policies_compiled/avx512_bf16/profile_bf16_compiled_avx512.json \
        results/policies_compiled/avx512_bf16/shipped_specbench130_bf16_compiled_avx512.progress.jsonl

(log: replay_same_text.log, session 65). Part 1: each recorded first turn (the recording's float32 text, matched to
the run's float32 answers) replayed with the trees 2/4/8 and 1/4/4 + the 4-token branch, against the live turn of the
same question: τ in both, whether the live text is the float32 text, and whether every cycle's accepted length is the
same. Part 2: the live τ of 2/4/8, 1/4/4 and LTD by turn and by category group over the whole run."""

import collections
import sys

import torch

from hf_adaptive_spec.bench.progress import read_progress
from hf_adaptive_spec.environments import ReplayEnvironment, load_recording
from hf_adaptive_spec.policies.static import StaticTreePolicy
from hf_adaptive_spec.profiling import HardwareProfile

torch.set_num_threads(1)
recording, progress = load_recording(sys.argv[1]), sys.argv[3]
environment = ReplayEnvironment(recording, HardwareProfile.load(sys.argv[2]), lookup_tokens=4)
records = list(read_progress(progress)[1].values())
float32_answers = {r.question_id: r.turns[0].fp32_reference_ids for r in records if r.method == "stock"}
first_turns = {(r.question_id, r.method): r.turns[0] for r in records}
questions = {}
for prompt in range(environment.num_prompts):
    generated = recording.sequence(prompt)[len(recording.prompt_ids[prompt]):]
    questions[prompt] = next(q for q, ids in float32_answers.items() if ids and ids[:20] == generated[:20])
TREES = {"eagle3+lookup+sized": StaticTreePolicy(2, 4, 8), "eagle3@1/4/4+lookup+sized": StaticTreePolicy(1, 4, 4)}
for method, policy in TREES.items():
    for prompt, question in questions.items():
        live = first_turns[question, method]
        cycles = environment.replay_prompt(prompt, policy)
        replayed_tau = sum(c.committed_tokens for c in cycles) / len(cycles)
        same = [c.accepted_length for c in cycles] == live.accepted_lengths
        print(f"{method:28s} question {question}: float32 text live {live.fp32_identical}, tau replay {replayed_tau:.3f} "
              f"live {live.new_tokens / len(live.accepted_lengths):.3f}, every cycle the same {same}")
totals = collections.defaultdict(lambda: [0, 0])
for r in records:
    if r.method in (*TREES, "eagle3-ltd+lookup+sized"):
        for turn in r.turns:
            group = "MT-bench categories" if r.question_id <= 160 else "other categories"
            for key in (f"turn {turn.turn}", f"turn {turn.turn}, {group}"):
                totals[key, r.method][0] += turn.new_tokens
                totals[key, r.method][1] += len(turn.accepted_lengths)
for key in sorted({k for k, _ in totals}):
    tau = {m: totals[key, m][0] / totals[key, m][1] for m in (*TREES, "eagle3-ltd+lookup+sized")}
    deep, shallow, ltd = tau.values()
    print(f"{key}: tau 2/4/8 {deep:.3f}, 1/4/4 {shallow:.3f}, LTD {ltd:.3f}; second level's worth {deep / shallow:.3f}")
