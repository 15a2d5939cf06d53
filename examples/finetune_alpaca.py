"""alpaca-lora style fine-tuning; the DDP guard is right for torchrun, but this run uses ZeRO-3."""

import os

from transformers import LlamaForCausalLM, Trainer, TrainingArguments


def train(base_model="huggyllama/llama-7b", output_dir="./lora-alpaca"):
    args = TrainingArguments(output_dir=output_dir, deepspeed="configs/ds_zero3.json")

    device_map = "auto"
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    ddp = world_size != 1
    if ddp:
        device_map = {"": int(os.environ.get("LOCAL_RANK") or 0)}

    model = LlamaForCausalLM.from_pretrained(base_model, torch_dtype="auto", device_map=device_map)
    Trainer(model=model, args=args).train()


if __name__ == "__main__":
    train()
