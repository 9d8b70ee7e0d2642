"""Every artifact kind goes through ``push_to_hub`` and ``from_pretrained("org/name")``.

One module fixture runs three client subprocesses (huggingface_hub reads its endpoint and
offline flag at import): ``push`` and ``load`` against a loopback :class:`FakeHub`, then, with
the server stopped, ``load`` again with ``HF_HUB_OFFLINE=1`` from the cache the first load
filled, plus a repo whose cache entry was built by hand.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from huggingface_hub import ModelCard
from safetensors.torch import load_file

import hf_adaptive_spec

from .artifacts import GRU_TYPE, MLP_TYPE, TinyMLPPolicy
from .fake_hub import FakeHub
from .hf_cache import add_to_hf_cache

CLIENT = Path(__file__).with_name("hub_client.py")
PACKAGE_ROOT = Path(hf_adaptive_spec.__file__).resolve().parent.parent
ROUND_TRIP = ["mlp", "static", "llama", "eagle3", "eagle3_trainer", "dvi", "lora"]
ERROR_REPOS = ["pickle_only", "missing_weights"]
Tensors = dict[str, torch.Tensor]


@dataclass
class HubRun:
    """What the client stages reported, and what the server held at the end."""

    root: Path
    reports: dict[str, dict[str, dict]]  # stage -> artifact -> report
    repos: dict[str, dict[str, bytes]]  # repo id -> files at main
    requests: list[str]
    hand_built: Tensors

    def result(self, stage: str, name: str) -> dict:
        """The stage's report for ``name``, failing the test with both stages' errors if it failed."""
        report = self.reports[stage][name]
        push = self.reports["push"].get(name, {})
        assert report["ok"], f"{stage} {name}: {report.get('traceback')}\npush: {push.get('traceback', 'ok')}"
        return report

    def tensors(self, stage: str, name: str) -> Tensors:
        self.result(stage, name)
        return load_file(self.root / stage / f"{name}.safetensors")


def client_env(root: Path, **overrides: str) -> dict[str, str]:
    """A clean environment: no inherited HF settings or tokens, a private HF_HOME and cache."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("HF_", "HUGGING_FACE_"))}
    env.update(
        HF_HOME=str(root / "home"),
        HF_HUB_CACHE=str(root / "cache"),
        HF_TOKEN="hf_fake_token_for_the_loopback_hub",
        HF_HUB_OFFLINE="0",
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HUB_ETAG_TIMEOUT="5",
        HF_HUB_DOWNLOAD_TIMEOUT="5",
        TRANSFORMERS_OFFLINE="0",
        PYTHONPATH=os.pathsep.join(filter(None, [str(PACKAGE_ROOT), env.get("PYTHONPATH")])),
    )
    env.update(overrides)
    return env


