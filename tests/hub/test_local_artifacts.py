"""``save_pretrained`` / ``from_pretrained`` on local folders: round trips and every refusal."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from hf_adaptive_spec.hub import (
    ArtifactLocation,
    ArtifactTypeError,
    AutoArtifact,
    HubArtifactMixin,
    MissingArtifactFileError,
    MissingConfigKeyError,
    PickleWeightsError,
    UnknownConfigKeyError,
    WeightsMismatchError,
    register_artifact,
    resolve_safetensors,
)
from hf_adaptive_spec.policies import ReSpSPolicy, StaticTreePolicy
from hf_adaptive_spec.policies.serialization import AutoDraftPolicy

from .artifacts import GRU_TYPE, MLP_TYPE, TinyDraftHead, TinyGRUPolicy, TinyMLPPolicy, TinyThresholdPolicy


@pytest.fixture
def saved_mlp(tmp_path: Path) -> tuple[TinyMLPPolicy, Path]:
    torch.manual_seed(0)
    policy = TinyMLPPolicy(hidden_size=5, width=7)
    policy.save_pretrained(tmp_path / "mlp")
    return policy, tmp_path / "mlp"


def test_module_artifact_round_trip(saved_mlp):
    policy, folder = saved_mlp
    assert sorted(path.name for path in folder.iterdir()) == ["README.md", "config.json", "model.safetensors"]
    assert json.loads((folder / "config.json").read_text()) == {
        "artifact_type": MLP_TYPE, "hidden_size": 5, "width": 7, "max_depth": 4,
    }
    loaded = TinyMLPPolicy.from_pretrained(folder)
    assert not loaded.training
    features = torch.randn(3, 5)
    assert torch.equal(loaded(features), policy(features))


def test_config_only_artifact_round_trip(tmp_path: Path):
    TinyThresholdPolicy(threshold=-1.25, depth=3).save_pretrained(tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["README.md", "config.json"]
    loaded = AutoDraftPolicy.from_pretrained(tmp_path)
    assert isinstance(loaded, TinyThresholdPolicy)
    assert (loaded.threshold, loaded.depth) == (-1.25, 3)


def test_static_tree_policy_round_trip(tmp_path: Path):
    StaticTreePolicy(depth=5, top_k=3, total_tokens=12, sample_drafts=True).save_pretrained(tmp_path / "tree")
    StaticTreePolicy.chain(4).save_pretrained(tmp_path / "chain")
    assert StaticTreePolicy.from_pretrained(tmp_path / "tree").config == StaticTreePolicy(5, 3, 12, True).config
    chain = AutoDraftPolicy.from_pretrained(tmp_path / "chain")
    assert isinstance(chain, StaticTreePolicy)
    assert chain.config == StaticTreePolicy.chain(4).config


def test_auto_artifact_picks_the_class_from_the_config(saved_mlp):
    assert type(AutoArtifact.from_pretrained(saved_mlp[1])) is TinyMLPPolicy


def _edit_weights(folder: Path, edit) -> None:
    tensors = load_file(folder / "model.safetensors")
    edit(tensors)
    save_file(tensors, folder / "model.safetensors")


def test_missing_keys_are_refused(saved_mlp):
    _edit_weights(saved_mlp[1], lambda tensors: tensors.pop("head.bias"))
    with pytest.raises(WeightsMismatchError, match=r"missing keys \['head.bias'\], unexpected keys \[\]"):
        TinyMLPPolicy.from_pretrained(saved_mlp[1])


def test_unexpected_keys_are_refused(saved_mlp):
    _edit_weights(saved_mlp[1], lambda tensors: tensors.update(value_head=torch.zeros(2)))
    with pytest.raises(WeightsMismatchError, match=r"missing keys \[\], unexpected keys \['value_head'\]"):
        TinyMLPPolicy.from_pretrained(saved_mlp[1])


def test_shape_mismatch_is_refused(saved_mlp):
    with pytest.raises(WeightsMismatchError, match="(?s)model.safetensors.*does not fit TinyMLPPolicy.*size mismatch"):
        TinyMLPPolicy.from_pretrained(saved_mlp[1], width=9)


def test_pickle_only_folder_is_refused_without_unpickling(saved_mlp, monkeypatch):
    policy, folder = saved_mlp
    torch.save(policy.state_dict(), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()
    monkeypatch.setattr(torch, "load", lambda *args, **kwargs: pytest.fail("a pickle was loaded"))
    with pytest.raises(PickleWeightsError, match=rf"{folder}.*'model.safetensors'.*pytorch_model.bin"):
        TinyMLPPolicy.from_pretrained(folder)


def test_pickle_only_adapter_is_refused(tmp_path: Path):
    (tmp_path / "adapter_model.bin").write_bytes(b"not read")
    with pytest.raises(PickleWeightsError, match="'adapter_model.safetensors'.*adapter_model.bin"):
        resolve_safetensors(ArtifactLocation(str(tmp_path)), "adapter_model.safetensors")


def test_missing_weights_file_is_named_with_what_the_folder_holds_and_the_fix(saved_mlp):
    """The message named the file and the folder only: not what writes the file, nor what to do."""
    (saved_mlp[1] / "model.safetensors").unlink()
    message = (
        rf"'model.safetensors' not found in folder '{saved_mlp[1]}' \(it holds README.md, config.json\)\. "
        r"save_pretrained writes it beside config.json: if the save did not finish or the file was removed, save the "
        r"artifact there again; if the folder holds another artifact's files, pass the folder this one was saved to\."
    )
    with pytest.raises(MissingArtifactFileError, match=message):
        TinyMLPPolicy.from_pretrained(saved_mlp[1])


def test_missing_config_is_named(tmp_path: Path):
    with pytest.raises(MissingArtifactFileError, match=rf"'config.json' not found in folder '{tmp_path}'"):
        TinyMLPPolicy.from_pretrained(tmp_path)


def test_uncached_hub_repo_offline_is_named(tmp_path: Path):
    with pytest.raises(MissingArtifactFileError, match="'config.json' of Hub repo 'org/absent' is not in the local"):
        TinyMLPPolicy.from_pretrained("org/absent", cache_dir=tmp_path, local_files_only=True)


def test_a_missing_folder_shaped_like_a_repo_id_is_named_as_both(tmp_path: Path):
    """'artifacts/x' may be a repo id or a folder: when neither is found, the error says so, not only the Hub's side."""
    with pytest.raises(MissingArtifactFileError,
                       match=r"Hub repo 'artifacts/absent'.*No local folder 'artifacts/absent' exists either"):
        TinyMLPPolicy.from_pretrained("artifacts/absent", cache_dir=tmp_path, local_files_only=True)


