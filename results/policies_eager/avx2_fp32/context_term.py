"""Session 61: the fitted eager curve with and without a second-turn term (longer contexts), bootstrap sd over turns.
Run from this folder with the five progress files of profile_fitted.sh."""
import json, sys
from collections import defaultdict
import numpy as np
rows, y, ctx = [], [], []
for path in sys.argv[1:]:
    recs = defaultdict(dict)
    for line in open(path):
        r = json.loads(line)
        if 'method' in r: recs[r['question_id']][r['method']] = r
    for q, ms in recs.items():
        st = ms.get('stock')
        if not st: continue
        for m, r in ms.items():
            for t, s in zip(r['turns'], st['turns']):
                if not t['verified_tokens']: continue
                unit = s['wall_time'] / s['new_tokens']
                v = t['verified_tokens']
                rows.append([sum(1 for n in v), sum(1 for n in v if n >= 2), sum(max(n - 2, 0) for n in v), sum(1 for n in v if n>=2)*t['turn']])
                y.append(t['verify_time'] / unit)
X, y = np.array(rows, float), np.array(y)
for cols, name in [([0,1,2], "a + b[n>=2] + c(n-2)"), ([0,1,2,3], "+ d*turn1[n>=2]")]:
    c, *_ = np.linalg.lstsq(X[:, cols], y, rcond=None)
    res = (y - X[:, cols] @ c) / y
    rng = np.random.default_rng(0); B = []
    for _ in range(300):
        i = rng.integers(0, len(y), len(y)); B.append(np.linalg.lstsq(X[i][:, cols], y[i], rcond=None)[0])
    print(name, np.round(c, 4), "sd", np.round(np.std(B, 0), 4), "resid", np.round(np.std(res), 4))
    a, b, cc = c[:3]
    print("  f(n)/f(1):", {n: round((a + (b + cc*(n-2) if n>=2 else 0))/a, 3) for n in [1,2,4,6,8,9,10,12,13,16]})
