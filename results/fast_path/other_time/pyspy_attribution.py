"""Share of py-spy samples inside the engine (``speculative_decoding``) during bench turns, grouped by the first DEPTH
engine frames on each stack: where an engine call's time goes. Usage: python pyspy_attribution.py DEPTH RAW_FILE
(a ``py-spy record -f raw`` file)."""
import collections
import re
import sys

ENGINE_FILES = ("generation/speculative_decoding.py", "generation/targets.py", "generation/tree_builder.py",
                "generation/static_path.py")
depth, raw = int(sys.argv[1]), sys.argv[2]
shares, total = collections.Counter(), 0
for line in open(raw):
    stack, _, count = line.rstrip().rpartition(" ")
    if not count.isdigit() or "_run_question" not in stack or "speculative_decoding (" not in stack:
        continue
    total += int(count)
    frames = [m.group(1) for f in stack.split(";") if (m := re.match(r"(\S+) \((\S+):\d+\)", f))
              and any(name in m.group(2) for name in ENGINE_FILES)]
    shares[" > ".join(frames[:depth])] += int(count)
print(f"{total} samples inside the engine")
for frames, count in shares.most_common(12):
    print(f"{100 * count / total:6.2f}%  {frames}")
