"""Distributed inference: the model is never trained or prepared, so "auto" cannot hit accelerate's check."""

import torch.distributed as dist
from transformers import AutoModelForCausalLM, AutoTokenizer

dist.init_process_group("nccl")
tokenizer = AutoTokenizer.from_pretrained("gpt2")
model = AutoModelForCausalLM.from_pretrained("gpt2", device_map="auto")
print(model.generate(**tokenizer("Hello", return_tensors="pt")))
