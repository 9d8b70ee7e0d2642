"""EAGLE-3 checkpoints: official and SpecForge layouts written by hand from the format notes, our
export read the way the vLLM and SGLang loaders read it, round trips, and every loading error."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch
from huggingface_hub import constants as hub_constants
from safetensors.torch import load_file, save_file
from tiny_models import prompt, tiny_model
from transformers import LlamaConfig, LlamaForCausalLM

from hf_adaptive_spec.drafters.dvi import DVIDrafter
from hf_adaptive_spec.drafters.eagle3 import Eagle3Drafter, Eagle3DraftModel, default_aux_layer_ids
from hf_adaptive_spec.hub import ArtifactTypeError, MissingArtifactFileError

from .conftest import CUSTOM_IDS, DRAFT_VOCAB, draft_logits, make_draft_model

# The flat EAGLE-3 keys (no "model." prefix), as in the official and SpecForge checkpoints.
LAYER_KEYS = [
    "fc.weight",
    "midlayer.input_layernorm.weight",
    "midlayer.hidden_norm.weight",
    "midlayer.post_attention_layernorm.weight",
    "midlayer.self_attn.q_proj.weight",
    "midlayer.self_attn.k_proj.weight",
    "midlayer.self_attn.v_proj.weight",
    "midlayer.self_attn.o_proj.weight",
    "midlayer.mlp.gate_proj.weight",
    "midlayer.mlp.up_proj.weight",
    "midlayer.mlp.down_proj.weight",
    "norm.weight",
    "lm_head.weight",
]
LLAMA3_ROPE = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 256,
}
IDS = prompt(24, seed=7)


def _vocab_maps(used_tokens: list[int], vocab_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """EAGLE's traineagle3 ``scandata``: sorted used tokens -> d2t offsets, t2d mask."""
    used_tokens = sorted(used_tokens)
    d2t = torch.tensor([token - i for i, token in enumerate(used_tokens)], dtype=torch.long)
    t2d = torch.tensor([i in used_tokens for i in range(vocab_size)], dtype=torch.bool)
    return d2t, t2d


def _layer_tensors(model: Eagle3DraftModel) -> dict[str, torch.Tensor]:
    state = model.state_dict()
    return {key: state[key].clone() for key in LAYER_KEYS}


def _official_config(model: Eagle3DraftModel) -> dict:
    """``traineagle3/config.json`` style: LlamaForCausalLM, no rope_theta, 2048 positions."""
    c = model.config
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "num_hidden_layers": 1,
        "hidden_size": c.hidden_size,
        "intermediate_size": c.intermediate_size,
        "num_attention_heads": c.num_attention_heads,
        "num_key_value_heads": c.num_key_value_heads,
        "rms_norm_eps": c.rms_norm_eps,
        "max_position_embeddings": 2048,
        "vocab_size": c.vocab_size,
        "draft_vocab_size": c.draft_vocab_size,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "hidden_act": "silu",
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pretraining_tp": 1,
    }


def _write(directory: Path, config: dict, tensors: dict[str, torch.Tensor], pickle: bool = False) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config))
    if pickle:
        torch.save(tensors, directory / "pytorch_model.bin")
    else:
        save_file(tensors, directory / "model.safetensors")
    return directory


@pytest.fixture
def official_reference(target, frequent_tokens):
    """A reduced-vocabulary drafter with the official checkpoint's implicit RoPE (base 10000)."""
    return make_draft_model(
        target, draft_to_target=frequent_tokens, rope_parameters={"rope_type": "default", "rope_theta": 10000.0}
    )


@pytest.fixture
def official_tensors(official_reference, frequent_tokens, target):
    d2t, t2d = _vocab_maps(frequent_tokens.tolist(), target.config.vocab_size)
    return {**_layer_tensors(official_reference), "d2t": d2t, "t2d": t2d}


@pytest.mark.parametrize("pickle", [True, False])
def test_official_layout_loads_with_identical_logits(tmp_path, target, official_reference, official_tensors, pickle):
    path = _write(tmp_path, _official_config(official_reference), official_tensors, pickle=pickle)
    drafter = Eagle3Drafter.from_pretrained(path, target=target, allow_pickle=pickle)
    assert drafter.model.config.rope_parameters["rope_theta"] == 10000.0
    assert drafter.model.config.aux_hidden_state_layer_ids == [1, 3, 5] == default_aux_layer_ids(6)
    assert torch.equal(draft_logits(drafter.model, target, IDS), draft_logits(official_reference, target, IDS))
    assert not drafter.model.embed_tokens.weight.requires_grad


def test_specforge_layout_loads_with_identical_logits(tmp_path, target):
    reference = make_draft_model(
        target, aux_hidden_state_layer_ids=CUSTOM_IDS, rope_parameters={**LLAMA3_ROPE, "rope_theta": 500000.0}
    )
    config = {
        **_official_config(reference),
        "architectures": ["LlamaForCausalLMEagle3"],
        "head_dim": 16,
        "max_position_embeddings": 512,
        "rope_theta": 500000.0,
        "rope_scaling": LLAMA3_ROPE,
        "target_hidden_size": 64,
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": [i - 1 for i in CUSTOM_IDS], "use_aux_hidden_state": True},
    }
    d2t, t2d = torch.zeros(96, dtype=torch.long), torch.ones(96, dtype=torch.bool)  # SpecForge's full-vocab t2d
    path = _write(tmp_path, config, {**_layer_tensors(reference), "d2t": d2t, "t2d": t2d})
    loaded = Eagle3DraftModel.from_pretrained(path, target=target)
    assert loaded.config.aux_hidden_state_layer_ids == CUSTOM_IDS
    assert loaded.config.rope_parameters == {**LLAMA3_ROPE, "rope_theta": 500000.0}
    assert torch.equal(draft_logits(loaded, target, IDS), draft_logits(reference, target, IDS))


