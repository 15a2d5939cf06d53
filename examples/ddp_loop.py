"""A hand-written DDP training loop (torchrun --nproc_per_node 8 ddp_loop.py)."""

import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import AutoModelForCausalLM


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)

    model = AutoModelForCausalLM.from_pretrained("gpt2-large", device_map="cuda:0")
    model = DDP(model, device_ids=[local_rank])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    for _ in range(10):
        loss = model(input_ids=torch.ones(1, 8, dtype=torch.long, device=local_rank)).logits.mean()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
