"""Mark the answers ``max_new_tokens`` cut in regenerated JSONL files written before regeneration marked them.

```bash
python trainers/mark_truncated.py --max-new-tokens 256 artifacts/sharegpt_smollm2_regenerated.jsonl
python trainers/mark_truncated.py --max-new-tokens 128 artifacts/sharegpt_smollm2_translation.jsonl
```

An answer is marked ``"truncated": true`` when it re-encodes to at least ``--max-new-tokens`` minus
``--margin`` tokens (the rule and its limits: :mod:`hf_adaptive_spec.training_data.cut_answers`).
EAGLE-3 training then leaves its end marker out, and DVI's completions end without one. Pass the cap
each file was regenerated with; files regenerated since 2026-11-30 are marked already (and answers that keep
their ``token_ids`` are left as they are). Every other field of the records is kept.
"""

from __future__ import annotations

import argparse

from hf_adaptive_spec.default_model import load_model
from hf_adaptive_spec.training_data.cut_answers import DEFAULT_MARGIN, mark_cut_answers


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", help="JSONL files of {'conversation': [...]} records, rewritten in place")
    parser.add_argument("--max-new-tokens", type=int, required=True, help="the cap the files were regenerated with")
    parser.add_argument(
        "--margin", type=int, default=DEFAULT_MARGIN, help="tokens under the cap a cut answer may re-encode to"
    )
    parser.add_argument("--model", default="default", help="the target whose tokenizer regenerated the files")
    args = parser.parse_args(argv)
    _, tokenizer = load_model(args.model)
    for path in args.files:
        found = mark_cut_answers(path, tokenizer, args.max_new_tokens, args.margin)
        print(f"{path}: {found.marked} of {found.answers} answers marked truncated "
              f"({found.already_marked} were already)")


if __name__ == "__main__":
    main()
