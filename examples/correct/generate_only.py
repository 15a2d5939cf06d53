"""Distributed inference done right: each process holds its own copy on its own GPU and takes its share of the prompts."""

import torch.distributed as dist
from accelerate import PartialState
from transformers import AutoModelForCausalLM, AutoTokenizer

dist.init_process_group("nccl")
state = PartialState()
tokenizer = AutoTokenizer.from_pretrained("gpt2")
model = AutoModelForCausalLM.from_pretrained("gpt2", device_map={"": state.local_process_index})
with state.split_between_processes(["Hello", "Bonjour", "Hallo", "Ciao"]) as prompts:
    for prompt in prompts:
        print(model.generate(**tokenizer(prompt, return_tensors="pt").to(state.device)))