def test_wrong_artifact_type_names_both(saved_mlp):
    with pytest.raises(ArtifactTypeError, match=rf"'{MLP_TYPE}' artifact, not a '{GRU_TYPE}' one.*TinyMLPPolicy"):
        TinyGRUPolicy.from_pretrained(saved_mlp[1])


def test_config_without_artifact_type_is_refused(tmp_path: Path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(ArtifactTypeError, match="no 'artifact_type' field"):
        AutoArtifact.from_pretrained(tmp_path)


def test_unregistered_artifact_type_is_named(tmp_path: Path):
    (tmp_path / "config.json").write_text(json.dumps({"artifact_type": "hf_adaptive_spec_tests.policy.unknown"}))
    with pytest.raises(ArtifactTypeError, match=rf"'hf_adaptive_spec_tests.policy.unknown'.*registered: .*{MLP_TYPE}"):
        AutoDraftPolicy.from_pretrained(tmp_path)


def test_auto_draft_policy_refuses_other_artifacts(tmp_path: Path):
    TinyDraftHead().save_pretrained(tmp_path)
    with pytest.raises(ArtifactTypeError, match="TinyDraftHead.*not a DraftPolicy"):
        AutoDraftPolicy.from_pretrained(tmp_path)


def test_a_taken_artifact_type_cannot_be_registered_again():
    with pytest.raises(ValueError, match=f"'{MLP_TYPE}' is already registered to .*TinyMLPPolicy"):
        register_artifact(MLP_TYPE, TinyGRUPolicy)


def test_an_artifact_type_needs_a_card_kind():
    with pytest.raises(TypeError, match="declares artifact_type but no card_kind"):
        type("NoCard", (HubArtifactMixin,), {}, artifact_type="hf_adaptive_spec_tests.policy.no_card")


def test_an_unknown_card_kind_is_refused_at_class_definition():
    with pytest.raises(ValueError, match="card_kind 'drafter' is not one of policy, eagle3_drafter, dvi_adapter"):
        type("BadCard", (HubArtifactMixin,), {}, card_kind="drafter")


class _ShallowTree(StaticTreePolicy):
    """A subclass that forgot its own artifact_type."""


def test_a_subclass_saved_under_its_parents_artifact_type_says_so(tmp_path: Path, caplog):
    """As transformers' auto classes, AutoDraftPolicy loads it as the parent: right for a recorder, wrong for a
    subclass that decides otherwise, which is told to declare its own artifact_type."""
    with caplog.at_level("WARNING"):
        _ShallowTree(depth=2, top_k=1, total_tokens=3).save_pretrained(tmp_path / "sub")
    assert "_ShallowTree is saved as StaticTreePolicy" in caplog.text and "declare its own" in caplog.text
    assert type(AutoDraftPolicy.from_pretrained(tmp_path / "sub")) is StaticTreePolicy
    assert type(_ShallowTree.from_pretrained(tmp_path / "sub")) is _ShallowTree  # a parent's folder, instrumented


def test_saving_again_writes_the_card_of_what_is_saved_now_and_keeps_a_hand_written_one(tmp_path: Path):
    StaticTreePolicy(depth=6).save_pretrained(tmp_path, model_card_kwargs={"base_model": "org/old-target"})
    StaticTreePolicy(depth=3).save_pretrained(tmp_path, model_card_kwargs={"base_model": "org/new-target"})
    assert ("org/new-target" in (tmp_path / "README.md").read_text()
            and "org/old-target" not in (tmp_path / "README.md").read_text())
    (tmp_path / "README.md").write_text("# My own notes\n")
    StaticTreePolicy(depth=3).save_pretrained(tmp_path)
    assert (tmp_path / "README.md").read_text() == "# My own notes\n"


def test_a_home_folder_loads_as_a_folder(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    StaticTreePolicy(depth=3, top_k=2, total_tokens=5).save_pretrained(tmp_path / "policy")
    assert AutoDraftPolicy.from_pretrained("~/policy").config.depth == 3


def test_a_gated_repo_is_named_as_gated(monkeypatch):
    from types import SimpleNamespace

    from huggingface_hub.errors import GatedRepoError

    from hf_adaptive_spec.hub import location

    def gated(**kwargs):
        raise GatedRepoError("gated", response=SimpleNamespace(headers={}, status_code=403, request=None, text=""))

    monkeypatch.setattr(location, "hf_hub_download", gated)
    with pytest.raises(MissingArtifactFileError, match="is gated: request access on its Hub page"):
        location.ArtifactLocation("org/gated-policy").resolve("config.json")


class _SetPolicy(TinyThresholdPolicy, artifact_type="hf_adaptive_spec_tests.policy.set_taking"):
    """Takes a collection that JSON cannot encode as such (a set)."""

    def __init__(self, threshold: float = -2.0, depth: int = 6, skip: object = ()):
        super().__init__(threshold, depth)
        self.skip = skip


def test_a_range_or_numpy_argument_is_saved_as_a_list_not_dropped(tmp_path: Path):
    import numpy as np

    _SetPolicy(skip=range(1, 4)).save_pretrained(tmp_path / "range")
    _SetPolicy(depth=np.int64(3), skip=np.array([1, 2])).save_pretrained(tmp_path / "numpy")
    assert json.loads((tmp_path / "range" / "config.json").read_text())["skip"] == [1, 2, 3]
    assert AutoDraftPolicy.from_pretrained(tmp_path / "numpy").skip == [1, 2]
    assert AutoDraftPolicy.from_pretrained(tmp_path / "numpy").depth == 3


def test_an_argument_json_cannot_encode_is_refused_on_saving_not_dropped(tmp_path: Path):
    with pytest.raises(TypeError, match=r"cannot write skip=\{1, 2\} \(a set\) to config.json: JSON cannot encode"):
        _SetPolicy(skip={1, 2}).save_pretrained(tmp_path)
    assert not (tmp_path / "config.json").exists()


class _ChainOnly(StaticTreePolicy, artifact_type="hf_adaptive_spec_tests.policy.chain_only"):
    """A subclass whose __init__ narrows its parent's: only the depth is a choice."""

    def __init__(self, depth: int = 3):
        super().__init__(depth=depth, top_k=1, total_tokens=depth + 1)


class _ConfigTaking(HubArtifactMixin, card_kind="policy", artifact_type="hf_adaptive_spec_tests.policy.config_dict"):
    """huggingface_hub's own pattern: one ``config`` argument, written flattened into config.json."""

    def __init__(self, config: dict | None = None):
        self.config = config or {}


def test_what_save_pretrained_writes_loads_back_with_a_narrowed_init_or_a_config_argument(tmp_path: Path):
    """save_pretrained wrote the parent's settings (top_k, total_tokens, sample_drafts) for a subclass that does not
    take them, and the key check then refused the folder as holding unknown keys; a ``config`` argument's keys are
    written flattened, and were refused too (found by a review). Both loaded before the check, and load now."""
    _ChainOnly(4).save_pretrained(tmp_path / "chain")
    assert json.loads((tmp_path / "chain" / "config.json").read_text()) == {
        "artifact_type": "hf_adaptive_spec_tests.policy.chain_only", "depth": 4}
    assert _ChainOnly.from_pretrained(tmp_path / "chain").config.total_tokens == 5
    _ConfigTaking({"depth": 2}).save_pretrained(tmp_path / "config")
    assert _ConfigTaking.from_pretrained(tmp_path / "config").config["depth"] == 2


def test_an_unknown_config_key_is_refused_naming_it_and_the_accepted_ones(tmp_path: Path):
    StaticTreePolicy(depth=3, top_k=2, total_tokens=5).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "sample_draft": True}))  # sample_drafts misspelt
    message = r"holds \['sample_draft'\], which StaticTreePolicy does not take.*'sample_drafts'"
    with pytest.raises(UnknownConfigKeyError, match=message):
        AutoDraftPolicy.from_pretrained(tmp_path)
    with pytest.raises(UnknownConfigKeyError, match=message):
        StaticTreePolicy.from_pretrained(tmp_path)


