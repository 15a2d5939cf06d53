"""LoRA fine-tuning with the Trainer under FSDP (torchrun --nproc_per_node 4 lora_fsdp.py)."""

from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

args = TrainingArguments(
    output_dir="llama-lora",
    fsdp="full_shard auto_wrap",
    fsdp_config={"transformer_layer_cls_to_wrap": ["LlamaDecoderLayer"]},
    bf16=True,
)

model_kwargs = dict(torch_dtype="bfloat16", attn_implementation="sdpa")
model_kwargs["device_map"] = "balanced"
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", **model_kwargs)
model = get_peft_model(model, LoraConfig(r=16, target_modules=["q_proj", "v_proj"]))

Trainer(model=model, args=args).train()