def test_a_deeper_drafter_in_vllm_naming_loads_and_exports_as_vllm_reads_it(tmp_path, target, frequent_tokens):
    """A two-layer drafter: vLLM names the EAGLE-3 layer layers.0 (it reads midlayer. as layers.0.) and the
    next one layers.1; such a file loads with identical logits, and our export maps onto those names."""
    reference = make_draft_model(target, draft_to_target=frequent_tokens, num_hidden_layers=2)
    state = {key.replace("midlayer.", "layers.0."): value for key, value in reference.state_dict().items()}
    del state["embed_tokens.weight"]
    _write(tmp_path / "vllm",
           {**_official_config(reference), "architectures": ["LlamaForCausalLMEagle3"], "num_hidden_layers": 2}, state)
    loaded = Eagle3DraftModel.from_pretrained(tmp_path / "vllm", target=target)
    assert loaded.config.num_hidden_layers == 2
    assert torch.equal(draft_logits(loaded, target, IDS), draft_logits(reference, target, IDS))

    loaded.save_pretrained(tmp_path / "ours")
    assert json.loads((tmp_path / "ours" / "config.json").read_text())["num_hidden_layers"] == 2
    names = _vllm_parameter_names(list(load_file(tmp_path / "ours" / "model.safetensors")))
    expected = {"model." + key for key in state if key.startswith("layers.")}
    assert {name for name in names if name.startswith("model.layers.")} == expected
    assert any(name.startswith("model.layers.1.") for name in expected)


def test_specforge_norm_output_true_is_the_final_norm_this_model_applies(tmp_path, target, official_reference,
                                                                         official_tensors):
    """SpecForge's norm_output (default true) normalises before lm_head: the logits of the reference
    computation lm_head(norm(layer output)), spelled out here from the loaded weights."""
    config = {**_official_config(official_reference), "architectures": ["LlamaForCausalLMEagle3"], "norm_output": True}
    loaded = Eagle3DraftModel.from_pretrained(_write(tmp_path, config, official_tensors), target=target)
    with torch.no_grad():
        hidden_states = target(IDS, output_hidden_states=True).hidden_states
        features = torch.cat([hidden_states[i] for i in loaded.config.aux_hidden_state_layer_ids], dim=-1)[:, :-1]
        out = loaded(IDS[:, 1:], features)
        h = out.prenorm_hidden_states  # RMSNorm, then lm_head, written out
        normed = loaded.norm.weight * h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + loaded.config.rms_norm_eps)
        reference_logits = normed @ loaded.lm_head.weight.T
    torch.testing.assert_close(out.logits, reference_logits, rtol=1e-5, atol=1e-5)
    assert torch.equal(out.logits, draft_logits(official_reference, target, IDS))


def test_a_drafter_saved_for_another_depth_loads_on_purpose(tmp_path, target):
    shallow = tiny_model("llama", num_hidden_layers=4)
    Eagle3Drafter(make_draft_model(shallow)).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="built for a 4-layer target; the target has 6 layers"):
        Eagle3Drafter.from_pretrained(tmp_path, target=target)
    reused = Eagle3Drafter.from_pretrained(tmp_path, target=target, ignore_target_mismatch=True)
    assert reused.model.config.target_num_hidden_layers == 6
    assert reused.feature_layers == (1, 3, 5)  # saved as the 4-layer default: the 6-layer default now
    reused.bind(target)


def test_a_single_feature_drafter_saved_for_another_depth_reads_the_new_targets_final_output(tmp_path, target):
    shallow = tiny_model("llama", num_hidden_layers=4)
    Eagle3Drafter(make_draft_model(shallow, use_aux_hidden_state=False)).save_pretrained(tmp_path)
    reused = Eagle3Drafter.from_pretrained(tmp_path, target=target, ignore_target_mismatch=True)
    assert reused.feature_layers == (6,)  # saved as the 4-layer target's output: the 6-layer target's now, not layer 4


