"""The client half of the Hub round-trip tests, run in a fresh subprocess per stage.

huggingface_hub reads ``HF_ENDPOINT`` and ``HF_HUB_OFFLINE`` at import, so each stage gets a
new interpreter with its own environment (see ``client_env`` in ``test_hub_round_trip.py``).

Usage: ``python hub_client.py {push,load} OUT_DIR NAME...``

For each NAME it writes ``OUT_DIR/<NAME>.safetensors`` (the tensors to compare) and, in
``OUT_DIR/report.json``, ``{"ok": true, ...info}`` or ``{"ok": false, "error_type", "error"}``:
one artifact failing never hides the others.
"""

from __future__ import annotations

import json
import sys
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import torch
from huggingface_hub import HfApi
from peft import LoraConfig, PeftModel, get_peft_model, get_peft_model_state_dict
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from artifacts import MLP_TYPE, TinyGRUPolicy, TinyMLPPolicy
from hf_adaptive_spec.drafters.dvi import DVIDrafter
from hf_adaptive_spec.drafters.eagle3 import Eagle3Drafter, Eagle3DraftModel
from hf_adaptive_spec.hub import CardResult, render_card
from hf_adaptive_spec.policies import StaticTreePolicy
from hf_adaptive_spec.policies.serialization import AutoDraftPolicy

Tensors = dict[str, torch.Tensor]
Result = tuple[dict, Tensors]

CARD_KWARGS = {
    "base_model": "org/tiny-llama",
    "datasets": ["org/sharegpt-regenerated"],
    "results": [CardResult("MT-Bench (80 questions)", tau=3.21, speedup=2.05, hardware="1x H100")],
    "reproduce_command": "hf-adaptive-spec train mlp --target org/tiny-llama --seed 0",
}
STATIC_KWARGS = {"depth": 5, "top_k": 3, "total_tokens": 12, "sample_drafts": True}
INPUT_IDS = torch.arange(1, 9).unsqueeze(0)


def tiny_llama() -> LlamaForCausalLM:
    """The same tiny random Llama in every process (seeded)."""
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=4,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
    return LlamaForCausalLM(config).eval()


def lora_tensors(model: PeftModel) -> Tensors:
    with torch.no_grad():
        logits = model(INPUT_IDS).logits
    return {**get_peft_model_state_dict(model), "logits": logits}


# -- push --------------------------------------------------------------------------------


def push_mlp() -> Result:
    torch.manual_seed(0)
    policy = TinyMLPPolicy(hidden_size=6, width=8)
    policy.push_to_hub("org/tiny-mlp", model_card_kwargs=CARD_KWARGS)
    return {}, policy.state_dict()


def push_static() -> Result:
    StaticTreePolicy(**STATIC_KWARGS).push_to_hub("org/static-tree")
    return {}, {}


def push_llama() -> Result:
    model = tiny_llama()
    model.push_to_hub("org/tiny-llama")
    card = render_card("eagle3_drafter", method="eagle3", base_model="org/target", repo_id="org/tiny-llama")
    card.push_to_hub("org/tiny-llama")
    return {}, model.state_dict()


def push_eagle3() -> Result:
    torch.manual_seed(2)
    draft = Eagle3DraftModel.from_target(tiny_llama(), draft_to_target=torch.arange(0, 64, 2))
    Eagle3Drafter(draft).push_to_hub("org/tiny-eagle3", model_card_kwargs={"base_model": "org/tiny-llama"})
    return {}, draft.state_dict()


def push_eagle3_trainer() -> Result:
    """TrainingArguments' push_to_hub path: the trainer saves its output folder, writes its card there and
    uploads it."""
    from hf_adaptive_spec.training.eagle3 import Eagle3Config, Eagle3Trainer, HeldOutCurveCallback, HeldOutSet, collate

    target = tiny_llama()
    target.config.name_or_path = "org/tiny-llama"
    samples = [
        {"input_ids": [(7 * s + 3 * i) % 63 + 1 for i in range(16)], "loss_mask": [0] * 4 + [1] * 12} for s in range(4)
    ]
    torch.manual_seed(4)
    draft = Eagle3DraftModel.from_target(target, draft_to_target=torch.arange(0, 64, 2))
    held_out = HeldOutCurveCallback(HeldOutSet(target, samples[:2], draft, depth=2), every_steps=2)
    with tempfile.TemporaryDirectory() as folder:
        args = Eagle3Config(output_dir=folder, max_steps=2, per_device_train_batch_size=2, ttt_steps=2,
                            save_strategy="no", report_to=[], seed=0, disable_tqdm=True, push_to_hub=True,
                            hub_model_id="org/trained-eagle3")
        trainer = Eagle3Trainer(model=draft, args=args, target_model=target, train_dataset=samples,
                                callbacks=[held_out], data_collator=lambda b: collate(b, pad_token_id=0),
                                dataset_name="org/sharegpt-regenerated",
                                reproduce_command="python trainers/eagle3.py --config tiny.yaml")
        trainer.train_save_and_push()
    return {}, draft.state_dict()


def _dvi_tensors(drafter: DVIDrafter) -> Tensors:
    return {k: v for k, v in drafter.head.state_dict().items() if "lora_" in k}


