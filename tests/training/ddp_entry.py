"""torchrun entry of the two-rank test: train with the real script, then each rank writes a
checksum of its drafter weights."""

import sys
from pathlib import Path

import torch

from hf_adaptive_spec.training.base import end_process_group
from hf_adaptive_spec.training.eagle3.script import main, make_parser

torch.set_num_threads(1)
script_args, training_args = make_parser().parse_args_and_config(args=sys.argv[1:])
trainer = main(script_args, training_args)
weights = torch.cat(
    [p.detach().flatten().double() for p in trainer.accelerator.unwrap_model(trainer.model).parameters()]
)
rank = trainer.args.process_index
Path(training_args.output_dir, f"rank{rank}.txt").write_text(
    f"{trainer.args.world_size} {weights.sum().item():.12e} {weights.abs().sum().item():.12e}\n"
)
end_process_group()  # as run_training_script does: an open gloo group can abort the exit