def run_client(stage: str, out_dir: Path, names: list[str], env: dict[str, str]) -> dict[str, dict]:
    process = subprocess.run(
        [sys.executable, str(CLIENT), stage, str(out_dir), *names],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert process.returncode == 0, process.stderr[-4000:]
    return json.loads((out_dir / "report.json").read_text())


def assert_same_tensors(expected: Tensors, actual: Tensors) -> None:
    assert sorted(actual) == sorted(expected)
    for key, value in expected.items():
        assert torch.equal(actual[key], value), key


def hand_built_repo(cache_dir: Path, folder: Path) -> Tensors:
    """Save a policy and put it in the cache as ``org/hand-built``, as no download did."""
    torch.manual_seed(1)
    policy = TinyMLPPolicy(hidden_size=6, width=8)
    policy.save_pretrained(folder)
    add_to_hf_cache(cache_dir, "org/hand-built", folder)
    return policy.state_dict()


@pytest.fixture(scope="module")
def hub_run(tmp_path_factory: pytest.TempPathFactory) -> HubRun:
    root = tmp_path_factory.mktemp("hub-run")
    with FakeHub(max_seconds=200) as hub:
        env = client_env(root, HF_ENDPOINT=hub.url)
        push = run_client("push", root / "push", ROUND_TRIP + ERROR_REPOS, env)
        online = run_client("load", root / "online", ROUND_TRIP + ERROR_REPOS + ["wrong_type"], env)
        repos = {repo_id: dict(repo.commits[-1][1]) for repo_id, repo in hub.repos.items()}
    hand_built = hand_built_repo(root / "cache", root / "hand-built")
    offline_env = client_env(root, HF_ENDPOINT=hub.url, HF_HUB_OFFLINE="1")  # the server is gone
    offline = run_client("load", root / "offline", ROUND_TRIP + ["hand_built"], offline_env)
    return HubRun(root, {"push": push, "online": online, "offline": offline}, repos, list(hub.requests), hand_built)


def test_learned_policy_round_trips_through_the_hub(hub_run: HubRun):
    assert_same_tensors(hub_run.tensors("push", "mlp"), hub_run.tensors("online", "mlp"))
    report = hub_run.result("online", "mlp")
    assert report["auto_class"] == "TinyMLPPolicy"
    assert report["training"] is False
    files = hub_run.repos["org/tiny-mlp"]
    assert sorted(files) == ["README.md", "config.json", "model.safetensors"]
    assert json.loads(files["config.json"]) == {"artifact_type": MLP_TYPE, "hidden_size": 6, "width": 8, "max_depth": 4}


def test_pushed_policy_card_has_metadata_results_and_command(hub_run: HubRun):
    hub_run.result("push", "mlp")
    card = ModelCard(hub_run.repos["org/tiny-mlp"]["README.md"].decode())
    assert card.data.library_name == "hf-adaptive-spec"
    assert card.data.base_model == "org/tiny-llama"
    assert card.data.datasets == ["org/sharegpt-regenerated"]
    assert {"speculative-decoding", "mlp"} <= set(card.data.tags)
    assert "| MT-Bench (80 questions) | 1x H100 | 3.21 | 2.05x |" in card.text
    assert "hf-adaptive-spec train mlp --target org/tiny-llama --seed 0" in card.text
    assert 'AutoDraftPolicy.from_pretrained("org/tiny-mlp")' in card.text


@pytest.mark.parametrize("name", ["mlp", "llama", "eagle3", "eagle3_trainer", "dvi", "lora"])
def test_offline_load_from_the_cache_after_the_server_stopped(hub_run: HubRun, name: str):
    assert_same_tensors(hub_run.tensors("push", name), hub_run.tensors("offline", name))


def test_offline_static_policy_from_the_cache(hub_run: HubRun):
    assert hub_run.result("offline", "static")["config"] == hub_run.result("online", "static")["config"]


def test_hand_built_cache_layout_loads_offline(hub_run: HubRun):
    assert_same_tensors(hub_run.hand_built, hub_run.tensors("offline", "hand_built"))


def test_static_tree_policy_round_trips_through_the_hub(hub_run: HubRun):
    report = hub_run.result("online", "static")
    assert report["config"] == {"depth": 5, "top_k": 3, "total_tokens": 12, "sample_drafts": True}
    assert report["auto_class"] == "StaticTreePolicy"
    assert sorted(hub_run.repos["org/static-tree"]) == ["README.md", "config.json"]


def test_peft_lora_adapter_round_trips_through_the_hub(hub_run: HubRun):
    # LoRA weights are non-zero (init_lora_weights=False), so equal logits mean the adapter is applied.
    assert_same_tensors(hub_run.tensors("push", "lora"), hub_run.tensors("online", "lora"))
    files = hub_run.repos["org/dvi-lora"]
    assert {"adapter_config.json", "adapter_model.safetensors"} <= set(files)
    assert json.loads(files["adapter_config.json"])["base_model_name_or_path"] == "org/tiny-llama"


def test_eagle3_drafter_round_trips_through_the_hub_in_specforge_layout(hub_run: HubRun):
    assert_same_tensors(hub_run.tensors("push", "eagle3"), hub_run.tensors("online", "eagle3"))
    files = hub_run.repos["org/tiny-eagle3"]
    config = json.loads(files["config.json"])
    assert config["architectures"] == ["LlamaForCausalLMEagle3"] and config["draft_vocab_size"] == 32
    assert "model.safetensors" in files and not any(name.endswith(".bin") for name in files)
    assert b"library_name: hf-adaptive-spec" in files["README.md"]


def test_a_trainer_pushes_its_drafter_with_the_trainers_card(hub_run: HubRun):
    """--push_to_hub on the EAGLE-3 trainer: the drafter loads, and the card says what trained it (Trainer.push_to_hub
    calls create_model_card(model_name=...), which once failed with a TypeError)."""
    assert_same_tensors(hub_run.tensors("push", "eagle3_trainer"), hub_run.tensors("online", "eagle3_trainer"))
    card = ModelCard(hub_run.repos["org/trained-eagle3"]["README.md"].decode())
    assert card.data.base_model == "org/tiny-llama" and card.data.datasets == ["org/sharegpt-regenerated"]
    assert "Trained with the training-time test (2 steps) for 2 optimizer steps" in card.text
    assert "greedy first-draft acceptance" in card.text and "heldout_curve.jsonl" in card.text
    assert "python trainers/eagle3.py --config tiny.yaml" in card.text
    commits = [r for r in hub_run.requests if r.startswith("POST /api/models/org/trained-eagle3/commit")]
    assert len(commits) == 1, commits  # saved, then pushed once (Trainer.save_model called from outside pushed too)


def test_dvi_adapter_round_trips_through_the_hub(hub_run: HubRun):
    tensors = hub_run.tensors("push", "dvi")
    assert tensors and all(value.abs().sum() > 0 for value in tensors.values())
    assert_same_tensors(tensors, hub_run.tensors("online", "dvi"))
    files = hub_run.repos["org/tiny-dvi"]
    assert {"adapter_model.safetensors", "adapter_config.json", "config.json", "README.md"} <= set(files)
    assert json.loads(files["adapter_config.json"])["base_model_name_or_path"] == "org/tiny-llama"


def test_pretrained_model_round_trips_through_the_hub_with_our_card(hub_run: HubRun):
    assert_same_tensors(hub_run.tensors("push", "llama"), hub_run.tensors("online", "llama"))
    files = hub_run.repos["org/tiny-llama"]
    assert "model.safetensors" in files and not any(name.endswith(".bin") for name in files)
    card = ModelCard(files["README.md"].decode())
    assert card.data.library_name == "hf-adaptive-spec"
    assert card.data.base_model == "org/target"


@pytest.mark.parametrize(
    ("name", "error_type", "fragments"),
    [
        ("pickle_only", "PickleWeightsError", ["pytorch_model.bin", "org/pickle-only", "safetensors"]),
        ("missing_weights", "MissingArtifactFileError", ["'model.safetensors'", "org/config-only-mlp"]),
        ("wrong_type", "ArtifactTypeError", [MLP_TYPE, GRU_TYPE, "TinyMLPPolicy"]),
    ],
)
def test_hub_load_errors_name_the_file_and_repo(hub_run: HubRun, name: str, error_type: str, fragments: list[str]):
    if name in ERROR_REPOS:
        hub_run.result("push", name)  # the broken repo was set up
    report = hub_run.reports["online"][name]
    assert not report["ok"]
    assert report["error_type"] == error_type, report["error"]
    for fragment in fragments:
        assert fragment in report["error"]


def test_pickle_weights_are_never_downloaded(hub_run: HubRun):
    assert hub_run.reports["online"]["pickle_only"]["error_type"] == "PickleWeightsError"
    assert not any(request.endswith("pytorch_model.bin") for request in hub_run.requests)
