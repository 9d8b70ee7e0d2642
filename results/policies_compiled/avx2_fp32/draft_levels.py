"""What a draft level costs inside the compiled float32 ``generate`` (run from the repository root, alone):

    python results/policies_compiled/avx2_fp32/draft_levels.py > results/policies_compiled/avx2_fp32/draft_levels.log

The bench's cycles (policies_specbench13_fp32_compiled_avx2.json, LTD's and the confidence threshold's mixed depths)
drafted 12 ms at depth 1 and 15.6-16.5 ms more per later level; session 55's profile charged 12.0 ms per later level
(its ``draft_step_seconds`` was then a depth-4 tree's drafting time over all its levels, the first included, on a
short prompt). This times static trees of depth 1 to 4 (top-4, as the bench's trees) on the profile's short prompt
and on its 256-token context, with and without the 4-token prompt-lookup branch, and prints each depth's median
per-cycle drafting time, then what ``measure_in_generate`` now measures (cycles alternating the depth-4 tree and its
first level, the difference per level between) on the same prompt.
"""

from __future__ import annotations

import statistics

import torch

from hf_adaptive_spec.checkpoints import shipped_checkpoint
from hf_adaptive_spec.default_model import load_model
from hf_adaptive_spec.drafters import Eagle3Drafter
from hf_adaptive_spec.generation import enable, fast_path, fast_path_compile_config
from hf_adaptive_spec.policies import StaticTreePolicy
from hf_adaptive_spec.profiling.cli import PROMPT, long_prompt
from hf_adaptive_spec.profiling.hardware import static_cache_slots
from hf_adaptive_spec.profiling.measure import measure_in_generate

TREES = {1: (1, 4, 8), 2: (2, 4, 8), 3: (3, 4, 12), 4: (4, 4, 12)}


def median_draft_ms(model, ids, drafter, depth, lookup, **kwargs) -> float:
    tree = StaticTreePolicy(*TREES[depth])
    out = model.generate(ids, max_new_tokens=96, do_sample=False, assistant_model=drafter, assistant_policy=tree,
                         return_dict_in_generate=True, prompt_lookup_num_tokens=lookup or None, **kwargs)
    stats = out.speculation
    times = [t for t, levels in zip(stats.draft_times, stats.draft_levels) if levels == depth]
    return 1000 * statistics.median(times)


def main() -> None:
    torch.set_num_threads(2)
    model, tokenizer = load_model(None, torch.float32)
    enable(model)
    fast_path(model, buckets=(8, 12, 16, 32))
    kwargs = {"cache_implementation": "static", "compile_config": fast_path_compile_config(model.device)}
    drafter = Eagle3Drafter.from_pretrained(shipped_checkpoint("eagle3"), target=model)
    short = tokenizer.apply_chat_template([{"role": "user", "content": PROMPT}], add_generation_prompt=True,
                                          return_tensors="pt", return_dict=True)["input_ids"]
    prompts = {"short": short, "256-token": long_prompt(tokenizer, 256)}
    for depth in TREES:  # compile every shape first
        median_draft_ms(model, short, drafter, depth, 4, **kwargs)
    for name, ids in prompts.items():
        for lookup in (0, 4):
            per_depth = [median_draft_ms(model, ids, drafter, depth, lookup, **kwargs) for depth in TREES]
            slopes = [later - earlier for earlier, later in zip(per_depth, per_depth[1:])]
            print(f"{name} prompt, lookup {lookup}: per-cycle drafting by depth "
                  + ", ".join(f"{d}: {ms:.1f} ms" for d, ms in zip(TREES, per_depth))
                  + f"; each later level {', '.join(f'{s:.1f}' for s in slopes)} ms", flush=True)
        step, _ = measure_in_generate(model, ids, drafter, StaticTreePolicy(4, 4, 12), **kwargs)
        print(f"{name} prompt: measure_in_generate's later level {1000 * step:.1f} ms", flush=True)


if __name__ == "__main__":
    main()
