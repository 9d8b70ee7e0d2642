"""The held-out subsets of the overlap measurement (results/README.md, session 78): the first 64 conversations of
artifacts/eagle3_heldout_regenerated.jsonl, split by what the training data of stages 14-15
(artifacts/sharegpt_smollm2_target14.jsonl) holds of them. Writes four JSONL files to the folder given.

    python results/eagle3_curve/heldout_overlap/subsets.py /tmp/heldout_subsets
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HELD_OUT, TRAINING = "artifacts/eagle3_heldout_regenerated.jsonl", "artifacts/sharegpt_smollm2_target14.jsonl"


def first_user_turn(record: dict) -> str | None:
    return next((m["content"] for m in record["conversation"] if m["role"] == "user"), None)


def sharegpt_conversation(record_id: str) -> str:
    """ShareGPT splits a long conversation into records ``<id>_0``, ``<id>_14``, ...: the id they share."""
    return record_id.rsplit("_", 1)[0]


def main(folder: str) -> None:
    lines = Path(HELD_OUT).read_text(encoding="utf-8").split("\n")[:64]
    held_out = [json.loads(line) for line in lines]
    training = [json.loads(line) for line in Path(TRAINING).read_text(encoding="utf-8").split("\n") if line.strip()]
    prompts = {first_user_turn(r) for r in training}
    conversations = {sharegpt_conversation(r["id"]) for r in training}
    same_prompt = {i for i, r in enumerate(held_out) if first_user_turn(r) in prompts}
    same_conversation = {i for i, r in enumerate(held_out) if sharegpt_conversation(r["id"]) in conversations}
    subsets = {
        "all64": range(64),
        "clean58": [i for i in range(64) if i not in same_prompt],
        "overlap6": sorted(same_prompt),
        "clean48": [i for i in range(64) if i not in same_prompt | same_conversation],
    }
    Path(folder).mkdir(parents=True, exist_ok=True)
    for name, rows in subsets.items():
        (Path(folder) / f"heldout_{name}.jsonl").write_text("".join(lines[i] + "\n" for i in rows), encoding="utf-8")
        print(name, len(rows), "conversations" + (f": {sorted(rows)}" if len(rows) < 20 else ""))


if __name__ == "__main__":
    main(sys.argv[1])
