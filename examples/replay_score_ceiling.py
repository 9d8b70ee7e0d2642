"""What a draft policy that sees the first level's draft probabilities can gain, on a replay recording.

    python examples/replay_score_ceiling.py --recording artifacts/replay/sharegpt-d3k8 \
        --profile artifacts/policy_logs/profile_from_bench_policies_specbench130_epyc.json

`replay_oracle.py` picks each cycle's tree shape knowing the future; no policy can do that.
This script asks what the drafts themselves tell: after drafting one level, predict the tokens
each shape would commit from the level's candidate probabilities (ridge regression, fitted on
the other prompts: k-fold by prompt), then pick the shape with the best predicted tokens minus
λ × modelled seconds, λ being the throughput it reaches (Dinkelbach's fixed point, so that
picking maximises tokens per second). A plain step chosen this way still pays the draft level
it looked at. A learned policy with the same inputs should land near this line, not near the
oracle's.

`--after-level L` lets the choice come after drafting L levels (RADAR's and the dynamic tree's vantage):
the features are each level's best path probabilities up to L, and a shape shallower than L (the plain
step included) still pays the L draft levels it looked at; the static tree it is compared with pays
only its own.

`--with-history` adds what the last cycles tell (an optimistic version: whether the first level's
drafts were accepted at each of the 4 previous positions, their rate over the last 16, and the
deepest tree's accepted length at the previous position; a live policy knows these only at the
positions where its cycles started).

`--target-state-components N` adds the target's recorded hidden states at each cycle's start
(Re-SpS's state: the EAGLE-3 feature layers), projected on their first N principal components
(fitted on the training folds).

`--lookup-tokens N` replays the prompt-lookup branch on every tree (shapes and the static tree
alike, as `generate(..., prompt_lookup_num_tokens=N)` would) and adds what the lookup tells before
drafting: the chain's length, whether one was found, and (choosing after drafting) whether its
first token is the drafter's top first-level candidate. `--lookup-first` compares with `LookupFirstPolicy` (the static
tree drafted only where the branch found no chain) instead of the static tree on every cycle.

`--predictor mlp` predicts with a small MLP instead of the ridge (a nonlinear rule, as LTD's and RADAR's networks
are; early-stopped on a quarter of the training prompts).

`--after-level 0` chooses before drafting, from the history and the lookup alone (a plain step then
drafts nothing).

Every walk tracks the committed tokens the drafter has not read: a cycle that drafts nothing leaves
them to the next drafting cycle's first step, priced by the profile's catch-up table
(``HardwareProfile.draft_time``).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from functools import cache
from typing import Callable

import numpy as np
import torch
from replay_oracle import PLAIN_STEP, recorded_shapes, replay_outcomes, shape_name, static_shape

from hf_adaptive_spec.environments import ReplayEnvironment, load_recording
from hf_adaptive_spec.profiling.hardware import HardwareProfile, unread_after


def draft_level_features(environment: ReplayEnvironment, prompt: int, top_k: int, levels: int = 1) -> np.ndarray:
    """``[positions, 2 top_k levels + 1]``: each recorded tree's best ``top_k`` path probabilities at depths
    1..``levels`` (best first), their logs, 1."""
    rows = []
    for tree in environment.recording.prompts[prompt]:
        row = []
        for level in range(1, levels + 1):
            probs = sorted((np.exp(s) for s, d in zip(tree.scores, tree.depths) if d == level), reverse=True)[:top_k]
            probs += [0.0] * (top_k - len(probs))
            row += probs + list(np.log(np.array(probs) + 1e-6))
        rows.append(row + [1.0])
    return np.array(rows)


def target_state(environment: ReplayEnvironment, prompt: int) -> np.ndarray:
    """``[positions, sum of layer sizes]``: the target's recorded hidden states at each cycle's start."""
    trees = environment.recording.prompts[prompt]
    if not trees[0].features:
        raise ValueError("The recording holds no target features: record it with --feature-layers.")
    return np.stack(
        [np.concatenate([tree.features[layer].float().numpy() for layer in sorted(tree.features)]) for tree in trees]
    )


def lookup_features(environment: ReplayEnvironment, prompt: int, after_drafting: bool) -> np.ndarray:
    """``[positions, 2 or 3]``: the lookup chain's length (÷ ``lookup_tokens``), whether one was found and, when the
    choice comes after drafting, whether its first token is the top first-level draft."""
    rows = []
    for position, tree in enumerate(environment.recording.prompts[prompt]):
        chain = environment.lookup_chain(prompt, position)
        row = [len(chain) / environment.lookup_tokens, float(bool(chain))]
        if after_drafting:
            first_level = [(score, token) for score, token, d in zip(tree.scores, tree.tokens, tree.depths) if d == 1]
            row.append(float(bool(chain) and bool(first_level) and chain[0] == max(first_level)[1]))
        rows.append(row)
    return np.array(rows)


def history_features(accepted: list[int]) -> np.ndarray:
    """``[positions, 6]`` from the deepest tree's accepted length at every position (0.5 / 1 before the start)."""
    first_level = [min(a, 1) for a in accepted]
    rows = []
    for p in range(len(accepted)):
        previous = [first_level[p - j] if p >= j else 0.5 for j in (1, 2, 3, 4)]
        recent = first_level[max(0, p - 16) : p]
        rows.append(previous + [float(np.mean(recent)) if recent else 0.5, min(accepted[p - 1], 3) if p else 1.0])
    return np.array(rows)


