"""DVI adapters on disk: peft files in safetensors, our card, strict safetensors-only loading."""

from __future__ import annotations

import json
import logging
import re
import shutil
from dataclasses import asdict, replace
from types import SimpleNamespace

import pytest
import torch
from hub.hf_cache import add_to_hf_cache
from huggingface_hub import HfApi, constants
from tiny_models import prompt, tiny_model

from hf_adaptive_spec.drafters.dvi import DVIDrafter, DVIOnlineLearnerConfig
from hf_adaptive_spec.hub import (
    ArtifactTypeError,
    MissingArtifactFileError,
    MissingConfigKeyError,
    PickleWeightsError,
    UnknownConfigKeyError,
    WeightsMismatchError,
)

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
    assert files == [
        "README.md", "adapter_config.json", "adapter_model.safetensors", "config.json", "dvi_online_state.json"
    ]
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


def copy_as_legacy(folder, copy, **changes):
    """``folder`` copied to ``copy`` as adapters were saved before config.json: ``dvi_config.json``, with ``target``
    for the shape, updated with ``changes``."""
    shutil.copytree(folder, copy)
    config = json.loads((copy / "config.json").read_text())
    config["target"] = config.pop("target_shape")
    config.update(changes)
    (copy / "dvi_config.json").write_text(json.dumps(config))
    (copy / "config.json").unlink()
    return copy


def test_folders_saved_before_config_json_still_load(trained, named_target, tmp_path):
    """Adapters saved with ``dvi_config.json`` (and ``target`` for the shape) load as before."""
    drafter, folder = trained
    legacy = copy_as_legacy(folder, tmp_path / "legacy")
    reloaded = DVIDrafter.from_pretrained(legacy, target=named_target)
    assert reloaded.exit_layer == EXIT_LAYER and lora_state(reloaded).keys() == lora_state(drafter).keys()


@pytest.mark.parametrize("offline", ["local_files_only", "HF_HUB_OFFLINE"])
def test_an_old_adapter_loads_offline_from_the_hf_cache(trained, named_target, tmp_path, monkeypatch, offline):
    """An adapter saved with dvi_config.json, in the Hugging Face cache, offline: huggingface_hub's from_pretrained
    looked config.json up again and raised its bare LocalEntryNotFoundError. One cached in part names the file."""
    drafter, folder = trained
    cache = tmp_path / "cache"
    add_to_hf_cache(cache, "org/old-dvi", copy_as_legacy(folder, tmp_path / "legacy"))
    part = copy_as_legacy(folder, tmp_path / "part")
    (part / "adapter_model.safetensors").unlink()
    add_to_hf_cache(cache, "org/old-dvi-part", part)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", offline == "HF_HUB_OFFLINE")
    hub = {"cache_dir": cache, "local_files_only": offline == "local_files_only"}
    reloaded = DVIDrafter.from_pretrained("org/old-dvi", target=named_target, **hub)
    saved, loaded = lora_state(drafter), lora_state(reloaded)
    assert reloaded.exit_layer == EXIT_LAYER and all(saved[key].equal(loaded[key]) for key in saved)
    with pytest.raises(MissingArtifactFileError, match=r"'adapter_model.safetensors' of Hub repo 'org/old-dvi-part' "
                       r"is not in the local Hugging Face cache.* Download it once online"):
        DVIDrafter.from_pretrained("org/old-dvi-part", target=named_target, **hub)


def test_loading_without_the_target_names_it(trained):
    _, folder = trained
    with pytest.raises(TypeError, match=r"from_pretrained\(path, target=model\)"):
        DVIDrafter.from_pretrained(folder)


