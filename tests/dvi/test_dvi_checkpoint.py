"""DVI adapters on disk: peft files in safetensors, our card, strict safetensors-only loading."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from tiny_models import prompt, tiny_model

from hf_adaptive_spec.drafters.dvi import DVIDrafter
from hf_adaptive_spec.hub import PickleWeightsError, WeightsMismatchError

from .conftest import CHAIN, EXIT_LAYER, lora_state, make_drafter

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def named_target():
    model = tiny_model("llama")
    model.config._name_or_path = "acme/tiny-llama"
    return model


@pytest.fixture(scope="module")
def trained(named_target, tmp_path_factory):
    """A drafter whose LoRA weights moved (a few online updates), saved once."""
    drafter = make_drafter(named_target, update_every=4)
    named_target.generate(
        prompt(6), max_new_tokens=40, do_sample=False, assistant_model=drafter, assistant_policy=CHAIN
    )
    assert drafter.updater.num_updates > 0
    folder = tmp_path_factory.mktemp("dvi") / "adapter"
    drafter.save_pretrained(folder, model_card_kwargs={"reproduce_command": "python trainers/dvi.py --config x.yaml"})
    return drafter, folder


def test_saved_files_are_a_peft_adapter_in_safetensors(trained):
    _, folder = trained
    files = sorted(p.name for p in folder.iterdir())
    assert files == ["README.md", "adapter_config.json", "adapter_model.safetensors", "config.json"]
    adapter_config = json.loads((folder / "adapter_config.json").read_text())
    assert adapter_config["base_model_name_or_path"] == "acme/tiny-llama"
    assert adapter_config["peft_type"] == "LORA" and adapter_config["target_modules"] == ["draft_head"]
    config = json.loads((folder / "config.json").read_text())
    assert config["exit_layer"] == EXIT_LAYER and config["artifact_type"] == "hf_adaptive_spec.drafter.dvi"
    card = (folder / "README.md").read_text()
    assert "library_name: hf-adaptive-spec" in card and "base_model: acme/tiny-llama" in card
    assert "base_model_relation: adapter" in card and "DVIDrafter.from_pretrained" in card
    assert "python trainers/dvi.py --config x.yaml" in card


def test_round_trip_gives_identical_draft_logits(trained, named_target):
    drafter, folder = trained
    reloaded = DVIDrafter.from_pretrained(folder, target=named_target)
    assert reloaded.exit_layer == EXIT_LAYER and not reloaded.online
    saved, loaded = lora_state(drafter), lora_state(reloaded)
    assert saved.keys() == loaded.keys() and all(saved[k].equal(loaded[k]) for k in saved)
    assert any(v.abs().sum() > 0 for k, v in loaded.items() if "lora_B" in k)  # not the zero init
    states = torch.randn(5, named_target.config.hidden_size)
    with torch.no_grad():
        assert reloaded.head(states).equal(drafter.head(states))
        assert not reloaded.head(states).equal(named_target.lm_head(named_target.model.norm(states)))


def test_pickle_only_adapters_are_refused(trained, tmp_path):
    _, folder = trained
    copy = tmp_path / "pickled"
    shutil.copytree(folder, copy)
    (copy / "adapter_model.safetensors").unlink()
    (copy / "adapter_model.bin").write_bytes(b"not read")
    with pytest.raises(PickleWeightsError):
        DVIDrafter.from_pretrained(copy, target=tiny_model("llama"))


@pytest.mark.filterwarnings("ignore:The PEFT config:UserWarning")  # peft notes the other target id
def test_an_adapter_for_another_target_shape_is_refused(trained):
    from transformers import LlamaConfig, LlamaForCausalLM

    _, folder = trained
    torch.manual_seed(0)
    other = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=4,
            num_attention_heads=4,
            num_key_value_heads=2,
        )
    )
    other.set_attn_implementation("sdpa")
    with pytest.raises(WeightsMismatchError, match="trained for a target"):
        DVIDrafter.from_pretrained(folder, target=other)


def test_folders_saved_before_config_json_still_load(trained, named_target, tmp_path):
    """Adapters saved with ``dvi_config.json`` (and ``target`` for the shape) load as before."""
    drafter, folder = trained
    legacy = tmp_path / "legacy"
    shutil.copytree(folder, legacy)
    config = json.loads((legacy / "config.json").read_text())
    config["target"] = config.pop("target_shape")
    (legacy / "dvi_config.json").write_text(json.dumps(config))
    (legacy / "config.json").unlink()
    reloaded = DVIDrafter.from_pretrained(legacy, target=named_target)
    assert reloaded.exit_layer == EXIT_LAYER and lora_state(reloaded).keys() == lora_state(drafter).keys()


def test_loading_without_the_target_names_it(trained):
    _, folder = trained
    with pytest.raises(TypeError, match=r"from_pretrained\(path, target=model\)"):
        DVIDrafter.from_pretrained(folder)
