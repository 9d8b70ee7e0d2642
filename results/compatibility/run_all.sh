#!/usr/bin/env bash
# Every family of families.py, then the sliding-window ones with 20-token prompts and deeper / wider trees than their
# windows (8 tokens). About 15 minutes on 2 CPU cores, one thread. Results: results/compatibility/out/, table: summary.md.
cd "$(dirname "$0")/../.."
P=results/compatibility/probe.py
export OMP_NUM_THREADS=1 OUT=results/compatibility/out
for f in ${@:-llama gemma gemma2 gemma3_text gemma3_allsliding phi phi3 phi3_sw gpt2 gpt_neox gptj olmo olmo2 olmo3 granite cohere \
    cohere2 starcoder2 stablelm falcon falcon_alibi mixtral mixtral_sw qwen2_moe qwen2_moe_sw qwen3_moe qwen3_moe_sw \
    deepseek_v3 smollm3 smollm3_sw glm glm4 exaone4 exaone4_default}; do
  timeout 600 .venv/bin/python $P $f > /dev/null 2>&1; echo "$f rc=$?"
done
for f in gemma2 gemma3_text gemma3_allsliding cohere2 exaone4 olmo3 mixtral_sw qwen2_moe_sw qwen3_moe_sw starcoder2; do
  for policy in deep wide; do POLICY=$policy PLEN=20 TAG=_${policy}_p20 timeout 600 .venv/bin/python $P $f > /dev/null 2>&1; done
done
.venv/bin/python results/compatibility/summarize.py > results/compatibility/summary.md