def test_online_loading_continues_the_saved_schedule_and_baseline(trained, named_target, tmp_path):
    """from_pretrained(online=True) keeps learning where the saved drafter was: its KL->RL schedule position and
    reward baseline (dvi_online_state.json); without the file the schedule starts fresh; offline reads nothing."""
    drafter, folder = trained
    saved = drafter.updater.state_dict()
    assert json.loads((folder / "dvi_online_state.json").read_text()) == saved and saved["baseline"] is not None

    online = DVIDrafter.from_pretrained(folder, target=named_target, online=True, online_config=drafter.updater.config)
    assert online.updater.state_dict() == saved
    continued = online.updater.schedule.weights(online.updater.num_updates)
    assert continued == drafter.updater.schedule.weights(saved["num_updates"]) and continued.kl < 1.0  # past KL-only
    assert not DVIDrafter.from_pretrained(folder, target=named_target).online

    bare = tmp_path / "bare"
    shutil.copytree(folder, bare)
    (bare / "dvi_online_state.json").unlink()
    fresh = DVIDrafter.from_pretrained(bare, target=named_target, online=True)
    fresh_config = asdict(fresh.updater.config)
    assert fresh.updater.state_dict() == {"num_updates": 0, "baseline": None, "online_config": fresh_config}
    assert not fresh.load_online_state(bare)  # the trainer's init_from warns on this


def test_online_loading_keeps_the_saved_online_config(trained, named_target, tmp_path, caplog):
    """dvi_online_state.json holds the online config: from_pretrained(online=True) continues the position on the
    saved schedule (not on the defaults' 200 KL-only updates), warns when a given config changes that schedule, and
    still loads a file saved before it held the config (with a warning saying so)."""
    drafter, folder = trained
    saved = drafter.updater.config
    assert saved.warmup_updates != DVIOnlineLearnerConfig().warmup_updates  # the fixture's short schedule
    online = DVIDrafter.from_pretrained(folder, target=named_target, online=True)
    assert online.updater.config == saved
    assert online.updater.schedule.weights(online.updater.num_updates).kl < 1.0  # past KL-only, as it was saved

    caplog.set_level(logging.WARNING, logger="hf_adaptive_spec")
    other = replace(saved, warmup_updates=200)
    DVIDrafter.from_pretrained(folder, target=named_target, online=True, online_config=other)
    assert f"other schedule settings than it was saved with (warmup_updates: {saved.warmup_updates} -> 200)" in (
        caplog.text
    )

    caplog.clear()
    old = tmp_path / "old"
    shutil.copytree(folder, old)
    state = json.loads((old / "dvi_online_state.json").read_text())
    del state["online_config"]
    (old / "dvi_online_state.json").write_text(json.dumps(state))
    legacy = DVIDrafter.from_pretrained(old, target=named_target, online=True)
    assert legacy.updater.num_updates == state["num_updates"] and legacy.updater.config == DVIOnlineLearnerConfig()
    assert "was saved before it held the online config" in caplog.text


@pytest.mark.parametrize("kind", ["causal LM", "no artifact"])
def test_a_folder_of_another_kind_is_named_with_its_loader(named_target, tmp_path, kind):
    """A config.json without artifact_type: what the folder holds and how it loads, not "declares None"."""
    folder = tmp_path / "other"
    if kind == "causal LM":
        named_target.save_pretrained(folder)
        expected = r"is not a DVI adapter: .* it is a transformers model: load it with AutoModelForCausalLM"
    else:
        folder.mkdir()
        (folder / "config.json").write_text("{}")
        expected = r"is not a DVI adapter: .* so it is no hf-adaptive-spec artifact"
    with pytest.raises(ArtifactTypeError, match=expected):
        DVIDrafter.from_pretrained(folder, target=named_target)


def test_an_offline_drafter_saves_no_online_state(named_target, tmp_path):
    make_drafter(named_target, online=False).save_pretrained(tmp_path / "offline")
    assert not (tmp_path / "offline" / "dvi_online_state.json").exists()


def test_card_names_the_base_model_given(trained, tmp_path):
    """base_model in the card fields (the DVI script's --base_model) names the target's Hub id over its local name."""
    drafter, _ = trained
    drafter.save_pretrained(tmp_path / "named", model_card_kwargs={"base_model": "org/the-target"})
    card = (tmp_path / "named" / "README.md").read_text()
    assert "base_model: org/the-target" in card and 'from_pretrained("org/the-target"' in card


def test_card_takes_the_usage_it_is_given(trained, tmp_path):
    """A usage snippet given in the card fields was passed to the template twice and failed in a TypeError."""
    drafter, _ = trained
    usage = 'drafter = DVIDrafter.from_pretrained("org/adapter", target=model)'
    drafter.save_pretrained(tmp_path / "used", model_card_kwargs={"usage": usage})
    card = (tmp_path / "used" / "README.md").read_text()
    assert usage in card and "<org>/<name>" not in card


