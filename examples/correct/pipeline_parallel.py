"""One process, several GPUs: device_map="auto" is naive pipeline parallelism (python pipeline_parallel.py)."""

from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-70b-hf", device_map="auto")
Trainer(model=model, args=TrainingArguments(output_dir="out")).train()
