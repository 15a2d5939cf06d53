"""QLoRA under DDP: each process loads its copy on its own GPU."""

import torch.distributed as dist
from accelerate import PartialState
from transformers import AutoModelForCausalLM, BitsAndBytesConfig, Trainer

dist.init_process_group("nccl")
model = AutoModelForCausalLM.from_pretrained(
    "mistralai/Mistral-7B-v0.1",
    quantization_config=BitsAndBytesConfig(load_in_4bit=True),
    device_map={"": PartialState().local_process_index},
)
Trainer(model=model).train()
