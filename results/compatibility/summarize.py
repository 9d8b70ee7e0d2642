"""Markdown table of results/compatibility/out/*.json (probe.py's results)."""
import glob
import json
import os
from collections import Counter

OUT = os.environ.get("OUT", os.path.join(os.path.dirname(os.path.abspath(__file__)), "out"))
print("| family | stock static = stock | engine, dynamic cache | engine, static cache | sampling runs | error |")
print("|---|---|---|---|---|---|")
for path in sorted(glob.glob(os.path.join(OUT, "*.json"))):
    record = json.load(open(path))
    cases = record["cases"]

    def tally(mode):
        counts = Counter(c["result"] for c in cases if c.get("mode") == mode)
        return ", ".join(f"{n} {result}" for result, n in sorted(counts.items())) or "-"

    sampling = Counter(c["result"] for c in cases if c.get("mode", "").startswith("sample"))
    errors = sorted({c["error"][:140] for c in cases if c.get("result") == "error"})
    print(f"| {record['family']} | {tally('stock-static-vs-stock')} | {tally('dynamic')} | {tally('static')} | "
          f"{', '.join(f'{n} {r}' for r, n in sampling.items())} | {'; '.join(errors) or '-'} |")