def test_dtype_is_refused_naming_the_target_as_what_sets_it(trained, named_target):
    """``dtype=`` was refused with only the list of keywords taken: the adapter follows the target's dtype."""
    _, folder = trained
    with pytest.raises(TypeError, match=r"does not take \['dtype'\]") as error:
        DVIDrafter.from_pretrained(folder, target=named_target, dtype=torch.bfloat16)
    assert "the target's dtype" in str(error.value) and "Load the target in the dtype you want" in str(error.value)


def copy_with_config(folder, copy, **changes):
    """``folder`` copied to ``copy``, its config.json updated with ``changes`` (None: the key removed)."""
    shutil.copytree(folder, copy)
    config = json.loads((copy / "config.json").read_text())
    config.update(changes)
    (copy / "config.json").write_text(json.dumps({key: value for key, value in config.items() if value is not None}))
    return copy


def test_saving_without_online_state_removes_an_earlier_saves(trained, named_target, tmp_path):
    """An offline drafter saved over an online one's folder left its dvi_online_state.json there:
    from_pretrained(online=True) continued the earlier drafter's schedule position under its online config."""
    _, folder = trained
    reused = tmp_path / "reused"
    shutil.copytree(folder, reused)
    (reused / "dvi_rollout_state.safetensors").write_bytes(b"an earlier training checkpoint's")
    make_drafter(named_target, online=False).save_pretrained(reused)
    assert not (reused / "dvi_online_state.json").exists() and not (reused / "dvi_rollout_state.safetensors").exists()
    fresh = DVIDrafter.from_pretrained(reused, target=named_target, online=True)
    assert fresh.updater.num_updates == 0 and fresh.updater.config == DVIOnlineLearnerConfig()


def test_pushing_deletes_the_online_state_an_earlier_push_left(trained, named_target, monkeypatch):
    """As in a folder: an offline drafter pushed to a repo an online one was pushed to deletes the repo's
    dvi_online_state.json in its commit; an online drafter's push uploads its own (huggingface_hub keeps an uploaded
    file that a delete pattern matches)."""
    commits = []

    def upload_folder(api, *, folder_path, delete_patterns, **kwargs):
        commits.append((sorted(path.name for path in folder_path.iterdir()), delete_patterns))

    monkeypatch.setattr(HfApi, "create_repo", lambda api, repo_id, **kwargs: SimpleNamespace(repo_id=repo_id))
    monkeypatch.setattr(HfApi, "upload_folder", upload_folder)
    card = {"reproduce_command": "python trainers/dvi.py --config x.yaml"}
    online, _ = trained
    online.push_to_hub("org/dvi", model_card_kwargs=card)
    make_drafter(named_target, online=False).push_to_hub("org/dvi", model_card_kwargs=card)
    (online_files, _), (offline_files, offline_deletes) = commits
    assert "dvi_online_state.json" in online_files and "dvi_online_state.json" not in offline_files
    assert {"dvi_online_state.json", "dvi_rollout_state.safetensors"} <= set(offline_deletes or ())


@pytest.mark.parametrize("key", ["exit_layer", "target_shape"])
def test_a_config_without_a_setting_names_the_folder_and_the_key(trained, named_target, tmp_path, key):
    """A config.json without exit_layer was a bare KeyError."""
    _, folder = trained
    damaged = copy_with_config(folder, tmp_path / "damaged", **{key: None})
    with pytest.raises(MissingConfigKeyError, match=rf"'config.json' of folder '{damaged}' lacks \['{key}'\]: .*"
                       "saved or downloaded in part"):
        DVIDrafter.from_pretrained(damaged, target=named_target)


@pytest.mark.parametrize("extra", [{"foo": 1}, {"format_version": 99}, {"hf_adaptive_spec_version": "9.0.0"}])
def test_unknown_config_keys_are_refused_as_for_policies(trained, named_target, tmp_path, extra):
    """A key of a newer version (or a typo) loaded silently, where policies raise UnknownConfigKeyError."""
    _, folder = trained
    edited = copy_with_config(folder, tmp_path / "edited", **extra)
    with pytest.raises(UnknownConfigKeyError, match=rf"holds \['{next(iter(extra))}'\], which DVIDrafter does not "
                       r"take .* its keys are \['exit_layer', 'target_shape'\]"):
        DVIDrafter.from_pretrained(edited, target=named_target)