def test_a_config_lacking_an_argument_without_default_is_named_with_the_fix(tmp_path: Path):
    """ReSpSPolicy.__init__ said only "missing 1 required positional argument: 'hidden_size'", naming no file."""
    ReSpSPolicy(hidden_size=4, feature_layers=(1,), actions=[(4, 2, 2)], net_arch=(8,)).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({k: v for k, v in config.items() if k != "hidden_size"}))
    message = rf"'config.json' of folder '{tmp_path}' lacks \['hidden_size'\].*hidden_size=\.\.\."
    with pytest.raises(MissingConfigKeyError, match=message):
        AutoDraftPolicy.from_pretrained(tmp_path)
    assert ReSpSPolicy.from_pretrained(tmp_path, hidden_size=4).feature_mean.shape == (4,)  # given by the caller


class _Standardised(nn.Module, HubArtifactMixin, card_kind="policy",
                    artifact_type="hf_adaptive_spec_tests.policy.standardised"):
    """A module keeping a statistic float32 through a cast by ``float32_keys`` alone (no ``_apply`` of its own)."""

    float32_keys = frozenset({"stats.mean"})

    def __init__(self, width: int = 3):
        super().__init__()
        self.proj = nn.Linear(width, width)
        self.stats = nn.Module()
        self.stats.register_buffer("mean", torch.zeros(width))