def cross_validated_predictions(
    features: np.ndarray,
    tokens: np.ndarray,
    prompt_of: np.ndarray,
    folds: int,
    fit: Callable[[np.ndarray, np.ndarray, np.ndarray], Callable[[np.ndarray], np.ndarray]],
    state: np.ndarray | None = None,
    components: int = 0,
) -> np.ndarray:
    """Predictions of ``tokens`` ``[N, shapes]``, each prompt predicted by ``fit(x, tokens, prompts)`` on the other
    folds, the features standardised on those folds (``state``, if given, enters as its first ``components``
    principal components on those folds)."""
    predicted = np.zeros_like(tokens)
    all_features = features
    for fold in range(folds):
        test = prompt_of % folds == fold
        if state is not None:
            centre = state[~test].mean(0)
            basis = np.linalg.svd(state[~test] - centre, full_matrices=False)[2][:components].T
            features = np.concatenate([(state - centre) @ basis, all_features], axis=1)
        mean, scale = features[~test].mean(0), features[~test].std(0) + 1e-6
        mean[-1], scale[-1] = 0.0, 1.0  # keep the constant column
        x = (features - mean) / scale
        predicted[test] = fit(x[~test], tokens[~test], prompt_of[~test])(x[test])
    return predicted


def ridge_fit(ridge: float):
    """A linear rule: ridge regression with penalty ``ridge``."""

    def fit(x: np.ndarray, tokens: np.ndarray, prompts: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        weights = np.linalg.solve(x.T @ x + ridge * np.eye(x.shape[1]), x.T @ tokens)
        return lambda rows: rows @ weights

    return fit


def mlp_fit(hidden: int = 64, epochs: int = 2000, seed: int = 0):
    """A nonlinear rule: a two-hidden-layer MLP on the squared error, full batch, Adam, stopped at the epoch where
    a held-back quarter of the training prompts is predicted best (then that epoch's weights)."""

    def fit(x: np.ndarray, tokens: np.ndarray, prompts: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        torch.manual_seed(seed)
        held_back = torch.from_numpy(np.unique(prompts, return_inverse=True)[1] % 4 == 0)  # every 4th training prompt
        inputs, targets = torch.tensor(x, dtype=torch.float32), torch.tensor(tokens, dtype=torch.float32)
        net = torch.nn.Sequential(
            torch.nn.Linear(x.shape[1], hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
            torch.nn.Linear(hidden, tokens.shape[1]),
        )
        optimizer = torch.optim.Adam(net.parameters(), lr=3e-3, weight_decay=1e-4)
        best, best_state = float("inf"), None
        for _ in range(epochs):
            loss = torch.nn.functional.mse_loss(net(inputs[~held_back]), targets[~held_back])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                held_loss = torch.nn.functional.mse_loss(net(inputs[held_back]), targets[held_back]).item()
            if held_loss < best:
                best, best_state = held_loss, {k: v.clone() for k, v in net.state_dict().items()}
        net.load_state_dict(best_state)

        def predict(rows: np.ndarray) -> np.ndarray:
            with torch.no_grad():
                return net(torch.tensor(rows, dtype=torch.float32)).numpy().astype(tokens.dtype)

        return predict

    return fit


@dataclass
class Outcomes:
    """Every shape's replayed outcome at every recorded position, rows prompt after prompt."""

    tokens: np.ndarray  # [positions, shapes] committed tokens
    verify_seconds: np.ndarray  # [positions, shapes]
    draft_levels: np.ndarray  # [positions, shapes] levels drafted (at least those looked at before choosing)
    starts: list[int]
    lengths: list[int]
    prompt_lengths: list[int]
    profile: HardwareProfile

    def __post_init__(self) -> None:
        self.draft_time = cache(self.profile.draft_time)

    def seconds(self, row: int, unread: int) -> np.ndarray:
        """Each shape's modelled seconds at ``row`` when the drafter has ``unread`` committed tokens to read."""
        draft = [self.draft_time(int(levels), unread) for levels in self.draft_levels[row]]
        return self.verify_seconds[row] + np.array(draft)

    def looked_at(self, levels: int) -> Outcomes:
        """The same outcomes with every shape drafting at least ``levels`` (the levels seen before choosing)."""
        return Outcomes(
            self.tokens, self.verify_seconds, np.maximum(self.draft_levels, levels), self.starts, self.lengths,
            self.prompt_lengths, self.profile,
        )


def walk(choose: Callable[[int], int], outcomes: Outcomes) -> tuple[float, list[int], list[int]]:
    """Replay each prompt cycle by cycle, ``choose(row)`` picking the shape, each charged for the tokens its drafter
    has not read: ``(tokens per second, rows visited, shapes chosen)``."""
    total_tokens = total_seconds = 0.0
    visited, chosen = [], []
    for start, length, prompt_length in zip(outcomes.starts, outcomes.lengths, outcomes.prompt_lengths):
        position, unread = 0, prompt_length
        while position < length:
            row = start + position
            shape = choose(row)
            visited.append(row)
            chosen.append(shape)
            advanced = int(outcomes.tokens[row, shape])
            total_tokens += advanced
            total_seconds += outcomes.seconds(row, unread)[shape]
            unread = unread_after(unread, outcomes.draft_levels[row, shape] > 0, advanced)
            position += advanced
    return total_tokens / total_seconds, visited, chosen


def best_predicted_rate(
    predicted: np.ndarray, allowed: np.ndarray, outcomes: Outcomes, start_rate: float
) -> tuple[float, list[int]]:
    """Pick per cycle the shape in ``allowed`` with the best predicted tokens minus λ × its marginal seconds, λ being
    the throughput the picking reaches (Dinkelbach's fixed point): ``(tokens per second, shapes chosen)``.

    The marginal seconds charge a drafting cycle's first step as if it read one token: the tokens the drafter has
    not read are read by whichever cycle drafts next, so they are not this cycle's cost (charging them to it makes
    the picking skip the drafter ever more as they pile up); the walk charges them where they are read."""
    marginal = np.stack([outcomes.seconds(row, 1) for row in range(len(outcomes.tokens))])
    rate, chosen = start_rate, []
    for _ in range(20):
        choice = allowed[np.argmax(predicted[:, allowed] - rate * marginal[:, allowed], axis=1)]
        new_rate, _, chosen = walk(lambda row: int(choice[row]), outcomes)  # noqa: B023 (called within the iteration)
        if abs(new_rate - rate) < 1e-6:
            break
        rate = new_rate
    return rate, chosen


def gather(environment: ReplayEnvironment, shapes: dict, args: argparse.Namespace) -> tuple:
    """``(features, target states or None, outcomes, prompt of each row, lookup found at each row)``."""
    names, k = list(shapes), environment.recording.tree_config.top_k
    features, states, cycles, prompt_of, found, lengths = [], [], [], [], [], []
    for prompt in range(environment.num_prompts):
        replayed = replay_outcomes(environment, prompt, shapes)
        positions = environment.num_positions(prompt)
        lengths.append(positions)
        prompt_features = draft_level_features(environment, prompt, k, args.after_level)
        if args.with_history:
            deepest = [replayed[p, names[-1]].accepted_length for p in range(positions)]
            prompt_features = np.concatenate([history_features(deepest), prompt_features], axis=1)
        if args.lookup_tokens:
            lookup = lookup_features(environment, prompt, after_drafting=args.after_level > 0)
            prompt_features = np.concatenate([lookup, prompt_features], axis=1)
            found += list(lookup[:, 1] > 0)
        features.append(prompt_features)
        if args.target_state_components:
            states.append(target_state(environment, prompt))
        cycles += [[replayed[p, name] for name in names] for p in range(positions)]
        prompt_of += [prompt] * positions
    outcomes = Outcomes(
        tokens=np.array([[c.committed_tokens for c in row] for row in cycles], float),
        verify_seconds=np.array([[c.verify_time for c in row] for row in cycles]),
        draft_levels=np.array([[c.draft_levels for c in row] for row in cycles]),
        starts=[sum(lengths[:i]) for i in range(len(lengths))],
        lengths=lengths,
        prompt_lengths=[environment.prompt_length(p) for p in range(environment.num_prompts)],
        profile=environment.profile,
    )
    state = np.concatenate(states) if states else None
    return np.concatenate(features), state, outcomes, np.array(prompt_of), np.array(found, bool)


def parse_args() -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    """The command line, refused where two options contradict (before the recording loads)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recording", required=True, help="recording folder")
    parser.add_argument("--profile", required=True, help="HardwareProfile JSON")
    parser.add_argument("--static", default="1,8,8", help="depth,top_k,total_tokens of the static tree to compare with")
    parser.add_argument("--lookup-first", action="store_true", help="compare with LookupFirstPolicy of that tree")
    parser.add_argument("--folds", type=int, default=4, help="k of the k-fold split by prompt")
    parser.add_argument("--ridge", type=float, default=1.0, help="ridge penalty")
    parser.add_argument(
        "--predictor", choices=("ridge", "mlp"), default="ridge",
        help="the rule predicting each shape's tokens: linear (ridge) or a small MLP (nonlinear)",
    )
    parser.add_argument("--after-level", type=int, default=1, help="choose after drafting this many levels (0: before)")
    parser.add_argument(
        "--with-history", action="store_true", help="add the previous positions' acceptance to the features"
    )
    parser.add_argument("--lookup-tokens", type=int, default=0, help="replay the prompt-lookup branch of N tokens")
    parser.add_argument(
        "--target-state-components", type=int, default=0,
        help="add this many principal components of the target's recorded hidden states (0: none)",
    )
    args = parser.parse_args()
    if args.lookup_first and not args.lookup_tokens:
        parser.error("--lookup-first drafts only where the prompt-lookup branch did not match: give --lookup-tokens N")
    if args.folds < 2:  # one fold fits on no prompt: every prediction NaN, every choice the plain step
        parser.error(f"--folds {args.folds}: give at least 2 (each prompt is predicted by a rule fitted on the others)")
    return parser, args


def main() -> None:
    parser, args = parse_args()
    environment = ReplayEnvironment(
        load_recording(args.recording), HardwareProfile.load(args.profile), lookup_tokens=args.lookup_tokens
    )
    if not 0 <= args.after_level <= environment.recording.tree_config.depth:  # charged levels never drafted
        parser.error(f"--after-level {args.after_level}: the recording drafts "
                     f"{environment.recording.tree_config.depth} levels; give 0 (before drafting) up to that")
    shapes = recorded_shapes(environment)
    names = list(shapes)
    depth, _, total_tokens = static_shape(parser, args.static, shapes, environment.recording.tree_config.top_k)
    static_index, plain_index = names.index(shape_name(depth, total_tokens)), names.index(PLAIN_STEP)
    features, state, outcomes, prompt_of, found = gather(environment, shapes, args)
    if args.lookup_first:
        baseline = "LookupFirstPolicy"
        static, _, _ = walk(lambda row: plain_index if found[row] else static_index, outcomes)
    else:
        baseline = "static tree"
        static, _, _ = walk(lambda row: static_index, outcomes)
    fit = mlp_fit() if args.predictor == "mlp" else ridge_fit(args.ridge)
    predicted = cross_validated_predictions(
        features, outcomes.tokens, prompt_of, args.folds, fit, state, args.target_state_components
    )
    choices = {
        "plain step or the static tree": [PLAIN_STEP, shape_name(depth, total_tokens)],
        "plain step or any depth-1 tree": [PLAIN_STEP] + [n for n in names if n.startswith("depth 1,")],
        "plain step or any recorded shape": names,
    }
    print(f"{environment.num_prompts} prompts; {baseline} {args.static}: {static:.2f} tokens/s (modelled)")
    print(f"| choice after seeing {args.after_level} level(s) of drafts | tokens/s | vs {baseline} "
          "| cycles per choice |")
    print("|---|---|---|---|")
    looked_at = outcomes.looked_at(args.after_level)  # a shallower shape still pays the levels looked at
    for label, allowed in choices.items():
        allowed = np.array([names.index(n) for n in allowed])
        rate, chosen = best_predicted_rate(predicted, allowed, looked_at, static)
        used = np.bincount(chosen, minlength=len(names))
        counts = ", ".join(f"{names[i]}: {used[i]}" for i in np.argsort(-used) if used[i])
        print(f"| {label} | {rate:.2f} | {rate / static:.3f}x | {counts} |")


if __name__ == "__main__":
    main()
