#!/usr/bin/env bash
# Session 98: the float32 engine on the AVX-512 Xeon, alone, one script after another (about 30 minutes).
set -euo pipefail
cd "$(dirname "$0")/../.."
O=results/session98
.venv/bin/python $O/cycle_split_fp32.py 2 > $O/cycle_split_fp32.log 2>&1
.venv/bin/python $O/head_in_graph_fp32.py > $O/head_in_graph_fp32.log 2>&1
.venv/bin/python $O/ab_fp32_variants.py 2 > $O/ab_fp32_variants.log 2>&1
echo DONE >> $O/ab_fp32_variants.log