def push_dvi() -> Result:
    target = tiny_llama()
    target.config.name_or_path = "org/tiny-llama"
    torch.manual_seed(3)
    drafter = DVIDrafter(target, exit_layer=1)
    with torch.no_grad():
        for name, param in drafter.head.named_parameters():
            if "lora_" in name:
                param.normal_()
    drafter.push_to_hub("org/tiny-dvi")
    return {}, _dvi_tensors(drafter)


def push_lora() -> Result:
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    model = get_peft_model(tiny_llama(), config)
    model.peft_config["default"].base_model_name_or_path = "org/tiny-llama"
    model.push_to_hub("org/dvi-lora")
    return {}, lora_tensors(model)


def _upload(repo_id: str, files: dict[str, Callable[[Path], None]]) -> None:
    api = HfApi()
    api.create_repo(repo_id, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        for name, write in files.items():
            write(Path(folder) / name)
        api.upload_folder(repo_id=repo_id, folder_path=folder)


def _write_mlp_config(path: Path) -> None:
    path.write_text(json.dumps({"artifact_type": MLP_TYPE, "hidden_size": 6, "width": 8, "max_depth": 4}))


def push_pickle_only() -> Result:
    state = TinyMLPPolicy(hidden_size=6, width=8).state_dict()
    _upload("org/pickle-only", {"config.json": _write_mlp_config, "pytorch_model.bin": lambda p: torch.save(state, p)})
    return {}, {}


def push_missing_weights() -> Result:
    _upload("org/config-only-mlp", {"config.json": _write_mlp_config})
    return {}, {}


# -- load --------------------------------------------------------------------------------


def load_mlp() -> Result:
    policy = TinyMLPPolicy.from_pretrained("org/tiny-mlp")
    auto = AutoDraftPolicy.from_pretrained("org/tiny-mlp")
    return {"auto_class": type(auto).__name__, "training": policy.training}, policy.state_dict()


def load_static() -> Result:
    policy = StaticTreePolicy.from_pretrained("org/static-tree")
    auto = AutoDraftPolicy.from_pretrained("org/static-tree")
    return {"config": asdict(policy.config), "auto_class": type(auto).__name__}, {}


def load_llama() -> Result:
    return {}, AutoModelForCausalLM.from_pretrained("org/tiny-llama", use_safetensors=True).state_dict()


def load_eagle3() -> Result:
    return {}, Eagle3Drafter.from_pretrained("org/tiny-eagle3", target=tiny_llama()).model.state_dict()


def load_eagle3_trainer() -> Result:
    return {}, Eagle3Drafter.from_pretrained("org/trained-eagle3", target=tiny_llama()).model.state_dict()


def load_dvi() -> Result:
    target = tiny_llama()
    target.config.name_or_path = "org/tiny-llama"
    return {}, _dvi_tensors(DVIDrafter.from_pretrained("org/tiny-dvi", target=target))


def load_lora() -> Result:
    target = AutoModelForCausalLM.from_pretrained("org/tiny-llama", use_safetensors=True)
    return {}, lora_tensors(PeftModel.from_pretrained(target, "org/dvi-lora").eval())


def load_hand_built() -> Result:
    return {}, TinyMLPPolicy.from_pretrained("org/hand-built").state_dict()


def load_pickle_only() -> Result:
    return {}, TinyMLPPolicy.from_pretrained("org/pickle-only").state_dict()


def load_missing_weights() -> Result:
    return {}, TinyMLPPolicy.from_pretrained("org/config-only-mlp").state_dict()


def load_wrong_type() -> Result:
    return {}, TinyGRUPolicy.from_pretrained("org/tiny-mlp").state_dict()


STAGES: dict[str, dict[str, Callable[[], Result]]] = {
    "push": {
        "mlp": push_mlp,
        "static": push_static,
        "llama": push_llama,
        "eagle3": push_eagle3,
        "eagle3_trainer": push_eagle3_trainer,
        "dvi": push_dvi,
        "lora": push_lora,
        "pickle_only": push_pickle_only,
        "missing_weights": push_missing_weights,
    },
    "load": {
        "mlp": load_mlp,
        "static": load_static,
        "llama": load_llama,
        "eagle3": load_eagle3,
        "eagle3_trainer": load_eagle3_trainer,
        "dvi": load_dvi,
        "lora": load_lora,
        "hand_built": load_hand_built,
        "pickle_only": load_pickle_only,
        "missing_weights": load_missing_weights,
        "wrong_type": load_wrong_type,
    },
}


def main(stage: str, out_dir: Path, names: list[str]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    report = {}
    for name in names:
        try:
            info, tensors = STAGES[stage][name]()
        except Exception as error:  # reported per artifact; the test asserts on it
            report[name] = {"ok": False, "error_type": type(error).__name__, "error": str(error),
                            "traceback": traceback.format_exc()}
            continue
        save_file({key: value.detach().clone().contiguous() for key, value in tensors.items()},
                  out_dir / f"{name}.safetensors")
        report[name] = {"ok": True, **info}
    (out_dir / "report.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), sys.argv[3:])
