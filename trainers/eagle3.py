"""Train an EAGLE-3 drafter for a target model (TRL-style script).

    python trainers/eagle3.py --config trainers/recipes/eagle3_smollm2.yaml
    torchrun --nproc_per_node 2 trainers/eagle3.py --config ... --ddp_backend gloo

Any ``Eagle3Config`` / ``transformers.TrainingArguments`` field and any
``Eagle3ScriptArguments`` field can be set in the YAML file or on the command line.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import TrlParser

from hf_adaptive_spec import load_default_model
from hf_adaptive_spec.drafters.eagle3.modeling import Eagle3DraftModel
from hf_adaptive_spec.training.eagle3 import (
    Eagle3Config,
    Eagle3Trainer,
    build_draft_vocabulary,
    collate,
    read_conversations,
    tokenize_conversation,
)


@dataclass
class Eagle3ScriptArguments:
    """Data and model arguments of the EAGLE-3 training script."""

    dataset_path: str = field(
        default="artifacts/sharegpt_smollm2_regenerated.jsonl",
        metadata={"help": "JSONL of {'conversation': [...]} records, e.g. from trainers/regenerate_sharegpt.py."},
    )
    num_conversations: int | None = field(default=None, metadata={"help": "Use only the first N conversations."})
    target_model_name_or_path: str = field(
        default="default", metadata={"help": "Target model; 'default' is the embedded SmolLM2-135M-Instruct."}
    )
    init_from: str | None = field(
        default=None, metadata={"help": "Start from this drafter checkpoint (its draft vocabulary is kept)."}
    )


def load_target(name_or_path: str):
    if name_or_path == "default":
        return load_default_model(dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(name_or_path)
    return AutoModelForCausalLM.from_pretrained(name_or_path, attn_implementation="sdpa").eval(), tokenizer


def make_parser() -> TrlParser:
    return TrlParser((Eagle3ScriptArguments, Eagle3Config))


def main(script_args: Eagle3ScriptArguments, training_args: Eagle3Config) -> None:
    target, tokenizer = load_target(script_args.target_model_name_or_path)
    conversations = read_conversations(script_args.dataset_path, script_args.num_conversations)
    samples = [s for s in (tokenize_conversation(tokenizer, c, training_args.max_length) for c in conversations) if s]
    if script_args.init_from:
        draft = Eagle3DraftModel.from_pretrained(script_args.init_from, target=target)
    else:
        vocabulary = build_draft_vocabulary(samples, training_args.draft_vocab_size, target.config.vocab_size)
        draft = Eagle3DraftModel.from_target(target, draft_to_target=vocabulary)
    pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    trainer = Eagle3Trainer(
        model=draft,
        args=training_args,
        target_model=target,
        train_dataset=Dataset.from_list(samples),
        data_collator=functools.partial(collate, pad_token_id=pad_token_id),
    )
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    trainer.save_model(training_args.output_dir)
    if training_args.push_to_hub:
        trainer.push_to_hub()


if __name__ == "__main__":
    script_args, training_args = make_parser().parse_args_and_config()
    main(script_args, training_args)
