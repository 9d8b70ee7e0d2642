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
drafting: the chain's length, whether one was found, and whether its first token is the
drafter's top first-level candidate.
"""

from __future__ import annotations

import argparse

import numpy as np
from replay_oracle import PLAIN_STEP, recorded_shapes, replay_outcomes, shape_name

from hf_adaptive_spec.environments import ReplayEnvironment, load_recording
from hf_adaptive_spec.generation.prompt_lookup import lookup_continuation
from hf_adaptive_spec.profiling.hardware import HardwareProfile


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
    return np.stack([np.concatenate([tree.features[layer].float().numpy() for layer in sorted(tree.features)]) for tree in trees])


def lookup_features(environment: ReplayEnvironment, prompt: int) -> np.ndarray:
    """``[positions, 3]``: the lookup chain's length (÷ ``lookup_tokens``), whether one was found, and whether
    its first token is the top first-level draft."""
    rows = []
    for tree in environment.recording.prompts[prompt]:
        context = environment.sequences[prompt][: tree.context_length]
        chain = lookup_continuation(context, environment.lookup_ngram_size, environment.lookup_tokens)
        first_level = [(score, token) for score, token, d in zip(tree.scores, tree.tokens, tree.depths) if d == 1]
        agrees = bool(chain) and bool(first_level) and chain[0] == max(first_level)[1]
        rows.append([len(chain) / environment.lookup_tokens, float(bool(chain)), float(agrees)])
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
    ridge: float,
    state: np.ndarray | None = None,
    components: int = 0,
) -> np.ndarray:
    """Ridge predictions of ``tokens`` ``[N, shapes]``, each prompt predicted by a fit on the other folds
    (``state``, if given, enters as its first ``components`` principal components on those folds)."""
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
        a = x[~test]
        weights = np.linalg.solve(a.T @ a + ridge * np.eye(a.shape[1]), a.T @ tokens[~test])
        predicted[test] = x[test] @ weights
    return predicted


def walk(
    choice: np.ndarray, tokens: np.ndarray, seconds: np.ndarray, starts: list[int], lengths: list[int]
) -> tuple[float, list[int]]:
    """Replay each prompt cycle by cycle with ``choice[row]`` as the shape: ``(tokens per second, rows visited)``."""
    total_tokens = total_seconds = 0.0
    visited = []
    for start, length in zip(starts, lengths):
        position = 0
        while position < length:
            row = start + position
            visited.append(row)
            advanced = int(tokens[row, choice[row]])
            total_tokens += advanced
            total_seconds += seconds[row, choice[row]]
            position += advanced
    return total_tokens / total_seconds, visited


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recording", required=True, help="recording folder")
    parser.add_argument("--profile", required=True, help="HardwareProfile JSON")
    parser.add_argument("--static", default="1,8,8", help="depth,top_k,total_tokens of the static tree to compare with")
    parser.add_argument("--folds", type=int, default=4, help="k of the k-fold split by prompt")
    parser.add_argument("--ridge", type=float, default=1.0, help="ridge penalty")
    parser.add_argument("--after-level", type=int, default=1, help="choose after drafting this many levels")
    parser.add_argument("--with-history", action="store_true", help="add the previous positions' acceptance to the features")
    parser.add_argument("--lookup-tokens", type=int, default=0, help="replay the prompt-lookup branch of N tokens")
    parser.add_argument(
        "--target-state-components", type=int, default=0,
        help="add this many principal components of the target's recorded hidden states (0: none)",
    )
    args = parser.parse_args()
    profile = HardwareProfile.load(args.profile)
    environment = ReplayEnvironment(load_recording(args.recording), profile, lookup_tokens=args.lookup_tokens)
    k = environment.recording.tree_config.top_k
    shapes = recorded_shapes(environment)
    names = list(shapes)
    depth, _, total_tokens = (int(x) for x in args.static.split(","))
    static_name = shape_name(depth, total_tokens)

    features, states, tokens, seconds, prompt_of, starts, lengths = [], [], [], [], [], [], []
    for prompt in range(environment.num_prompts):
        outcomes = replay_outcomes(environment, prompt, shapes)
        positions = environment.num_positions(prompt)
        starts.append(sum(lengths))
        lengths.append(positions)
        prompt_features = draft_level_features(environment, prompt, k, args.after_level)
        if args.with_history:
            deepest = [outcomes[p, names[-1]][0] - 1 for p in range(positions)]
            prompt_features = np.concatenate([history_features(deepest), prompt_features], axis=1)
        if args.lookup_tokens:
            prompt_features = np.concatenate([lookup_features(environment, prompt), prompt_features], axis=1)
        features.append(prompt_features)
        if args.target_state_components:
            states.append(target_state(environment, prompt))
        tokens += [[outcomes[p, name][0] for name in names] for p in range(positions)]
        seconds += [[outcomes[p, name][1] for name in names] for p in range(positions)]
        prompt_of += [prompt] * positions
    features, tokens, seconds = np.concatenate(features), np.array(tokens, float), np.array(seconds)
    static, _ = walk(np.full(len(tokens), names.index(static_name)), tokens, seconds, starts, lengths)
    for index, name in enumerate(names):  # a shallower shape is chosen after drafting the levels looked at
        seconds[:, index] += max(0, args.after_level - shapes[name].config.depth) * profile.draft_step_seconds
    state = np.concatenate(states) if states else None
    predicted = cross_validated_predictions(
        features, tokens, np.array(prompt_of), args.folds, args.ridge, state, args.target_state_components
    )

    choices = {
        "plain step or the static tree": [PLAIN_STEP, static_name],
        "plain step or any depth-1 tree": [PLAIN_STEP] + [n for n in names if n.startswith("depth 1,")],
        "plain step or any recorded shape": names,
    }
    print(f"{environment.num_prompts} prompts; static tree {args.static}: {static:.2f} tokens/s (modelled)")
    print(f"| choice after seeing {args.after_level} level(s) of drafts | tokens/s | vs static tree | cycles per choice |")
    print("|---|---|---|---|")
    for label, allowed in choices.items():
        index = np.array([names.index(n) for n in allowed])
        rate = static
        for _ in range(20):  # Dinkelbach: λ = the throughput the choice reaches
            choice = index[np.argmax(predicted[:, index] - rate * seconds[:, index], axis=1)]
            new_rate, visited = walk(choice, tokens, seconds, starts, lengths)
            if abs(new_rate - rate) < 1e-6:
                break
            rate = new_rate
        used = np.bincount(choice[visited], minlength=len(names))
        counts = ", ".join(f"{names[i]}: {used[i]}" for i in np.argsort(-used) if used[i])
        print(f"| {label} | {rate:.2f} | {rate / static:.3f}x | {counts} |")


if __name__ == "__main__":
    main()
