"""torchrun entry of the two-rank LTD test: train with the real script, then each rank writes its
world size, its prompt shard and a checksum of its policy weights."""

import json
import sys
from pathlib import Path

import torch

from hf_adaptive_spec.training.base import end_process_group
from hf_adaptive_spec.training.ltd.script import main, make_parser

torch.set_num_threads(1)
script_args, training_args = make_parser().parse_args_and_config(args=sys.argv[1:])
trainer = main(script_args, training_args)
weights = torch.cat([p.detach().flatten().double() for p in trainer.policy.parameters()])
report = {
    "world_size": trainer.args.world_size,
    "prompts": trainer.rollouts.prompts,
    "weights": [f"{weights.sum().item():.12e}", f"{weights.abs().sum().item():.12e}"],
}
Path(training_args.output_dir, f"rank{trainer.args.process_index}.json").write_text(json.dumps(report))
end_process_group()  # as run_training_script does: an open gloo group can abort the exit
