"""Session 61 (results/README.md, "The eager curve fitted from the bench's own turns"): per method, live verify/draft time per turn against the profile's model of the same cycles, normalised by stock's
per-token time in the same question and turn (so machine drift cancels)."""
import json, sys, statistics
from collections import defaultdict
from hf_adaptive_spec.profiling.hardware import HardwareProfile, unread_after

progress, profile_path = sys.argv[1], sys.argv[2]
p = HardwareProfile.load(profile_path)
one = p.verify_time(1)
recs = defaultdict(dict)
for line in open(progress):
    r = json.loads(line)
    if 'method' in r:
        recs[r['question_id']][r['method']] = r
rows = defaultdict(list)
for q, methods in recs.items():
    stock = methods.get('stock')
    if not stock: continue
    for m, r in methods.items():
        if m == 'stock': continue
        for t, st in zip(r['turns'], stock['turns']):
            per_tok = st['wall_time'] / st['new_tokens']   # live one plain step here
            if not t['verified_tokens']: continue
            model_v = sum(p.verify_time(n) for n in t['verified_tokens'])
            cycles = len(t['verified_tokens'])
            # modelled draft: catch-up for first level + later levels; unread from accepted lengths
            unread, model_d = 0, 0.0
            # levels unknown per cycle (draft_depths is pruned depth); use depth as levels approximation
            for acc, depth in zip(t['accepted_lengths'], t['draft_depths']):
                model_d += p.draft_time(depth, max(unread, 1)) if depth else 0.0
                unread = unread_after(max(unread,1), depth > 0, acc + 1)
            rows[(m, t['turn'])].append(dict(
                live_v=t['verify_time'] / per_tok, model_v=model_v / one,
                live_d=t['draft_time'] / per_tok, model_d=model_d / one,
                live_wall=t['wall_time'] / per_tok, cycles=cycles, tokens=t['new_tokens'],
                vpc=statistics.mean(t['verified_tokens'])))
print(f"profile one token {one*1e3:.0f} ms; times in plain-step units (stock's per-token wall time in the same turn)")
print(f"{'method':42s} turn  n  verified/cyc  live_v/cyc model_v/cyc  ratio   live_d/cyc model_d/cyc  wall/tok")
for (m, turn), xs in sorted(rows.items()):
    cyc = sum(x['cycles'] for x in xs)
    lv = sum(x['live_v'] for x in xs) / cyc; mv = sum(x['model_v'] for x in xs) / cyc
    ld = sum(x['live_d'] for x in xs) / cyc; md = sum(x['model_d'] for x in xs) / cyc
    wt = sum(x['live_wall'] for x in xs) / sum(x['tokens'] for x in xs)
    vpc = statistics.mean(x['vpc'] for x in xs)
    print(f"{m[:42]:42s} {turn:4d} {len(xs):3d} {vpc:8.2f} {lv:12.3f} {mv:11.3f} {lv/mv:7.3f} {ld:11.3f} {md:11.3f} {wt:9.3f}")
