# Sourced by this folder's session-66/67 bench scripts: `interleaved_bench QUESTIONS PER_CATEGORY NAME [BENCH_ARGS...]`
# runs $METHODS interleaved per question on the compiled bfloat16 path (caches sized per call, 128 tokens, float32
# agreement on, stock-compiled+sized the reference, this EPYC's profile) and writes $O/NAME.{md,json,log}.
# RESUME=1 resumes; HFAS replaces the command (HFAS=echo prints it).
O=results/policies_compiled/avx512_bf16
[ "${RESUME:-0}" = 1 ] && RESUME_ARGS=(--resume) || RESUME_ARGS=()
interleaved_bench() {
    local questions=$1 per_category=$2 name=$3
    shift 3
    ${HFAS:-.venv/bin/hf-adaptive-spec} bench --questions "$questions" --per-category "$per_category" \
        --methods "$METHODS" --compile --dtype bfloat16 --reference stock-compiled+sized --max-new-tokens 128 \
        --warmup 2 --num-threads 2 --tree_profile $O/profile_bf16_compiled_avx512.json "$@" "${RESUME_ARGS[@]}" \
        --markdown $O/$name.md --json $O/$name.json >> $O/$name.log 2>&1
}
