"""The same script serves DDP and ZeRO-3: no device_map when ZeRO-3 places the model."""

import os

from transformers import AutoModelForCausalLM, Trainer, TrainingArguments
from transformers.integrations import is_deepspeed_zero3_enabled

args = TrainingArguments(output_dir="out", deepspeed="../configs/ds_zero3.json")
local_rank = int(os.environ.get("LOCAL_RANK", 0))
model = AutoModelForCausalLM.from_pretrained(
    "gpt2",
    device_map=None if is_deepspeed_zero3_enabled() else {"": local_rank},
)
Trainer(model=model, args=args).train()
