"""The keywords of ``save_pretrained`` / ``from_pretrained`` / ``push_to_hub`` for every artifact class: each is
honoured or refused with the fix, never dropped (a home folder, ``subfolder``, ``state_dict``, ``is_main_process``,
transformers' keywords, a folder holding another artifact)."""

from __future__ import annotations

import functools
import json
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from huggingface_hub import HfApi
from safetensors.torch import load_file
from tiny_models import tiny_eagle3, tiny_model

from hf_adaptive_spec.core.drafter_identity import weights_digest
from hf_adaptive_spec.drafters.dvi import DVIDrafter
from hf_adaptive_spec.drafters.eagle3 import Eagle3Drafter, Eagle3DraftModel
from hf_adaptive_spec.hub import ArtifactTypeError, MissingArtifactFileError
from hf_adaptive_spec.policies import StaticTreePolicy
from hf_adaptive_spec.policies.serialization import AutoDraftPolicy

from .artifacts import TinyMLPPolicy
from .hf_cache import add_to_hf_cache

#: every artifact class that saves and loads: two policies (config-only, a module), EAGLE-3 (the drafter and the
#: model inside it, which Trainer saves) and DVI
KINDS = ("static", "mlp", "eagle3", "eagle3_model", "dvi")
#: those saved through the Hub mixin (Eagle3DraftModel is a transformers PreTrainedModel)
MIXIN_KINDS = ("static", "mlp", "eagle3", "dvi")


@pytest.fixture(scope="module")
def target():
    return tiny_model()


def _artifact(kind: str, target):
    if kind == "static":
        return StaticTreePolicy(depth=5, top_k=2, total_tokens=7)
    if kind == "mlp":
        torch.manual_seed(0)
        return TinyMLPPolicy(hidden_size=5, width=7)
    if kind == "eagle3":
        return tiny_eagle3(target)
    if kind == "eagle3_model":
        return tiny_eagle3(target).model
    return DVIDrafter(target, exit_layer=2)


def _loader(kind: str, target):
    return {
        "static": StaticTreePolicy.from_pretrained,
        "mlp": TinyMLPPolicy.from_pretrained,
        "eagle3": functools.partial(Eagle3Drafter.from_pretrained, target=target),
        "eagle3_model": functools.partial(Eagle3DraftModel.from_pretrained, target=target),
        "dvi": functools.partial(DVIDrafter.from_pretrained, target=target),
    }[kind]


def _fingerprint(artifact) -> object:
    """What must come back equal: a static tree's settings, a module's weights (a drafter's draft model, an adapter's
    head)."""
    if isinstance(artifact, StaticTreePolicy):
        return artifact.config
    module = {Eagle3Drafter: lambda drafter: drafter.model, DVIDrafter: lambda drafter: drafter.head}.get(
        type(artifact), lambda module: module
    )(artifact)
    return weights_digest(module)


