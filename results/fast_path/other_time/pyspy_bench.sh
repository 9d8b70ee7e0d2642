# Session 69: the bench run sampled by py-spy (`py-spy record --subprocesses -r 250 -f raw -o logs/prof/prof13.raw -- bash THIS`);
# py-spy slowed the run about 3x, so only its attribution is read (pyspy_attribution.py), not its speeds.
.venv/bin/hf-adaptive-spec bench --questions ../shared/data/spec_bench/question.jsonl --per-category 1 \
  --methods "stock-compiled+sized,eagle3-lookup-first@2/4/8+lookup+sized" --compile --dtype bfloat16 \
  --reference stock-compiled+sized --max-new-tokens 128 --warmup 2 --num-threads 2 \
  --tree_profile results/policies_compiled/avx512_bf16/profile_bf16_compiled_avx512.json --no_fp32_agreement \
  --markdown logs/prof/prof13.md --json logs/prof/prof13.json