def test_a_full_vocabulary_checkpoint_without_lm_head_shares_the_targets(tmp_path, target):
    """vLLM's rule (and SGLang's load_lm_head_from_target): no lm_head.weight means the target's head."""
    model = make_draft_model(target)
    with torch.no_grad():
        model.lm_head.weight.copy_(target.get_output_embeddings().weight)
    model.save_pretrained(tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    save_file({key: value for key, value in tensors.items() if key != "lm_head.weight"}, tmp_path / "model.safetensors")
    loaded = Eagle3DraftModel.from_pretrained(tmp_path, target=target)
    assert torch.equal(draft_logits(loaded, target, IDS), draft_logits(model, target, IDS))


def test_loading_takes_no_config_keywords(tmp_path, target):
    make_draft_model(target).save_pretrained(tmp_path)
    with pytest.raises(TypeError, match="torch_dtype"):
        Eagle3DraftModel.from_pretrained(tmp_path, target=target, torch_dtype=torch.bfloat16)


def test_embeddings_stored_at_lower_precision_are_the_targets(tmp_path, target, caplog):
    """SpecForge stores embed_tokens in bfloat16: the same values as a float32 target's are no difference."""
    model = make_draft_model(target)
    model.save_pretrained(tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    rounded = target.get_input_embeddings().weight.detach().to(torch.bfloat16)
    assert not torch.equal(rounded.float(), target.get_input_embeddings().weight)  # float32 values bfloat16 cannot hold
    save_file({**tensors, "embed_tokens.weight": rounded}, tmp_path / "model.safetensors")
    with caplog.at_level("WARNING"):
        Eagle3DraftModel.from_pretrained(tmp_path, target=target)
    assert "differs from the target's" not in caplog.text
    save_file({**tensors, "embed_tokens.weight": rounded + 1}, tmp_path / "model.safetensors")
    with caplog.at_level("WARNING"):
        Eagle3DraftModel.from_pretrained(tmp_path, target=target)
    assert "differs from the target's" in caplog.text


@pytest.mark.parametrize("rope, reads", [
    ({"rope_type": "default", "rope_theta": 1e4}, False),
    ({"rope_type": "dynamic", "rope_theta": 1e4, "factor": 2.0}, True),
    ({"rope_type": "longrope", "rope_theta": 1e4, "short_factor": [1.0], "long_factor": [1.0]}, True),
    ({"rope_type": "yarn", "rope_theta": 1e4}, True),
    ({"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0}, False),
])
def test_max_positions_stay_as_saved_where_the_rope_derives_from_them(rope, reads):
    """Raising max_position_embeddings to the target's would change LongRoPE's, YaRN-without-factor's and
    dynamic NTK's frequencies (transformers derives their factor or original length from it)."""
    from hf_adaptive_spec.drafters.eagle3.checkpoint import _rope_reads_max_positions

    assert _rope_reads_max_positions(rope) is reads


def test_rope_comes_from_the_drafter_config_not_the_target(tmp_path, target, official_reference, official_tensors):
    config = target.config.to_dict() | {"rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}}
    torch.manual_seed(0)
    long_rope_target = LlamaForCausalLM(LlamaConfig(**config)).eval()
    long_rope_target.load_state_dict(target.state_dict())
    path = _write(tmp_path, _official_config(official_reference), official_tensors)
    loaded = Eagle3DraftModel.from_pretrained(path, target=long_rope_target)
    assert loaded.config.rope_parameters["rope_theta"] == 10000.0


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {
            "reduced": True,
            "aux_hidden_state_layer_ids": CUSTOM_IDS,
            "rope_parameters": {**LLAMA3_ROPE, "rope_theta": 5e5},
        },
        {"use_aux_hidden_state": False},
        {"use_aux_hidden_state": False, "aux_hidden_state_layer_ids": [2]},
        {"num_hidden_layers": 2},
    ],
    ids=["default", "reduced+custom-layers+llama3-rope", "single-feature", "single-feature-of-layer-2", "two-layers"],
)
def test_save_pretrained_round_trip(tmp_path, target, frequent_tokens, kwargs):
    kwargs = dict(kwargs)
    mapping = frequent_tokens if kwargs.pop("reduced", False) else None
    drafter = Eagle3Drafter(make_draft_model(target, draft_to_target=mapping, **kwargs))
    drafter.save_pretrained(tmp_path)
    loaded = Eagle3Drafter.from_pretrained(tmp_path, target=target)
    assert torch.equal(draft_logits(loaded.model, target, IDS), draft_logits(drafter.model, target, IDS))
    assert loaded.model.config.aux_hidden_state_layer_ids == drafter.model.config.aux_hidden_state_layer_ids
    assert loaded.model.config.rope_parameters == drafter.model.config.rope_parameters
    assert torch.equal(loaded.model.d2t, drafter.model.d2t) and torch.equal(loaded.model.t2d, drafter.model.t2d)


def test_the_vocabulary_maps_load_beside_a_drafter_on_another_device_than_the_default(tmp_path, target,
                                                                                      frequent_tokens):
    """Under ``torch.set_default_device("cuda")`` the drafter is built on the GPU and the file's tensors read on the
    CPU: ``torch.arange`` without a device landed on the default device and failed beside the file's ``d2t``. The CPU
    proxy: the drafter on the CPU, the default device meta (a tensor made without a device is a meta tensor)."""
    from hf_adaptive_spec.drafters.eagle3.checkpoint import _set_vocab_maps

    drafter = make_draft_model(target, draft_to_target=frequent_tokens)
    drafter.save_pretrained(tmp_path)
    weights = load_file(tmp_path / "model.safetensors")
    loaded = make_draft_model(target, draft_to_target=frequent_tokens)
    loaded.d2t.zero_()
    torch.set_default_device("meta")
    try:
        _set_vocab_maps(loaded, weights)
    finally:
        torch.set_default_device(None)
    assert torch.equal(loaded.d2t, drafter.d2t) and torch.equal(loaded.t2d, drafter.t2d)


def test_the_config_names_the_dtype_of_the_weights_written(tmp_path, target):
    """A float32 drafter saved with its state_dict cast to bfloat16 (the trainers' small checkpoints) wrote
    torch_dtype float32 beside bfloat16 weights."""
    model = make_draft_model(target)
    model.save_pretrained(tmp_path / "bf16", state_dict={k: v.bfloat16() for k, v in model.state_dict().items()})
    model.save_pretrained(tmp_path / "fp32")
    for folder, dtype in (("bf16", "bfloat16"), ("fp32", "float32")):
        assert json.loads((tmp_path / folder / "config.json").read_text())["torch_dtype"] == dtype


@pytest.mark.parametrize("held", ["a DVI adapter", "a causal LM's shards"])
def test_saving_into_a_folder_holding_other_weights_is_refused_before_anything_changes(tmp_path, target, held):
    """An EAGLE-3 drafter saved into a DVI adapter's folder (or over a causal LM's sharded weights) was written
    beside adapter_model.safetensors (the shards): loading the folder just saved read them with its own ('does not
    match an EAGLE-3 drafter of this config: unexpected keys [...lora_A...]'), as vLLM and SGLang, which read every
    *.safetensors file of the folder, would. Refused before the folder's config.json is replaced."""
    folder = tmp_path / "folder"
    if held == "a DVI adapter":
        DVIDrafter(target, exit_layer=2, online=False).save_pretrained(folder)
    else:
        target.save_pretrained(folder, max_shard_size="100KB")
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    drafter = Eagle3Drafter(make_draft_model(target))
    for save in (drafter.save_pretrained, drafter.model.save_pretrained):  # the Hub mixin's, and the Trainer's
        with pytest.raises(FileExistsError, match=rf"{folder} holds .*safetensors: an EAGLE-3 checkpoint is every "
                           r"\*\.safetensors file of its folder .* Save it to a folder of its own, or remove them"):
            save(folder)
    assert {path.name: path.read_bytes() for path in folder.iterdir()} == before
    drafter.save_pretrained(tmp_path / "own")  # a folder of its own, and over its own earlier save
    drafter.save_pretrained(tmp_path / "own")
    assert Eagle3Drafter.from_pretrained(tmp_path / "own", target=target).weights_digest() == drafter.weights_digest()


def test_a_push_deletes_the_weight_files_an_earlier_push_left_in_the_repo(target, monkeypatch):
    """A drafter pushed to a repo holding another artifact's weights (an earlier push of a causal LM's shards, a DVI
    adapter) left them there: loading the repo reads every *.safetensors at its top as the drafter's and fails
    ('unexpected keys'), as in a folder (check_no_other_weights). The push's commit deletes those (huggingface_hub
    keeps the files it uploads), the caller's own delete patterns kept; never a file in a subfolder (a Trainer's
    checkpoint-N/, which huggingface_hub's '*' would reach) nor the drafter's own, and none in a push of some files
    alone (allow_patterns: a card refreshed)."""
    from types import SimpleNamespace

    from huggingface_hub import HfApi
    from huggingface_hub.utils import filter_repo_objects

    commits = []

    def upload_folder(api, *, folder_path, delete_patterns, **kwargs):
        commits.append((sorted(path.name for path in Path(folder_path).iterdir()), delete_patterns))

    monkeypatch.setattr(HfApi, "create_repo", lambda api, repo_id, **kwargs: SimpleNamespace(repo_id=repo_id))
    monkeypatch.setattr(HfApi, "upload_folder", upload_folder)
    card = {"reproduce_command": "python trainers/eagle3.py --config x.yaml"}
    drafter = Eagle3Drafter(make_draft_model(target))
    drafter.push_to_hub("org/eagle3", model_card_kwargs=card)
    drafter.push_to_hub("org/eagle3", model_card_kwargs=card, delete_patterns="*.bin")
    drafter.push_to_hub("org/eagle3", model_card_kwargs=card, allow_patterns="README.md")
    (files, deletes), (_, own_deletes), (_, card_deletes) = commits
    assert "model.safetensors" in files and "*.bin" in own_deletes and not card_deletes
    repo = ["model-00001-of-00002.safetensors", "model.safetensors.index.json", "adapter_model.safetensors",
            "model.safetensors", "checkpoint-1/model.safetensors", "checkpoint-1/model-00001-of-00002.safetensors",
            "dvi/adapter_model.safetensors", "README.md"]
    deleted = list(filter_repo_objects(repo, allow_patterns=deletes))
    assert deleted == repo[:3]
    assert set(deletes) <= set(own_deletes)


def test_own_width_drafter_saves_and_reloads_its_embeddings(tmp_path, target):
    model = make_draft_model(target, hidden_size=32, intermediate_size=64, head_dim=8)
    with pytest.raises(ValueError, match="embeddings were never set"):
        model.save_pretrained(tmp_path)
    model.set_embeddings(torch.randn(96, 32))  # stands for trained embeddings of a narrower drafter
    model.save_pretrained(tmp_path)
    assert "embed_tokens.weight" in load_file(tmp_path / "model.safetensors")
    loaded = Eagle3DraftModel.from_pretrained(tmp_path, target=target)
    assert torch.equal(loaded.embed_tokens.weight, model.embed_tokens.weight)
    assert torch.equal(draft_logits(loaded, target, IDS), draft_logits(model, target, IDS))


# What the serving engines do with our files, per their loaders (notes: vLLM llama_eagle3.py and
# configs/eagle.py; SGLang's EAGLE3 loader).
def _vllm_parameter_names(keys: list[str]) -> set[str]:
    """vLLM ``load_weights``: midlayer. -> layers.0., "model." prefix except lm_head, d2t renamed, t2d skipped."""
    names = set()
    for key in keys:
        if key == "t2d":
            continue
        if key == "d2t":
            names.add("draft_id_to_target_id")
            continue
        name = key.replace("midlayer.", "layers.0.")
        names.add(name if name.startswith("lm_head") else "model." + name)
    return names


def test_export_loads_as_vllm_and_sglang_expect(tmp_path, target, frequent_tokens):
    drafter = Eagle3Drafter(
        make_draft_model(target, draft_to_target=frequent_tokens, aux_hidden_state_layer_ids=CUSTOM_IDS)
    )
    drafter.bind(target)
    drafter.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    tensors = load_file(tmp_path / "model.safetensors")

    # common: SpecForge layout, flat keys, vocab maps, no embeddings at the target's width
    assert config["architectures"] == ["LlamaForCausalLMEagle3"] and config["model_type"] == "llama"
    assert set(tensors) == set(LAYER_KEYS) | {"d2t", "t2d"}
    assert {"fc.weight", "norm.weight", "lm_head.weight", "t2d", "d2t"} <= set(tensors)  # SpecForge to_sglang
    assert tensors["fc.weight"].shape == (64, 3 * 64) and tensors["lm_head.weight"].shape == (DRAFT_VOCAB, 64)
    assert tensors["midlayer.self_attn.q_proj.weight"].shape[1] == 2 * 64  # layer 0 reads 2H
    assert tensors["d2t"].dtype == torch.int64 and tensors["t2d"].dtype == torch.bool
    assert (config["num_hidden_layers"], config["vocab_size"], config["draft_vocab_size"]) == (1, 96, DRAFT_VOCAB)
    assert config["target_hidden_size"] == 64 and config["head_dim"] == 16
    assert config["max_position_embeddings"] >= target.config.max_position_embeddings
    assert config["rope_theta"] == config["rope_parameters"]["rope_theta"]
    assert "rope_scaling" in config  # null for default RoPE: older stacks read only rope_theta / rope_scaling

    # vLLM: renamed keys, top-level ids used as is (input of layer i), draft_id_to_target_id = d2t + arange
    assert _vllm_parameter_names(list(tensors)) == {
        "model.fc.weight",
        "model.norm.weight",
        "lm_head.weight",
        "draft_id_to_target_id",
        *(f"model.layers.0.{k.removeprefix('midlayer.')}" for k in LAYER_KEYS if k.startswith("midlayer.")),
    }
    assert tuple(config["eagle_aux_hidden_state_layer_ids"]) == drafter.feature_layers
    vllm_draft_id_to_target_id = tensors["d2t"] + torch.arange(DRAFT_VOCAB)
    assert torch.equal(vllm_draft_id_to_target_id, drafter.draft_to_target)

    # SGLang: eagle_config ids are outputs of layer i, captured at i + 1; hot_token_id = d2t + arange
    sglang_layers_to_capture = [i + 1 for i in config["eagle_config"]["eagle_aux_hidden_state_layer_ids"]]
    assert tuple(sglang_layers_to_capture) == drafter.feature_layers
    assert config["eagle_config"]["use_aux_hidden_state"] is True
    assert torch.equal(tensors["d2t"] + torch.arange(DRAFT_VOCAB), frequent_tokens)


def test_default_layers_and_rope_export(tmp_path, target):
    drafter = Eagle3Drafter(make_draft_model(target, rope_parameters={**LLAMA3_ROPE, "rope_theta": 5e5}))
    drafter.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    # both engines' fields even for the default ids (else each engine applies its own), and the target's depth
    assert config["eagle_aux_hidden_state_layer_ids"] == [1, 3, 5] == default_aux_layer_ids(6)
    assert config["eagle_config"] == {"eagle_aux_hidden_state_layer_ids": [0, 2, 4], "use_aux_hidden_state": True}
    assert config["target_num_hidden_layers"] == 6
    assert config["rope_scaling"] == LLAMA3_ROPE and config["rope_theta"] == 5e5
    assert config["rope_parameters"] == {**LLAMA3_ROPE, "rope_theta": 5e5}


def test_official_max_position_is_raised_to_the_target_context(tmp_path, target, official_reference, official_tensors):
    path = _write(tmp_path / "official", _official_config(official_reference), official_tensors)
    Eagle3Drafter.from_pretrained(path, target=target).save_pretrained(tmp_path / "export")
    config = json.loads((tmp_path / "export" / "config.json").read_text())
    assert config["max_position_embeddings"] == 2048  # max(2048, the target's 512)
    assert config["rope_theta"] == 10000.0  # now explicit


def test_hub_id_resolves_from_the_offline_cache(tmp_path, monkeypatch, target):
    drafter = Eagle3Drafter(make_draft_model(target))
    revision = "a" * 40
    repo = tmp_path / "cache" / "models--org--eagle3"
    drafter.save_pretrained(repo / "snapshots" / revision)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    loaded = Eagle3Drafter.from_pretrained("org/eagle3", target=target, cache_dir=tmp_path / "cache")
    assert torch.equal(draft_logits(loaded.model, target, IDS), draft_logits(drafter.model, target, IDS))


def test_push_to_hub_uploads_the_specforge_layout_and_its_card(monkeypatch, target):
    """One commit through the Hub mixin: SpecForge's config.json and weights, and the drafter's card."""
    from huggingface_hub import hub_mixin

    uploaded = {}

    class FakeApi:
        def __init__(self, *args, **kwargs):
            pass

        def create_repo(self, repo_id, **kwargs):
            return type("Repo", (), {"repo_id": repo_id})()

        def upload_folder(self, repo_id, folder_path, **kwargs):
            uploaded.update({p.name: p.read_bytes() for p in Path(folder_path).iterdir()}, repo_id=repo_id)
            return "commit"

    monkeypatch.setattr(hub_mixin, "HfApi", FakeApi)
    Eagle3Drafter(make_draft_model(target)).push_to_hub("org/eagle3")
    assert uploaded["repo_id"] == "org/eagle3"
    assert json.loads(uploaded["config.json"])["architectures"] == ["LlamaForCausalLMEagle3"]
    assert "artifact_type" not in json.loads(uploaded["config.json"])  # the layout stays SpecForge's
    assert "model.safetensors" in uploaded and b'Eagle3Drafter.from_pretrained("org/eagle3"' in uploaded["README.md"]


# Errors: each a ValueError naming the problem and the fix.
def _official(tmp_path, reference, tensors, config_changes=None, drop=(), add=None) -> Path:
    config = {**_official_config(reference), **(config_changes or {})}
    tensors = {key: value for key, value in tensors.items() if key not in drop} | (add or {})
    return _write(tmp_path, config, tensors)


LOADING_ERRORS = {
    "hidden-size": ({"target_hidden_size": 32}, (), None, "Hidden size mismatch: the drafter reads .* width 32"),
    "vocab-size": ({"vocab_size": 100}, (), None, "Vocabulary mismatch: the drafter's vocab_size is 100"),
    "t2d-length": ({}, ("t2d",), {"t2d": torch.ones(100, dtype=torch.bool)}, "Vocabulary mismatch: t2d covers 100"),
    "no-d2t": ({}, ("d2t",), None, "reduced .* but the checkpoint has no d2t"),
    "ids-range": (
        {"eagle_aux_hidden_state_layer_ids": [1, 2, 9]}, (), None, r"\[1, 2, 9\] must lie in 1..5 for a 6-layer"
    ),
    "id-zero": ({"eagle_aux_hidden_state_layer_ids": [0, 2, 4]}, (), None, r"must lie in 1..5 .*\(0 is the embeddings"),
    "id-L": ({"eagle_aux_hidden_state_layer_ids": [2, 4, 6]}, (), None, r"must lie in 1..5 .* 6 is never captured"),
    "ids-unsorted": ({"eagle_aux_hidden_state_layer_ids": [4, 1, 3]}, (), None, "must be strictly increasing"),
    "ids-repeated": (
        {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 1, 3]}}, (), None, "strictly increasing"
    ),
    "other-depth": (
        {"target_num_hidden_layers": 4},
        (),
        None,
        "built for a 4-layer target; the target has 6 layers.*ignore_target_mismatch=True",
    ),
    "norm-output-false": ({"norm_output": False}, (), None, "norm_output=False: SpecForge then feeds lm_head without"),
    "ids-disagree": (
        {
            "eagle_aux_hidden_state_layer_ids": [1, 2, 3],
            "eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 3, 4]},
        },
        (),
        None,
        "layer ids disagree",
    ),
    "missing-key": ({}, ("norm.weight",), None, r"missing keys \['norm.weight'\]"),
    "prefixed-key": ({}, (), {"model.fc.weight": torch.zeros(1)}, r"unexpected keys \['model.fc.weight'\]"),
    "bias-key": ({}, (), {"midlayer.self_attn.q_proj.bias": torch.zeros(64)}, "unexpected keys"),
    "shape": ({}, (), {"lm_head.weight": torch.zeros(96, 64)}, r"lm_head.weight \(96, 64\) \(expected \(24, 64\)\)"),
    "d2t-not-offsets": ({}, (), {"d2t": torch.arange(DRAFT_VOCAB)}, "d2t and t2d disagree"),
    "architecture": ({"architectures": ["MistralForCausalLM"]}, (), None, "Not an EAGLE-3 checkpoint config"),
    "layers-without-weights": ({"num_hidden_layers": 2}, (), None, r"missing keys \['layers.1.*num_hidden_layers=2"),
    "layer-named-twice": ({}, (), {"layers.0.mlp.up_proj.weight": torch.zeros(1)}, "both midlayer.* and layers.0.*"),
    "no-layers": ({"num_hidden_layers": 0}, (), None, "needs at least its EAGLE-3 layer"),
    "variant": ({"norm_before_residual": True}, (), None, "not supported"),
    "reduced-vocab-without-head": (
        {}, ("lm_head.weight",), None, "no lm_head.weight, so it shares the target's output head .* add the trained",
    ),
    "speculators-layout": (
        {"speculators_model_type": "eagle3", "architectures": ["Eagle3Speculator"]}, (), None,
        "vLLM speculators' layout .* Convert it to the SpecForge layout",
    ),
}


@pytest.mark.parametrize("config_changes, drop, add, message", LOADING_ERRORS.values(), ids=LOADING_ERRORS.keys())
def test_loading_errors(tmp_path, target, official_reference, official_tensors, config_changes, drop, add, message):
    path = _official(tmp_path, official_reference, official_tensors, config_changes, drop, add)
    with pytest.raises(ValueError, match=message):
        Eagle3Drafter.from_pretrained(path, target=target)


def test_pickle_weights_need_allow_pickle(tmp_path, target, official_reference, official_tensors):
    path = _write(tmp_path, _official_config(official_reference), official_tensors, pickle=True)
    with pytest.raises(ValueError, match="allow_pickle=True"):
        Eagle3Drafter.from_pretrained(path, target=target)


def test_narrower_drafter_without_embeddings_is_refused(tmp_path, target):
    model = make_draft_model(target, hidden_size=32, intermediate_size=64, head_dim=8)
    config = {**_official_config(model), "target_hidden_size": 64, "head_dim": 8}
    path = _write(tmp_path, config, {**_layer_tensors(model), "d2t": model.d2t})
    with pytest.raises(ValueError, match="checkpoint has no embed_tokens.weight"):
        Eagle3Drafter.from_pretrained(path, target=target)


def test_unsupported_target_attention_is_refused(tmp_path, target, official_reference, official_tensors):
    flex_target = copy.deepcopy(target)
    flex_target.set_attn_implementation("flex_attention")
    path = _write(tmp_path, _official_config(official_reference), official_tensors)
    with pytest.raises(ValueError, match="target model uses attn_implementation='flex_attention'"):
        Eagle3Drafter.from_pretrained(path, target=flex_target)


def test_embeddings_never_set_are_refused(target):
    model = Eagle3DraftModel(make_draft_model(target).config)
    with pytest.raises(ValueError, match="embeddings were never set"):
        Eagle3Drafter(model)
    with pytest.raises(ValueError, match="embeddings were never set"):
        model(IDS[:, 1:], torch.zeros(1, 23, 3 * 64))
    without_embeddings = {k: v for k, v in make_draft_model(target).state_dict().items() if k != "embed_tokens.weight"}
    with pytest.raises(RuntimeError, match=r"Missing key\(s\) in state_dict: \"embed_tokens.weight\""):
        model.load_state_dict(without_embeddings)  # none set, none given: missing
    model.load_state_dict(make_draft_model(target).state_dict())
    Eagle3Drafter(model)  # a loaded state dict provides them


def test_a_state_dict_without_embeddings_keeps_the_targets_and_does_not_call_them_missing(tmp_path, target):
    """A Trainer checkpoint at the target's width holds no embeddings (the SpecForge layout): resuming loaded it with
    a warning of missing keys, though the drafter kept the target's embeddings it was built with."""
    model, trained = make_draft_model(target), make_draft_model(target)
    Eagle3Drafter(trained).save_pretrained(tmp_path)
    saved = load_file(tmp_path / "model.safetensors")
    assert "embed_tokens.weight" not in saved
    result = model.load_state_dict(saved, strict=False)  # as Trainer's resume loads it
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert torch.equal(model.embed_tokens.weight, target.get_input_embeddings().weight)
    assert torch.equal(draft_logits(model, target, IDS), draft_logits(trained, target, IDS))


def test_a_float32_checkpoint_stays_float32_beside_a_bfloat16_target_with_dtype(tmp_path, target):
    """Converting after loading cannot undo the rounding through the target's dtype: dtype= loads it as saved."""
    model = make_draft_model(target)
    Eagle3Drafter(model).save_pretrained(tmp_path)
    bf16_target = copy.deepcopy(target).to(torch.bfloat16)
    kept = Eagle3Drafter.from_pretrained(tmp_path, target=bf16_target, dtype=torch.float32)
    assert kept.model.dtype == torch.float32 and torch.equal(kept.model.fc.weight, model.fc.weight)
    assert Eagle3Drafter.from_pretrained(tmp_path, target=bf16_target).model.dtype == torch.bfloat16  # default
    with pytest.raises(TypeError, match="For torch_dtype=, pass dtype= instead"):
        Eagle3Drafter.from_pretrained(tmp_path, target=bf16_target, torch_dtype=torch.float32)
    with pytest.raises(TypeError, match=r"dtype='bf16'\): dtype is a floating torch.dtype .*'bfloat16'.*'auto'"):
        Eagle3Drafter.from_pretrained(tmp_path, target=bf16_target, dtype="bf16")


def _load_draft_model_as_drafter(*args, **kwargs) -> Eagle3Drafter:
    return Eagle3Drafter(Eagle3DraftModel.from_pretrained(*args, **kwargs))


@pytest.mark.parametrize("load", [Eagle3Drafter.from_pretrained, _load_draft_model_as_drafter])
def test_dtype_takes_a_name_or_auto_as_the_policies_do(tmp_path, target, load):
    """dtype="float32" and dtype="auto" (transformers' habit, which the policies take) were refused: "dtype must be a
    floating torch.dtype". A name is that dtype; "auto" the dtype the weights were saved in; None the target's."""
    model = make_draft_model(target)
    Eagle3Drafter(model).save_pretrained(tmp_path / "fp32")
    Eagle3Drafter(copy.deepcopy(model).to(torch.bfloat16)).save_pretrained(tmp_path / "bf16")
    bf16_target = copy.deepcopy(target).to(torch.bfloat16)
    named = load(tmp_path / "fp32", target=bf16_target, dtype="float32").model
    assert named.dtype == torch.float32 and torch.equal(named.fc.weight, model.fc.weight)
    assert load(tmp_path / "fp32", target=bf16_target, dtype="auto").model.dtype == torch.float32  # as saved
    assert load(tmp_path / "bf16", target=target, dtype="auto").model.dtype == torch.bfloat16  # as saved
    assert load(tmp_path / "bf16", target=target).model.dtype == torch.float32  # None: the target's, as documented
    with pytest.raises(TypeError, match=r"dtype='bf16'\): .*'float32', 'bfloat16'.*'auto' for the dtype its weights"):
        load(tmp_path / "fp32", target=target, dtype="bf16")


def _fake_hub(monkeypatch, repo: Path) -> list:
    """Hub downloads served from ``repo`` (no network): hf_hub_download one file, snapshot_download recorded."""
    from huggingface_hub import hub_mixin

    from hf_adaptive_spec.drafters.eagle3 import checkpoint
    from hf_adaptive_spec.hub import location

    snapshots = []
    for module in (location, hub_mixin):
        monkeypatch.setattr(module, "hf_hub_download", lambda repo_id, filename, **kwargs: str(repo / filename))

    def snapshot_download(repo_id, **kwargs):
        snapshots.append(repo_id)
        return str(repo)

    monkeypatch.setattr(checkpoint, "snapshot_download", snapshot_download)
    return snapshots


@pytest.mark.parametrize("loader", [Eagle3Drafter, Eagle3DraftModel])
def test_a_causal_lm_hub_repo_is_refused_from_its_config_before_its_weights_download(tmp_path, monkeypatch, target,
                                                                                      loader):
    target.save_pretrained(tmp_path / "llama")  # the target's own repo, passed by mistake
    snapshots = _fake_hub(monkeypatch, tmp_path / "llama")
    with pytest.raises(ArtifactTypeError, match=r"Hub repo 'org/llama' holds a causal language model \(config.json: "
                                         r"architectures \['LlamaForCausalLM'\], 6 layers.*AutoModelForCausalLM"):
        loader.from_pretrained("org/llama", target=target)
    assert snapshots == []


def test_an_eagle3_hub_repo_downloads_its_weights_once_its_config_passed(tmp_path, monkeypatch, target):
    model = make_draft_model(target)
    Eagle3Drafter(model).save_pretrained(tmp_path / "eagle3")
    snapshots = _fake_hub(monkeypatch, tmp_path / "eagle3")
    loaded = Eagle3Drafter.from_pretrained("org/eagle3", target=target)
    assert snapshots == ["org/eagle3"]
    assert torch.equal(draft_logits(loaded.model, target, IDS), draft_logits(model, target, IDS))


def test_model_prefixed_keys_of_an_eagle3_config_load_as_the_flat_ones(tmp_path, target, frequent_tokens):
    """vLLM's names (model.fc.weight, model.layers.0.*; lm_head.weight without the prefix) are no causal LM's."""
    model = make_draft_model(target, draft_to_target=frequent_tokens)
    Eagle3Drafter(model).save_pretrained(tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    renamed = {(key if key == "lm_head.weight" else "model." + key.replace("midlayer.", "layers.0.")): value
               for key, value in tensors.items()}
    save_file(renamed, tmp_path / "model.safetensors")
    for loaded in (Eagle3Drafter.from_pretrained(tmp_path, target=target).model,
                   Eagle3DraftModel.from_pretrained(tmp_path, target=target)):
        assert torch.equal(draft_logits(loaded, target, IDS), draft_logits(model, target, IDS))
    save_file({**renamed, "fc.weight": tensors["fc.weight"].clone()}, tmp_path / "model.safetensors")
    with pytest.raises(ValueError, match=r"unexpected keys \[.*'model.fc.weight'.*carry a 'model.' prefix.*remove it"):
        Eagle3Drafter.from_pretrained(tmp_path, target=target)


def test_eagle3_draft_model_resolves_paths_as_the_drafter_does(tmp_path, monkeypatch, target):
    monkeypatch.setenv("HOME", str(tmp_path))
    model = make_draft_model(target)
    model.save_pretrained(tmp_path / "drafter")
    loaded = Eagle3DraftModel.from_pretrained("~/drafter", target=target)
    assert torch.equal(draft_logits(loaded, target, IDS), draft_logits(model, target, IDS))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(FileNotFoundError, match="No local folder 'outputs/drafter' exists either"):
        Eagle3DraftModel.from_pretrained("outputs/drafter", target=target, cache_dir=tmp_path / "cache")


@pytest.mark.parametrize("load", [Eagle3Drafter.from_pretrained, Eagle3DraftModel.from_pretrained])
def test_weights_not_cached_offline_are_named_as_not_cached(tmp_path, target, load):
    """Offline, with the repo's config.json cached and its weights not, snapshot_download returned the partial
    snapshot without a word, and the error was "No weights in .../snapshots/<commit>: expected model.safetensors",
    where every other loader says the file is not in the local cache and to download it once online."""
    from hub.hf_cache import add_to_hf_cache

    Eagle3Drafter(make_draft_model(target)).save_pretrained(tmp_path / "saved")
    (tmp_path / "saved" / "model.safetensors").unlink()
    add_to_hf_cache(tmp_path / "cache", "org/eagle3", tmp_path / "saved")
    with pytest.raises(MissingArtifactFileError, match=r"'model.safetensors' of Hub repo 'org/eagle3' is not in the "
                       r"local Hugging Face cache.*Download it once online, or check cache_dir="):
        load("org/eagle3", target=target, cache_dir=tmp_path / "cache", local_files_only=True)