def test_dtype_casts_what_is_loaded_as_transformers_does(saved_mlp, tmp_path: Path):
    """``from_pretrained(path, dtype=torch.bfloat16)``, transformers' habit, raised "__init__() got an unexpected
    keyword argument 'dtype'"."""
    policy, folder = saved_mlp
    for loaded in (TinyMLPPolicy.from_pretrained(folder, dtype=torch.bfloat16),
                   AutoDraftPolicy.from_pretrained(folder, dtype="bfloat16")):
        assert {p.dtype for p in loaded.parameters()} == {torch.bfloat16} and not loaded.training
        assert torch.equal(loaded.head.weight, policy.head.weight.to(torch.bfloat16))
    assert {p.dtype for p in TinyMLPPolicy.from_pretrained(folder, dtype="auto").parameters()} == {torch.float32}
    with pytest.raises(TypeError, match=r"dtype=torch.int8\): dtype is a floating torch.dtype .* or 'auto'"):
        TinyMLPPolicy.from_pretrained(folder, dtype=torch.int8)
    TinyThresholdPolicy(threshold=-1.5).save_pretrained(tmp_path / "threshold")  # no tensors: nothing to cast
    assert AutoDraftPolicy.from_pretrained(tmp_path / "threshold", dtype=torch.bfloat16).threshold == -1.5


