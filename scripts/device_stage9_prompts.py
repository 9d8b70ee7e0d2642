"""The prompts scripts/device_stage9.sh carries to the GPU machine: ShareGPT's usable conversations
(evaluation prompts dropped) without the drafter's held-out ones, cut to their first two user turns
(the regeneration answers no more), in ShareGPT's own format, so `regenerate_sharegpt.py
--sharegpt_file` reads them. The same prompts as `--exclude_ids_from
artifacts/eagle3_heldout_regenerated.jsonl` on the full file, in 4.6 MB gzipped instead of 126 MB.

    python scripts/device_stage9_prompts.py --output .xfer2/sharegpt_prompts.json && gzip .xfer2/sharegpt_prompts.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hf_adaptive_spec.training_data import drop_leaked, eval_question_digests, iter_sharegpt
from hf_adaptive_spec.training_data.jsonl_output import written_ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True)
    parser.add_argument("--heldout", default="artifacts/eagle3_heldout_regenerated.jsonl")
    parser.add_argument("--eval-data-dir", default="../shared/data")
    args = parser.parse_args()
    held_out = written_ids(Path(args.heldout))
    records = []
    for conversation in drop_leaked(iter_sharegpt(), eval_question_digests(args.eval_data_dir)):
        if conversation.id in held_out:
            continue
        users = [message["content"] for message in conversation.messages if message["role"] == "user"][:2]
        turns = [{"from": "human", "value": users[0]}]
        if len(users) > 1:  # an assistant turn between keeps the two user turns apart (its text is never used)
            turns += [{"from": "gpt", "value": "."}, {"from": "human", "value": users[1]}]
        records.append({"id": conversation.id, "conversations": turns})
    Path(args.output).write_text(json.dumps(records), encoding="utf-8")
    print(f"{len(records)} conversations ({len(held_out)} held out)")


if __name__ == "__main__":
    main()
