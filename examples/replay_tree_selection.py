"""How many tokens a tree of at most N nodes could accept, by how its nodes are chosen, on a replay recording.

    python examples/replay_tree_selection.py --recording artifacts/replay/heldout-d6k4-stage14 --nodes 16

The engine drafts EAGLE-2's expansion (each level's ``top_k`` best nodes expanded ``top_k`` ways) and
verifies the nodes with the best path probability (the drafter's, multiplied along the path). This asks
whether a better choice of nodes within the same drafted tree would raise τ at a fixed verification size:

- ``draft probabilities``: the engine's rule;
- ``calibrated``: each node's chance of being accepted given its parent was, from a logistic model per
  depth of its own draft probability and its rank among its siblings, fitted on the other prompts
  (k-fold by prompt); nodes chosen by the product along the path, among the nodes the recording holds
  (the engine's expansion: a rule that ranked a level differently would also expand other nodes, which
  this does not see);
- ``in hindsight``: the accepted path itself (as deep as the budget allows): no choice of nodes within
  the drafted tree does better.

Cycles start where the previous one ended (accepted tokens + 1), as in ``generate``; τ counts the bonus
token. It also prints, per depth, the drafter's mean probability for a node and how often a node is
accepted when its parent was (calibration). Recordings are greedy (``hf-adaptive-spec record`` refuses
sampled drafts).
"""

from __future__ import annotations

import argparse

import numpy as np

from hf_adaptive_spec.environments import ReplayTree, load_recording

DEPTHS = 6  # depth one-hot columns of the calibration features (deeper nodes share the last)


def accepted_nodes(tree: ReplayTree, sequence: list[int]) -> np.ndarray:
    """Per node, whether its whole path is the target's greedy continuation (the root always is)."""
    accepted = np.zeros(len(tree.tokens), dtype=bool)
    accepted[0] = True
    for node in range(1, len(tree.tokens)):
        position = tree.context_length - 1 + tree.depths[node]
        follows = position < len(sequence) and tree.tokens[node] == sequence[position]
        accepted[node] = accepted[tree.parents[node]] and follows
    return accepted


def node_features(tree: ReplayTree) -> np.ndarray:
    """``[nodes, 3 DEPTHS + 2]``: depth one-hot, the node's own draft log-probability and probability by
    depth, whether it is its parent's best child, and its rank among its siblings (row 0: the root)."""
    scores = np.array(tree.scores)
    rows = np.zeros((len(tree.tokens), 3 * DEPTHS + 2))
    siblings: dict[int, list[int]] = {}
    for node in range(1, len(tree.tokens)):
        siblings.setdefault(tree.parents[node], []).append(node)
    for children in siblings.values():
        for rank, node in enumerate(sorted(children, key=lambda child: -scores[child])):
            own = scores[node] - scores[tree.parents[node]]
            column = min(tree.depths[node], DEPTHS) - 1
            rows[node, [column, DEPTHS + column, 2 * DEPTHS + column]] = 1.0, own, np.exp(own)
            rows[node, -2:] = float(rank == 0), float(rank)
    return rows


def fit_logistic(features: np.ndarray, labels: np.ndarray, l2: float = 1e-3, steps: int = 30) -> np.ndarray:
    """Weights of a ridge-penalised logistic regression, by Newton's method."""
    weights = np.zeros(features.shape[1])
    for _ in range(steps):
        probs = 1.0 / (1.0 + np.exp(-features @ weights))
        gradient = features.T @ (probs - labels) + l2 * weights
        hessian = (features * (probs * (1 - probs))[:, None]).T @ features + l2 * np.eye(len(weights))
        weights -= np.linalg.solve(hessian, gradient)
    return weights


