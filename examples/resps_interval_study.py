"""Re-SpS decision_interval study on the exact greedy replay (no tracked file is modified).

For each decision_interval, the shipped policy is scored with ReSpSTrainer.evaluate() itself
(eval mode: argmax, action held `decision_interval` cycles, MultiReplayEnvironment.replay), and
ReSpSTrainer.best_static() for the best fixed action of the grid. The ReplayResult that
evaluate() replays is captured (environment.replay is wrapped, not changed) for per-cycle stats.

Usage:
    source .venv/bin/activate
    python examples/resps_interval_study.py 2>&1 | tee artifacts/policy_logs/resps_interval_study_heldout.log
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import os
import tempfile
import time
import warnings

import torch
from transformers.trainer_callback import PrinterCallback

from hf_adaptive_spec.environments import MultiReplayEnvironment, load_recording
from hf_adaptive_spec.policies.resps import ReSpSPolicy
from hf_adaptive_spec.policies.static import StaticTreePolicy
from hf_adaptive_spec.profiling.hardware import HardwareProfile
from hf_adaptive_spec.training.resps import ReSpSConfig, ReSpSTrainer

PLAIN = dict(depth=0, top_k=8, total_tokens=1)


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--policy", default="artifacts/resps-smollm2-plain")
    p.add_argument("--recording", default="artifacts/replay/heldout-d3k8")
    p.add_argument(
        "--profiles",
        nargs="+",
        default=[
            "artifacts/policy_logs/profile_from_bench_policies_specbench130_epyc.json", "artifacts/replay/profile.json"
        ],
    )
    p.add_argument("--intervals", nargs="+", type=int, default=[1, 2, 5, 10, 30])
    p.add_argument("--num-eval-prompts", type=int, default=4, help="the recipe's num_eval_prompts: the last N prompts")
    p.add_argument("--threads", type=int, default=1)
    return p.parse_args()


def deterministic_speed(cycles, policy_seconds: list[float]) -> float:
    """tokens / (draft + verify + given policy time per cycle); tokens as generate counts them (none past a
    generation's end, which accepted_length + 1 overcounted)."""
    tokens = sum(c.committed_tokens for c in cycles)
    seconds = sum(c.draft_time + c.verify_time + p for c, p in zip(cycles, policy_seconds))
    return tokens / seconds


def policy_free_totals(cycles_per_prompt) -> torch.Tensor:
    """Per prompt, ``[tokens committed, draft + verify seconds]`` (policy time excluded), for the bootstrap."""
    return torch.tensor([[sum(c.committed_tokens for c in cycles), sum(c.draft_time + c.verify_time for c in cycles)]
                         for cycles in cycles_per_prompt], dtype=torch.float64)


COLUMNS = """
Columns: tok/s = ReSpSTrainer.evaluate() eval_tokens_per_second (draft+verify from the profile, policy time
measured wall clock in this process); xplain = vs StaticTreePolicy(depth=0, top_k=8, total_tokens=1) replayed
the same way; xbest = evaluate()'s eval_vs_best_static. Starred columns: deterministic, policy charged the
training-time decision_seconds on decision cycles only (as the trainer's rewards); tok/s0: no policy time.
act.depth = mean depth of the chosen action; ver.depth = mean depth of the verified (pruned) tree;
verified = mean verified tokens incl. root; tau = tokens per cycle; plain% = cycles with a depth-0 action;
ver1% = cycles verifying the root alone (depth 0 or total_tokens 1); decis. = policy decisions;
pol.time% = measured policy time / modelled time; pcs% = share if each cycle cost profile.policy_call_seconds."""

HEADER = (f"{'interval':>8} {'tok/s':>8} {'xplain':>7} {'xbest':>7} | {'tok/s*':>8} {'xplain*':>7} "
          f"{'xbest*':>7} {'tok/s0':>8} | {'act.depth':>9} {'ver.depth':>9} {'verified':>8} {'tau':>6} "
          f"{'plain%':>6} {'ver1%':>6} {'decis.':>6} {'pol.time%':>9} {'pcs%':>6}")


class Instrumented:
    """The environment's replay and the policy's tree_config wrapped on the instance (behaviour unchanged):
    ``result`` is the ReplayResult evaluate() replayed last, ``choices`` the (decided, action) of each cycle."""

    def __init__(self, environment: MultiReplayEnvironment, policy: ReSpSPolicy):
        self.environment, self.policy = environment, policy
        self.result = None
        self.choices: list[tuple[bool, int]] = []

    def __enter__(self) -> Instrumented:
        replay, tree_config = self.environment.replay, self.policy.tree_config

        def captured_replay(policy, prompts=None):
            self.result = replay(policy, prompts)
            return self.result

        def logged_tree_config(state):
            config = tree_config(state)
            self.choices.append((self.policy.decided, self.policy._action))
            return config

        self.environment.replay, self.policy.tree_config = captured_replay, logged_tree_config
        return self

    def __exit__(self, *exc) -> None:
        del self.environment.replay, self.policy.tree_config  # the class's methods again


def main() -> None:
    args = parse()
    torch.set_num_threads(args.threads)
    logging.getLogger("transformers").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    recording = load_recording(args.recording)
    with open(os.path.join(args.policy, "checkpoint-4800", "resps_rollouts_0.json")) as f:
        train_decision_seconds = json.load(f)["decision_seconds"]  # what training charged per decision
    print(f"policy: {args.policy}  recording: {args.recording}  torch threads: {args.threads}")
    print(f"training-time decision_seconds (checkpoint-4800 rollout state): {train_decision_seconds:.3e} s")
    for profile_path in args.profiles:
        study_profile(args, recording, profile_path, train_decision_seconds)
    print(COLUMNS)


def study_profile(args: argparse.Namespace, recording, profile_path: str, train_decision_seconds: float) -> None:
    """The static grid, every interval and the prompt bootstrap, on all prompts and on the eval prompts."""
    profile = HardwareProfile.load(profile_path)
    environment = MultiReplayEnvironment([recording], profile)
    n = environment.num_prompts
    subsets = {"all": list(range(n)), "eval": list(range(n - args.num_eval_prompts, n))}
    policy = ReSpSPolicy.from_pretrained(args.policy)
    assert not policy.training
    # features: the policy reads state.features[2, 15, 27]; check the replay states carry them
    state = environment.state(0, 0)
    assert all(i in state.features for i in policy.feature_layers), (sorted(state.features), policy.feature_layers)
    config = ReSpSConfig(
        output_dir=tempfile.mkdtemp(prefix="resps_interval_"), report_to="none", disable_tqdm=True,
        max_steps=4800, grid_total_tokens=[1, 6, 8, 12], grid_depths=[0, 1, 2], grid_top_ks=[8],
        grid_paper_filter=False, save_strategy="no", eval_strategy="no", logging_strategy="no",
    )
    trainer = ReSpSTrainer(policy=policy, args=config, environment=environment,
                           train_dataset=range(n - args.num_eval_prompts),
                           eval_dataset=subsets["eval"], fit_normalizer=False)
    trainer.remove_callback(PrinterCallback)  # evaluate()'s Trainer.log would print every metrics dict
    pcs = profile.policy_call_seconds or 0.0
    print()
    print("=" * 118)
    print(f"profile: {profile_path}  verify_time(1)={profile.verify_time(1) * 1e3:.2f} ms  "
          f"draft_step={profile.draft_step_seconds * 1e3:.2f} ms  policy_call_seconds={pcs:.2e} s  "
          f"prompts={n} (eval = {subsets['eval']})")
    with Instrumented(environment, policy) as probe:
        for name, prompts in subsets.items():
            plain, best_det = print_static_grid(name, prompts, environment, policy, trainer)
            print(HEADER)
            per_prompt = {}
            for interval in args.intervals:
                per_prompt[interval] = print_interval(
                    probe, trainer, prompts, interval, plain, best_det, train_decision_seconds, pcs
                )
            print_bootstrap(per_prompt, environment, prompts, args.intervals)


def print_static_grid(name: str, prompts: list[int], environment, policy, trainer) -> tuple[tuple, float]:
    """Every action of the grid as a static tree; returns plain steps' (tok/s, policy-time-free tok/s) and the
    best policy-time-free speed."""
    statics = {}
    for action in policy.actions:
        r = environment.replay(StaticTreePolicy(**vars(action)), prompts)
        statics[action] = (r.tokens_per_second, deterministic_speed(r.all_cycles, [0.0] * len(r.all_cycles)))
    best_action, best_speed = trainer.best_static(prompts)  # the trainer's own choice (measured time)
    plain = statics[next(a for a in policy.actions if (a.depth, a.top_k, a.total_tokens) == (0, 8, 1))]
    print(f"\n[{name} prompts: {len(prompts)}]  static grid (tokens/s, policy-time-free):")
    for a, (s, d) in statics.items():
        print(f"   static tt={a.total_tokens:2d} d={a.depth} k={a.top_k}: {s:7.3f} tok/s  ({d:7.3f})")
    print(f"   best static (trainer.best_static): tt={best_action.total_tokens} d={best_action.depth} "
          f"k={best_action.top_k} {best_speed:.3f} tok/s;  plain steps {plain[0]:.3f} tok/s")
    return plain, max(s[1] for s in statics.values())


def print_interval(probe: Instrumented, trainer, prompts: list[int], interval: int, plain: tuple, best_det: float,
                   train_decision_seconds: float, pcs: float) -> torch.Tensor:
    """One row of the table: evaluate() with this decision_interval; returns the per-prompt
    [tokens, policy-time-free seconds] for the bootstrap."""
    policy = probe.policy
    policy.decision_interval = interval
    probe.choices.clear()
    tick = time.perf_counter()
    metrics = trainer.evaluate(eval_dataset=prompts)
    wall = time.perf_counter() - tick
    result, choices = probe.result, probe.choices
    cycles = result.all_cycles
    assert len(choices) == len(cycles)
    speed = metrics["eval_tokens_per_second"]
    assert abs(speed - result.tokens_per_second) < 1e-9
    # deterministic time: policy charged train_decision_seconds on decision cycles (as training rewards)
    det = deterministic_speed(cycles, [train_decision_seconds if d else 0.0 for d, _ in choices])
    zero = deterministic_speed(cycles, [0.0] * len(cycles))
    acts = [policy.actions[a] for _, a in choices]
    total = sum(c.seconds for c in cycles)
    pol = sum(c.policy_time for c in cycles)
    base = sum(c.draft_time + c.verify_time for c in cycles)
    pcs_frac = len(cycles) * pcs / (base + len(cycles) * pcs)
    counts = collections.Counter((a.total_tokens, a.depth) for a in acts)
    print(f"{interval:>8d} {speed:8.3f} {speed / plain[0]:7.4f} {metrics['eval_vs_best_static']:7.4f} | "
          f"{det:8.3f} {det / plain[1]:7.4f} {det / best_det:7.4f} {zero:8.3f} | "
          f"{sum(a.depth for a in acts) / len(acts):9.3f} {sum(c.draft_depth for c in cycles) / len(cycles):9.3f} "
          f"{sum(c.verified_tokens for c in cycles) / len(cycles):8.3f} {result.mean_accepted_tokens:6.3f} "
          f"{100 * sum(a.depth == 0 for a in acts) / len(acts):6.1f} "
          f"{100 * sum(c.verified_tokens == 1 for c in cycles) / len(cycles):6.1f} "
          f"{sum(d for d, _ in choices):6d} {100 * pol / total:9.3f} {100 * pcs_frac:6.3f}"
          f"   cycles={len(cycles)} actions(tt,d)={dict(sorted(counts.items()))} wall={wall:.1f}s")
    return policy_free_totals(result.cycles)


def print_bootstrap(per_prompt: dict[int, torch.Tensor], environment, prompts: list[int], intervals: list[int]) -> None:
    """Prompt bootstrap (policy-time-free speeds): how sure is each interval's gain over the last interval?"""
    static_pp = policy_free_totals(environment.replay(StaticTreePolicy(**PLAIN), prompts).cycles)
    gen = torch.Generator().manual_seed(0)
    draws = torch.randint(0, len(prompts), (2000, len(prompts)), generator=gen)
    ref = intervals[-1]

    def speeds(table):
        t = table[draws].sum(1)
        return t[:, 0] / t[:, 1]

    def q(x):
        return f"[{x.quantile(0.025):.4f}, {x.quantile(0.975):.4f}]"

    print(f"   prompt bootstrap (2000 resamples of the {len(prompts)} prompts, policy time excluded), 95% intervals:")
    for interval in intervals:
        vs_ref = speeds(per_prompt[interval]) / speeds(per_prompt[ref])
        vs_plain = speeds(per_prompt[interval]) / speeds(static_pp)
        print(f"   interval {interval:>2d}: / interval {ref}: {q(vs_ref)}   / plain steps: {q(vs_plain)}")


if __name__ == "__main__":
    main()
