"""An HfArgumentParser script: nothing in it says DeepSpeed. scripts/run_z3.sh does."""

from dataclasses import dataclass, field

from transformers import HfArgumentParser, Trainer, TrainingArguments

from model_utils import load_model


@dataclass
class ModelArguments:
    model_name_or_path: str = field(default="gpt2")


def main():
    parser = HfArgumentParser((ModelArguments, TrainingArguments))
    model_args, training_args = parser.parse_args_into_dataclasses()
    model = load_model(model_args.model_name_or_path)
    Trainer(model=model, args=training_args).train()


if __name__ == "__main__":
    main()