def calibrated_scores(tree: ReplayTree, features: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Log-probability that each node's path is accepted: the fitted conditional chances, summed in logs."""
    conditional = np.log(1.0 / (1.0 + np.exp(-features @ weights)) + 1e-12)
    scores = np.zeros(len(tree.tokens))
    for node in range(1, len(tree.tokens)):  # parents come before their children
        scores[node] = scores[tree.parents[node]] + conditional[node]
    return scores


def walk(cycles: list[tuple[ReplayTree, np.ndarray, np.ndarray]], scores, budget: int, depth: int) -> tuple[int, int]:
    """``(tokens, cycles)`` of one prompt's greedy walk, verifying the ``budget`` best nodes no deeper than
    ``depth`` by ``scores(position)``."""
    position, tokens, count = 0, 0, 0
    while position < len(cycles):
        tree, accepted, _ = cycles[position]
        score = scores(position)
        allowed = [node for node in range(1, len(tree.tokens)) if tree.depths[node] <= depth]
        ranked = sorted(allowed, key=lambda node: (-score[node], tree.depths[node], node))
        gained = int(accepted[ranked[:budget]].sum())
        tokens, count, position = tokens + gained + 1, count + 1, position + gained + 1
    return tokens, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recording", required=True)
    parser.add_argument("--nodes", type=int, default=16, help="verified tokens per cycle, the root included")
    parser.add_argument("--depth", type=int, default=None, help="deepest verified node (default: the recording's)")
    parser.add_argument("--folds", type=int, default=4)
    args = parser.parse_args()
    if args.nodes < 1:  # a budget below 0 sliced the ranked nodes from the end: more than any budget
        parser.error(f"--nodes {args.nodes}: give at least 1 (the root, which every cycle verifies)")
    if args.folds < 2:
        parser.error(f"--folds {args.folds}: give at least 2 (each prompt is scored by a model fitted on the others)")
    recording = load_recording(args.recording)
    depth = args.depth if args.depth is not None else recording.tree_config.depth
    if depth < 1:
        parser.error(f"--depth {depth}: give a depth >= 1 (a tree to choose nodes in).")
    prompts = []
    for index, trees in enumerate(recording.prompts):
        sequence = recording.sequence(index)
        prompts.append([(tree, accepted_nodes(tree, sequence), node_features(tree)) for tree in trees])
    budget = args.nodes - 1
    totals = {"draft probabilities": [0, 0], "calibrated": [0, 0], "in hindsight": [0, 0]}
    for fold in range(args.folds):
        train = [cycle for index, cycles in enumerate(prompts) if index % args.folds != fold for cycle in cycles]
        rows = [(features[node], accepted[node]) for tree, accepted, features in train
                for node in range(1, len(tree.tokens)) if accepted[tree.parents[node]]]
        weights = fit_logistic(np.array([row for row, _ in rows]), np.array([label for _, label in rows], dtype=float))
        for index in range(fold, len(prompts), args.folds):
            cycles = prompts[index]
            rules = {
                "draft probabilities": lambda p, c=cycles: np.array(c[p][0].scores),
                "calibrated": lambda p, c=cycles, w=weights: calibrated_scores(c[p][0], c[p][2], w),
                "in hindsight": lambda p, c=cycles: np.where(c[p][1], 100.0 - np.array(c[p][0].depths), -100.0),
            }
            for name, rule in rules.items():
                tokens, count = walk(cycles, rule, budget, depth)
                totals[name][0] += tokens
                totals[name][1] += count
    config = recording.tree_config
    print(f"{len(prompts)} prompts, {recording.num_positions} positions; drafted trees: depth {config.depth}, "
          f"top_k {config.top_k}; verifying {args.nodes} nodes (root included) no deeper than {depth}")
    print("| nodes chosen by | tau | cycles |\n|---|---|---|")
    for name, (tokens, count) in totals.items():
        print(f"| {name} | {tokens / count:.3f} | {count} |")
    print_calibration([cycle for cycles in prompts for cycle in cycles])


def print_calibration(cycles: list[tuple[ReplayTree, np.ndarray, np.ndarray]]) -> None:
    """Per depth, the mean draft probability of a node whose parent was accepted, and how often it was."""
    print("| depth | mean draft probability | accepted, parent accepted | nodes |\n|---|---|---|---|")
    for depth in range(1, max(max(tree.depths) for tree, _, _ in cycles) + 1):
        probs, hits = [], []
        for tree, accepted, _ in cycles:
            for node in range(1, len(tree.tokens)):
                if tree.depths[node] == depth and accepted[tree.parents[node]]:
                    probs.append(np.exp(tree.scores[node] - tree.scores[tree.parents[node]]))
                    hits.append(accepted[node])
        print(f"| {depth} | {np.mean(probs):.3f} | {np.mean(hits):.3f} | {len(probs)} |")


if __name__ == "__main__":
    main()
