#!/bin/bash
# Full fine-tune of Llama-3.1-8B on one 8-GPU node with DeepSpeed ZeRO-3.
set -euo pipefail
cd "$(dirname "$0")/.."

accelerate launch --config_file configs/zero3.yaml \
    train.py \
    --model_name_or_path meta-llama/Llama-3.1-8B \
    --output_dir out/llama-8b-sft