def test_dtype_keeps_the_float32_keys_float32(tmp_path: Path):
    """Cast after loading, a statistic listed in ``float32_keys`` keeps its float32 value (100.2 rounds to 100.0 in
    bfloat16), in a module without an ``_apply`` of its own and in Re-SpS."""
    module = _Standardised()
    module.stats.mean.fill_(100.2)
    module.save_pretrained(tmp_path / "module")
    loaded = _Standardised.from_pretrained(tmp_path / "module", dtype=torch.bfloat16)
    assert loaded.proj.weight.dtype == torch.bfloat16
    assert loaded.stats.mean.dtype == torch.float32 and torch.equal(loaded.stats.mean, module.stats.mean)
    policy = ReSpSPolicy(hidden_size=4, feature_layers=(1,), actions=[(4, 2, 2)], net_arch=(8,))
    policy.feature_mean.fill_(100.2)
    policy.save_pretrained(tmp_path / "resps")
    loaded = AutoDraftPolicy.from_pretrained(tmp_path / "resps", dtype=torch.bfloat16)
    assert loaded.actor[0].weight.dtype == torch.bfloat16 and torch.equal(loaded.feature_mean, policy.feature_mean)


def test_a_module_saved_in_bfloat16_comes_back_with_its_float32_keys_float32(tmp_path: Path):
    """Loading cast the module to the saved weights' dtype, rounding the float32 statistics before the file's float32
    values were copied into them, in a module without an ``_apply`` of its own (Re-SpS kept them by its own)."""
    module = _Standardised()
    module.stats.mean.fill_(100.2)
    module.to(torch.bfloat16)
    module.stats.mean = torch.full_like(module.stats.mean, 100.2, dtype=torch.float32)
    module.save_pretrained(tmp_path / "module")
    loaded = _Standardised.from_pretrained(tmp_path / "module")
    assert loaded.proj.weight.dtype == torch.bfloat16
    assert loaded.stats.mean.dtype == torch.float32 and torch.equal(loaded.stats.mean, module.stats.mean)


def test_torch_dtype_and_device_map_are_refused_naming_what_to_use(saved_mlp):
    """Both raised only "__init__() got an unexpected keyword argument"."""
    moved = r": move it after loading, as .*from_pretrained\(path\).to\(device\) \(it loads on the CPU\)"
    with pytest.raises(TypeError, match=r"TinyMLPPolicy.from_pretrained does not take torch_dtype=: pass dtype="):
        TinyMLPPolicy.from_pretrained(saved_mlp[1], torch_dtype=torch.bfloat16)
    with pytest.raises(TypeError, match=r"does not take device_map=" + moved):
        AutoDraftPolicy.from_pretrained(saved_mlp[1], device_map="auto")
    with pytest.raises(TypeError, match=r"does not take device=" + moved):
        AutoDraftPolicy.from_pretrained(saved_mlp[1], device="cpu")  # was: __init__() got an unexpected keyword


def test_a_revision_given_for_a_local_folder_is_said_to_be_ignored_once(saved_mlp, caplog):
    """A folder is read as it is (as huggingface_hub and transformers read it); ``revision=`` was dropped silently."""
    folder = saved_mlp[1]
    with caplog.at_level("WARNING", logger="hf_adaptive_spec.hub"):
        TinyMLPPolicy.from_pretrained(folder)
        assert not caplog.records
        AutoDraftPolicy.from_pretrained(folder, revision="v1")  # builds several locations: one warning
        TinyMLPPolicy.from_pretrained(folder, revision="v1")
    warnings = [record.getMessage() for record in caplog.records]
    assert warnings == [
        f"revision='v1' is ignored for the local folder '{folder}': a revision applies to Hub repos only, and the "
        "folder is read as it is now. Check that revision out into the folder, or pass the Hub repo id to load it."
    ]


def test_saved_weights_get_the_mode_the_umask_gives(tmp_path: Path):
    """safetensors writes 0600 whatever the umask: a policy saved into a shared folder was readable by its writer
    alone."""
    previous = os.umask(0o022)
    try:
        TinyMLPPolicy().save_pretrained(tmp_path / "policy")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "policy" / "model.safetensors").stat().st_mode) == 0o644
