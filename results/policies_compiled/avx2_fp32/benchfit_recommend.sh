#!/usr/bin/env bash
# Issue 32 on the AVX2-only EPYC (session 56): the bench's own bucket costs (bench_fit.py) in place of the profile's,
# then the profile's ranking of the static trees and the three retrained policies on them (replay_recommend.py), and
# the replay ceilings against the tree it ranks first. A few minutes alone; needs bench.sh's JSON and run.sh's recording.
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=.venv/bin/python
O=results/policies_compiled/avx2_fp32
$PY $O/bench_fit.py > $O/benchfit.log 2>&1
$PY results/policies_compiled/replay_recommend.py --recording artifacts/replay/heldout-d6k4-shipped \
    --profile $O/profile_fp32_compiled_benchfit.json --policy-name fp32-compiled --curve cpu/float32/compiled \
    --lookup-tokens 4 > $O/benchfit_replay_recommend.log 2>&1
