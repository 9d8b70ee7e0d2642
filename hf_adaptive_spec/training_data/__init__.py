"""Training data for drafters: ShareGPT prompts, evaluation-leakage filtering, target regeneration."""

from .jsonl_output import read_conversation_records
from .leakage import drop_leaked, eval_question_digests, eval_question_files, load_eval_questions
from .regenerate import RegenerationConfig, RegenerationStats, copy_conversations, first_prompt_length, regenerate
from .sharegpt import Conversation, Message, iter_sharegpt, select_subset, sharegpt_path
from .task_prompts import TASK_PROMPTS, task_prompts

__all__ = [
    "TASK_PROMPTS",
    "Conversation",
    "Message",
    "RegenerationConfig",
    "RegenerationStats",
    "copy_conversations",
    "drop_leaked",
    "eval_question_digests",
    "eval_question_files",
    "first_prompt_length",
    "iter_sharegpt",
    "load_eval_questions",
    "read_conversation_records",
    "regenerate",
    "select_subset",
    "sharegpt_path",
    "task_prompts",
]
