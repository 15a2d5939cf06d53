"""Supervised fine-tuning of a 7B model with TRL under DeepSpeed ZeRO-3.

    accelerate launch --num_processes 8 sft_zero3.py
"""

import torch
from datasets import load_dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import SFTConfig, SFTTrainer

MODEL_ID = "Qwen/Qwen2.5-7B"


def main():
    training_args = SFTConfig(
        output_dir="qwen-7b-sft",
        per_device_train_batch_size=2,
        gradient_accumulation_steps=8,
        bf16=True,
        deepspeed="configs/ds_zero3.json",
    )
    tokenizer = AutoTokenizer.from_pretrained(MODEL_ID)
    model = AutoModelForCausalLM.from_pretrained(
        MODEL_ID,
        torch_dtype=torch.bfloat16,
        device_map="auto",  # fits on one node, let accelerate spread it
    )
    dataset = load_dataset("trl-lib/Capybara", split="train")
    trainer = SFTTrainer(model=model, args=training_args, train_dataset=dataset, processing_class=tokenizer)
    trainer.train()


if __name__ == "__main__":
    main()