def test_unknown_keys_of_an_old_adapter_name_its_dvi_config_json(trained, named_target, tmp_path):
    """A key dvi_config.json does not take was refused naming config.json, which such a folder does not hold."""
    _, folder = trained
    edited = copy_as_legacy(folder, tmp_path / "edited", foo=1)
    with pytest.raises(UnknownConfigKeyError, match=rf"^'dvi_config.json' of folder '{edited}' holds \['foo'\], which "
                       r"DVIDrafter does not take .* its keys are \['exit_layer', 'target'\] and 'artifact_type'\. "
                       r"Fix or remove them in dvi_config.json") as error:
        DVIDrafter.from_pretrained(edited, target=named_target)
    assert "config.json" not in str(error.value).replace("dvi_config.json", "")


@pytest.mark.parametrize("legacy", [False, True], ids=["config.json", "dvi_config.json"])
@pytest.mark.parametrize("exit_layer", [0, -1, 4, 9, 2.0, "2", None, True])
def test_an_invalid_saved_exit_layer_names_the_file_the_range_and_the_fix(
    trained, named_target, tmp_path, legacy, exit_layer
):
    """A saved exit_layer no split point of the target (the tiny one has 4 layers: 1..3) was refused as a constructor
    argument ('Pass an int in 1..3'), which from_pretrained does not take, without naming the file."""
    _, folder = trained
    copy = copy_as_legacy if legacy else copy_with_config
    edited = copy(folder, tmp_path / "edited", exit_layer=exit_layer)
    if exit_layer is None and not legacy:  # copy_with_config removes a None key: write JSON null
        config = json.loads((edited / "config.json").read_text())
        (edited / "config.json").write_text(json.dumps({**config, "exit_layer": None}))
    filename, shape_key = ("dvi_config.json", "target") if legacy else ("config.json", "target_shape")
    kind = "" if isinstance(exit_layer, int) and not isinstance(exit_layer, bool) else r" \(a \w+, not an int\)"
    message = (
        rf"^'{filename}' of folder '{edited}' holds exit_layer={re.escape(repr(exit_layer))}{kind}: .* must be an int "
        rf"in 1\.\.3 for the 4-layer target the adapter was saved for \('{shape_key}'\)\. .*set exit_layer in "
        rf"{filename} to the value the adapter was trained with .*, or save or download the adapter again\.$"
    )
    with pytest.raises(ValueError, match=message):
        DVIDrafter.from_pretrained(edited, target=named_target)


def test_an_uncached_hub_repo_names_the_cache_not_a_damaged_adapter(named_target, tmp_path):
    """Offline, a repo id not in the cache was called "no DVI adapter, or one saved or downloaded in part"."""
    with pytest.raises(MissingArtifactFileError, match="'config.json' of Hub repo 'org/absent-dvi' is not in the "
                       "local Hugging Face cache") as error:
        DVIDrafter.from_pretrained("org/absent-dvi", target=named_target, cache_dir=tmp_path, local_files_only=True)
    assert "holds neither" not in str(error.value)


def test_exit_layer_is_fixed_at_construction(named_target, tmp_path):
    """Setting exit_layer kept the 2-layer draft path and saved exit_layer 3: another drafter than the one drafting."""
    drafter = make_drafter(named_target, online=False)
    with pytest.raises(AttributeError, match=r"fixed at construction.* DVIDrafter\(target, exit_layer=3\)"):
        drafter.exit_layer = 3
    drafter.save_pretrained(tmp_path / "saved")
    saved = json.loads((tmp_path / "saved" / "config.json").read_text())["exit_layer"]
    assert saved == drafter.exit_layer == len(drafter.shallow.layers) == EXIT_LAYER


