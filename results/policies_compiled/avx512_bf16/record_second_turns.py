"""Session 65's experiment: record the second turns of the drafter's held-out conversations (user turn 1, the target's
own answer from artifacts/eagle3_heldout_regenerated.jsonl, user turn 2 from the ShareGPT wheel), float32, the shipped
drafter, depth 6 / top-k 4 / 16 tokens, 128 new tokens; then replay the trees 2/4/8, 1/4/4, 2/4/4 and the shipped LTD
variant with the 4-token branch on the first-turn, second-turn and Spec-Bench first-turn recordings:

    python results/policies_compiled/avx512_bf16/record_second_turns.py artifacts/replay/heldout-turn2-d6k4-shipped 16

(log: record_second_turns.log; about 5 minutes). `hf-adaptive-spec record` then took first user turns only; this was
the evidence for giving it second turns. Since session 66 `record --turns 2` records them, after the target's own
recorded answer (128 tokens, as the bench asks) instead of the regenerated file's (replay_turns2.py)."""
import logging
import sys
from pathlib import Path

import torch

from hf_adaptive_spec.environments import ReplayEnvironment, cli, load_recording
from hf_adaptive_spec.policies import AutoDraftPolicy
from hf_adaptive_spec.policies.base import TreeConfig
from hf_adaptive_spec.policies.static import StaticTreePolicy
from hf_adaptive_spec.profiling import HardwareProfile
from hf_adaptive_spec.training_data.regenerate import prompt_ids
from hf_adaptive_spec.training_data.sharegpt import iter_sharegpt

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
torch.set_num_threads(2)
output, count = Path(sys.argv[1]), int(sys.argv[2])
if not output.exists():
    model, tokenizer = cli.load_target(None)
    drafter = cli.load_drafter(model, None)
    args = cli.make_parser().parse_args(["--output", str(output), "--prompts-file", "artifacts/eagle3_heldout_regenerated.jsonl",
                                         "--num-prompts", "100"])
    heldout = {c.id: c for c in cli.training_conversations(args)}
    second_user = {c.id: c.messages[2] for c in iter_sharegpt() if c.id in heldout and len(c.messages) >= 3}
    prompts = [torch.tensor([ids]) for ids in (prompt_ids(tokenizer, c.messages[:2] + [second_user[i]])
                                               for i, c in heldout.items() if i in second_user) if len(ids) <= 768][:count]
    output.mkdir(parents=True)
    cli.record_shards(model, drafter, prompts, output, 0, len(prompts), TreeConfig(6, 4, 16), 128, tuple(drafter.feature_layers))
torch.set_num_threads(1)
profile = HardwareProfile.load("results/policies_compiled/avx512_bf16/profile_bf16_compiled_avx512.json")
ltd = AutoDraftPolicy.from_pretrained("hf_adaptive_spec/checkpoints/ltd-smollm2-135m-instruct-bf16-compiled")
for recording in ("artifacts/replay/heldout-d6k4-shipped", str(output), "artifacts/replay/specbench13-d6k4-shipped"):
    environment = ReplayEnvironment(load_recording(recording), profile, lookup_tokens=4)
    policies = {"2/4/8": StaticTreePolicy(2, 4, 8), "1/4/4": StaticTreePolicy(1, 4, 4), "2/4/4": StaticTreePolicy(2, 4, 4), "ltd": ltd}
    speed = {name: environment.replay(policy) for name, policy in policies.items()}
    tau = {name: result.mean_accepted_tokens for name, result in speed.items()}
    rate = {name: result.tokens_per_second for name, result in speed.items()}
    print(f"{recording} ({environment.num_prompts} prompts): " + ", ".join(f"{n} tau {tau[n]:.3f} {rate[n]:.1f} tok/s" for n in policies)
          + f"; second level's worth {tau['2/4/8'] / tau['1/4/4']:.3f}, 1/4/4 {rate['1/4/4'] / rate['2/4/8']:.3f}x 2/4/8, "
          f"LTD {rate['ltd'] / rate['2/4/8']:.3f}x 2/4/8 and {rate['ltd'] / rate['1/4/4']:.3f}x 1/4/4")
