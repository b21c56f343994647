#!/usr/bin/env bash
# MiniMax-M3 MXFP4 on MI355X with vLLM (text-only language-model path).
set -euo pipefail

export VLLM_ROCM_USE_AITER=1

vllm serve "$MODEL" \
  --tensor-parallel-size "$TP" \
  --max-model-len "$MAX_MODEL_LEN" \
  --block-size 64 \
  --port 8000 &

wait_for_server 8000
run_benchmark_serving --model "$MODEL" --isl "$ISL" --osl "$OSL" --concurrency "$CONC" \
  --num-prompts "$((CONC * 10))" --random-range-ratio 0.8 --result-name "$RESULT_NAME"
