import torch
from transformers import AutoModelForCausalLM


def load_model(name: str):
    return AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.bfloat16, device_map="auto")