def test_an_adapter_for_a_shallower_target_names_the_target_it_was_trained_for(trained):
    """Onto a 2-layer target, an adapter of a 4-layer one was refused as exit_layer=2 'Pass an int in 1..1', which
    from_pretrained does not take: the saved target shape is compared first."""
    _, folder = trained
    with pytest.raises(WeightsMismatchError, match=r"trained for a target with \{'num_hidden_layers': 4.* this "
                       r"target has \{'num_hidden_layers': 2"):
        DVIDrafter.from_pretrained(folder, target=tiny_model("llama", num_hidden_layers=2))


@pytest.mark.parametrize(
    ("name", "value", "named"),
    [("lora_alpha", 64, r"lora_alpha 64 \(the adapter's 32\), scaling 4.0 \(the adapter's 2.0\)"),
     ("r", 8, r"r 8 \(the adapter's 16\)"), ("use_rslora", True, r"scaling 8.0 \(the adapter's 2.0\)"),
     ("lora_dropout", 0.1, r"lora_dropout 0.1 \(the adapter's 0.0\)")],
)
def test_a_lora_config_changed_since_the_adapter_was_built_is_not_saved(named_target, tmp_path, name, value, named):
    """drafter.lora_config.lora_alpha = 64 drafted with the built scale 2.0 and saved alpha 64: the loaded adapter
    drafted with scale 4.0 (another drafter, silently); r = 8 saved a folder refused at load as mis-shaped."""
    drafter = make_drafter(named_target, online=False)
    setattr(drafter.lora_config, name, value)
    with pytest.raises(ValueError, match=rf"LoraConfig was changed after its adapter was built: {named}"):
        drafter.save_pretrained(tmp_path / "saved")
    assert not (tmp_path / "saved" / "adapter_config.json").exists()


def test_a_lora_config_built_as_saved_round_trips(named_target, tmp_path):
    from peft import LoraConfig

    lora = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.5, use_rslora=True, target_modules=["draft_head"])
    DVIDrafter(named_target, EXIT_LAYER, lora_config=lora).save_pretrained(tmp_path / "a")
    DVIDrafter.from_pretrained(tmp_path / "a", target=named_target).save_pretrained(tmp_path / "b")
    assert json.loads((tmp_path / "b" / "adapter_config.json").read_text())["lora_alpha"] == 8
    with pytest.raises(ValueError, match=r"set its rank and alpha with r= and lora_alpha=, not rank_pattern"):
        DVIDrafter(named_target, EXIT_LAYER, lora_config=LoraConfig(r=4, rank_pattern={"draft_head": 8},
                                                                     target_modules=["draft_head"]))


def test_an_adapter_config_of_another_rank_names_both_ranks(trained, named_target, tmp_path):
    """Saved before edits were refused (or edited by hand): the load named mis-shaped weights and nothing else."""
    _, folder = trained
    copy_with_config(folder, tmp_path / "edited")
    adapter_config = tmp_path / "edited" / "adapter_config.json"
    adapter_config.write_text(json.dumps({**json.loads(adapter_config.read_text()), "r": 8}))
    with pytest.raises(WeightsMismatchError, match=r"mis-shaped .*The weights have rank 16 and 'adapter_config.json' "
                       r"says r=8: set r to 16 there"):
        DVIDrafter.from_pretrained(tmp_path / "edited", target=named_target)


def test_the_rollout_state_reads_a_home_folder_as_save_pretrained_does(named_target, tmp_path, monkeypatch):
    """save_rollout_state('~/x') wrote into a literal '~' folder (or failed, none existing) while
    save_pretrained('~/x') and from_pretrained('~/x') read the home folder (hub.location.local_path)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run").mkdir()
    drafter = make_drafter(named_target)
    drafter.save_rollout_state("~/run")
    assert (tmp_path / "run" / "dvi_rollout_state.safetensors").is_file() and not (tmp_path / "~").exists()
    assert make_drafter(named_target).load_rollout_state("~/run")


@pytest.mark.parametrize("method", ["save_rollout_state", "load_rollout_state"])
def test_the_rollout_state_of_a_drafter_not_online_is_refused(named_target, tmp_path, method):
    """Was AttributeError: 'NoneType' object has no attribute 'rollout_state' (or, loading from a folder without
    the file, False as if nothing were saved)."""
    drafter = make_drafter(named_target, online=False)
    with pytest.raises(RuntimeError, match=r"not online: create it with online=True or call enable_online\(\)"):
        getattr(drafter, method)(tmp_path)