def _files(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


# ----- 1. a home folder: saved where loading reads it ---------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_save_to_a_home_folder_is_where_loading_reads_it(kind, target, tmp_path, monkeypatch):
    """save_pretrained("~/x") wrote ./~/x while from_pretrained("~/x") read $HOME/x: a reload failed, or loaded an older
    artifact saved there without a word."""
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    older = StaticTreePolicy(depth=2, top_k=1, total_tokens=3)
    if kind == "static":  # an earlier save there, which a reload must not return
        older.save_pretrained(home / "artifact")
    artifact = _artifact(kind, target)
    artifact.save_pretrained("~/artifact")
    assert not (cwd / "~").exists()
    assert (home / "artifact" / "config.json").is_file()
    assert _fingerprint(_loader(kind, target)("~/artifact")) == _fingerprint(artifact)


# ----- 2. save_pretrained's keywords: honoured or refused -----------------------------------------------------------


@pytest.mark.parametrize("kind", MIXIN_KINDS)
def test_a_save_keyword_it_does_not_take_is_refused_naming_those_it_takes(kind, target, tmp_path):
    """save_pretrained(folder, pus_to_hub=True) saved and pushed nothing, without a word."""
    with pytest.raises(TypeError, match=r"save_pretrained does not take pus_to_hub=\. It takes .*push_to_hub=, "):
        _artifact(kind, target).save_pretrained(tmp_path / "x", pus_to_hub=True)
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("kind", MIXIN_KINDS)
@pytest.mark.parametrize("keyword", [{"private": True}, {"token": "hf_x"}, {"commit_message": "m"},
                                     {"branch": "dev"}, {"create_pr": True}, {"repo_id": "org/x"}])
def test_a_push_keyword_without_push_to_hub_is_refused_naming_it(kind, keyword, target, tmp_path):
    """save_pretrained(folder, private=True) made no private repo: nothing is pushed without push_to_hub=True."""
    name = next(iter(keyword))
    with pytest.raises(TypeError, match=rf"got {name}= without push_to_hub=True.*Pass push_to_hub=True"):
        _artifact(kind, target).save_pretrained(tmp_path / "x", **keyword)
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("kind", MIXIN_KINDS)
def test_a_process_other_than_the_main_one_writes_nothing(kind, target, tmp_path):
    """save_pretrained(folder, is_main_process=False) wrote the whole folder on every rank."""
    assert _artifact(kind, target).save_pretrained(tmp_path / "x", is_main_process=False) is None
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("kind", MIXIN_KINDS)
def test_safe_serialization_false_and_max_shard_size_are_refused(kind, target, tmp_path):
    artifact = _artifact(kind, target)
    with pytest.raises(ValueError, match=r"safe_serialization=False\): its weights are always written as safetensors"):
        artifact.save_pretrained(tmp_path / "x", safe_serialization=False)
    with pytest.raises(TypeError, match=r"does not take max_shard_size=: it writes its weights to one safetensors"):
        artifact.save_pretrained(tmp_path / "x", max_shard_size="1KB")
    assert not (tmp_path / "x").exists()
    artifact.save_pretrained(tmp_path / "x", safe_serialization=True)  # what it does anyway
    assert _fingerprint(_loader(kind, target)(tmp_path / "x")) == _fingerprint(artifact)


@pytest.mark.parametrize("kind", ["static", "mlp", "dvi"])
def test_a_state_dict_is_refused_where_the_format_writes_its_own(kind, target, tmp_path):
    """save_pretrained(folder, state_dict=...) wrote the live weights instead, without a word."""
    with pytest.raises(TypeError, match=r"does not take state_dict=: it writes .* Load the weights into it first"):
        _artifact(kind, target).save_pretrained(tmp_path / "x", state_dict={})
    assert not (tmp_path / "x").exists()


def test_an_eagle3_drafter_writes_the_state_dict_it_is_given_as_its_model_does(target, tmp_path, monkeypatch):
    """Eagle3Drafter.save_pretrained(state_dict=<bfloat16>) wrote the float32 weights and torch_dtype float32, where
    Eagle3DraftModel.save_pretrained (Trainer's) writes the state dict; a push writes it too."""
    drafter = tiny_eagle3(target)
    half = {key: value.to(torch.bfloat16) if value.is_floating_point() else value
            for key, value in drafter.model.state_dict().items()}
    drafter.save_pretrained(tmp_path / "half", state_dict=half)
    assert {tensor.dtype for tensor in load_file(tmp_path / "half" / "model.safetensors").values()
            if tensor.is_floating_point()} == {torch.bfloat16}
    assert json.loads((tmp_path / "half" / "config.json").read_text())["torch_dtype"] == "bfloat16"
    uploaded = []
    monkeypatch.setattr(HfApi, "create_repo", lambda api, repo_id, **kwargs: SimpleNamespace(repo_id=repo_id))
    monkeypatch.setattr(HfApi, "upload_folder", lambda api, *, folder_path, **kwargs: uploaded.append(
        {tensor.dtype for tensor in load_file(Path(folder_path) / "model.safetensors").values()}))
    drafter.save_pretrained(tmp_path / "pushed", state_dict=half, push_to_hub=True, repo_id="org/e3",
                            model_card_kwargs={"reproduce_command": "x"})
    assert torch.bfloat16 in uploaded[0] and torch.float32 not in uploaded[0]
    drafter.save_pretrained(tmp_path / "own")  # no state dict: the drafter's own weights, as before
    assert load_file(tmp_path / "own" / "model.safetensors")["fc.weight"].dtype == torch.float32
    with pytest.raises(ValueError, match=r"is not this EAGLE-3 drafter's: missing keys \['d2t', "):
        drafter.save_pretrained(tmp_path / "empty", state_dict={})


# ----- 3. subfolder=, and transformers' loading keywords -----------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_subfolder_is_honoured_for_a_folder_and_a_hub_repo_in_the_cache(kind, target, tmp_path):
    """subfolder= was refused as 'a typo of one of' a drafter's keywords, or reached a policy's __init__; an artifact
    in a repo's subfolder could not be loaded at all."""
    artifact = _artifact(kind, target)
    artifact.save_pretrained(tmp_path / "repo" / "sub")
    StaticTreePolicy(depth=2, top_k=1, total_tokens=3).save_pretrained(tmp_path / "repo")  # the repo's top: another
    load = _loader(kind, target)
    assert _fingerprint(load(tmp_path / "repo", subfolder="sub")) == _fingerprint(artifact)
    cache = tmp_path / "cache"
    add_to_hf_cache(cache, "org/repo", tmp_path / "repo")
    loaded = load("org/repo", subfolder="sub", cache_dir=cache, local_files_only=True)
    assert _fingerprint(loaded) == _fingerprint(artifact)
    with pytest.raises(MissingArtifactFileError, match=r"folder .* \(subfolder 'absent'\)"):
        load(tmp_path / "repo", subfolder="absent")


def test_auto_draft_policy_takes_subfolder_and_refuses_one_leaving_the_folder(tmp_path):
    StaticTreePolicy(depth=4, top_k=2, total_tokens=6).save_pretrained(tmp_path / "repo" / "policy")
    assert AutoDraftPolicy.from_pretrained(tmp_path / "repo", subfolder="policy").config.depth == 4
    with pytest.raises(ValueError, match=r"subfolder='\.\./x' leaves the folder or repo"):
        AutoDraftPolicy.from_pretrained(tmp_path / "repo", subfolder="../x")


@pytest.mark.parametrize("keyword", ["trust_remote_code", "low_cpu_mem_usage", "use_safetensors",
                                     "output_loading_info"])
@pytest.mark.parametrize("load", [StaticTreePolicy.from_pretrained, TinyMLPPolicy.from_pretrained,
                                  AutoDraftPolicy.from_pretrained])
def test_a_policy_refuses_transformers_loading_keywords_naming_them(keyword, load, tmp_path):
    """They reached __init__: "StaticTreePolicy.__init__() got an unexpected keyword argument 'trust_remote_code'"."""
    TinyMLPPolicy().save_pretrained(tmp_path / "mlp")
    StaticTreePolicy().save_pretrained(tmp_path / "static")
    folder = tmp_path / ("static" if load == StaticTreePolicy.from_pretrained else "mlp")
    with pytest.raises(TypeError, match=rf"from_pretrained does not take {keyword}=: it is transformers' "
                       r"PreTrainedModel.from_pretrained keyword, and \w+ takes none of them: .* Leave it out\."):
        load(folder, **{keyword: True})


def test_a_policy_refuses_a_keyword_its_init_does_not_take_naming_those_it_does(tmp_path):
    StaticTreePolicy().save_pretrained(tmp_path)
    with pytest.raises(TypeError, match=r"does not take \['dept'\]: besides the Hub options \(revision, .*subfolder\) "
                       r"it takes StaticTreePolicy's __init__ arguments \['depth', "):
        StaticTreePolicy.from_pretrained(tmp_path, dept=3)


# ----- 6. push_to_hub: transformers' keywords refused before anything uploads --------------------------------------


@pytest.mark.parametrize("keyword, hint", [
    ("revision", r"For revision=, pass branch="),
    ("commit_description", r"put the description in commit_message="),
    ("tags", r"model_card_kwargs=\{'tags': \[\.\.\.\]\}"),
    ("safe_serialization", r"always safetensors"),
    ("max_shard_size", r"one safetensors file"),
    ("use_temp_dir", r"always saves to a temporary folder"),
    ("commit_mesage", r""),
])
@pytest.mark.parametrize("kind", MIXIN_KINDS)
def test_push_to_hub_refuses_transformers_keywords_before_anything_uploads(kind, keyword, hint, target, monkeypatch,
                                                                            caplog):
    """push_to_hub(repo, revision="dev") failed with "ModelHubMixin.push_to_hub() got an unexpected keyword argument
    'revision'", after warning about the card, naming neither the class nor branch=."""
    calls = []
    monkeypatch.setattr(HfApi, "create_repo", lambda *args, **kwargs: calls.append("create_repo"))
    monkeypatch.setattr(HfApi, "upload_folder", lambda *args, **kwargs: calls.append("upload_folder"))
    artifact = _artifact(kind, target)
    with caplog.at_level(logging.WARNING), pytest.raises(
        TypeError, match=rf"push_to_hub does not take {keyword}=\..*{hint}.*It takes repo_id=, model_card_kwargs=, "
        r"commit_message=, private=, token=, branch=, create_pr=.*Nothing was saved or uploaded"
    ):
        artifact.push_to_hub("org/x", **{keyword: True})
    assert calls == [] and caplog.text == ""


# ----- 8. a folder holding another artifact is refused before anything changes --------------------------------------


@pytest.mark.parametrize("held", ["static", "mlp", "eagle3", "dvi", "transformers model"])
@pytest.mark.parametrize("kind", KINDS)
def test_saving_into_a_folder_of_another_kind_is_refused_before_anything_changes(kind, held, target, tmp_path):
    """A policy saved into a transformers model's folder replaced its config.json (the model no longer loaded) and
    left model.safetensors beside it; an LTD policy saved over a DVI adapter left the adapter's files."""
    same = kind == held or {kind, held} == {"eagle3", "eagle3_model"}
    folder = tmp_path / "folder"
    if held == "transformers model":
        target.save_pretrained(folder)
    else:
        _artifact(held, target).save_pretrained(folder)
    if same:
        return
    before = _files(folder)
    refused = (rf"{folder} holds .*: .* would replace its config.json there and leave its other files beside the new "
               r"ones.* Save to a folder of its own|EAGLE-3 checkpoint is every")
    with pytest.raises(FileExistsError, match=refused):
        _artifact(kind, target).save_pretrained(folder)
    assert _files(folder) == before


@pytest.mark.parametrize("kind", KINDS)
def test_saving_again_over_its_own_kind_is_fine(kind, target, tmp_path):
    _artifact(kind, target).save_pretrained(tmp_path)
    artifact = _artifact(kind, target)
    artifact.save_pretrained(tmp_path)
    assert _fingerprint(_loader(kind, target)(tmp_path)) == _fingerprint(artifact)


def test_the_refusal_names_what_the_folder_holds(target, tmp_path):
    target.save_pretrained(tmp_path / "model")
    with pytest.raises(FileExistsError, match=r"holds a transformers model \(config.json, generation_config.json, "
                       r"model.safetensors\): StaticTreePolicy.save_pretrained would replace"):
        StaticTreePolicy().save_pretrained(tmp_path / "model")
    StaticTreePolicy().save_pretrained(tmp_path / "static")
    with pytest.raises(FileExistsError, match=r"holds a 'hf_adaptive_spec.policy.static' artifact \(StaticTree"):
        TinyMLPPolicy().save_pretrained(tmp_path / "static")


def test_eagle3_draft_model_names_a_folder_of_another_kind_with_its_loader(target, tmp_path):
    """Eagle3DraftModel.from_pretrained said "Not an EAGLE-3 checkpoint config: architectures=[]" for a policy's
    folder, where Eagle3Drafter.from_pretrained names the artifact and its loader."""
    StaticTreePolicy().save_pretrained(tmp_path / "static")
    DVIDrafter(target, exit_layer=2).save_pretrained(tmp_path / "dvi")
    for folder, loader in (("static", r"StaticTreePolicy.from_pretrained\(path\)"),
                           ("dvi", r"DVIDrafter.from_pretrained\(path, target=model\)")):
        for load in (Eagle3Drafter.from_pretrained, Eagle3DraftModel.from_pretrained):
            with pytest.raises(ArtifactTypeError, match=rf"holds a '.*' artifact, not an EAGLE-3 drafter\. Load it "
                               rf"with {loader}"):
                load(tmp_path / folder, target=target)


def test_a_repo_missing_from_a_given_cache_dir_says_check_cache_dir(tmp_path):
    """The message said "check HF_HUB_CACHE" when cache_dir= was passed, which is where the file was looked for."""
    with pytest.raises(MissingArtifactFileError, match=rf"Download it once online, or check cache_dir='{tmp_path}'\."):
        StaticTreePolicy.from_pretrained("org/static", cache_dir=tmp_path, local_files_only=True)
    with pytest.raises(MissingArtifactFileError, match=r"Download it once online, or check HF_HUB_CACHE\."):
        StaticTreePolicy.from_pretrained("org/static", local_files_only=True)
