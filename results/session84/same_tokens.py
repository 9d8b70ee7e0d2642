"""Turn-by-turn: does a method produce the same tokens in two bench reports? Session 84 compares its run of
LookupFirstPolicy 2/4/8 + branch (the decoding path after 854188b) with session 70's (the same configuration on the
same machine kind): `python results/session84/same_tokens.py NEW.json OLD.json METHOD [METHOD...]`."""

import json
import sys


def outputs(path: str, method: str) -> dict:
    with open(path) as report:
        records = json.load(report)["records"]
    return {(r["question_id"], t["turn"]): t["output_ids"] for r in records if r["method"] == method
            for t in r["turns"]}


def main(new: str, old: str, *methods: str) -> None:
    for method in methods:
        a, b = outputs(new, method), outputs(old, method)
        shared = sorted(set(a) & set(b))
        same = sum(a[k] == b[k] for k in shared)
        print(f"{method}: {same} of {len(shared)} turns identical ({len(a)} in the new report, {len(b)} in the old)")


if __name__ == "__main__":
    main(*sys.argv[1:])
