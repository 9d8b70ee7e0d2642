"""Replay agrees with live ``generate`` where it used to drift silently: the model's own logits processors, a
sampled plain step's lookup branch, a branch the static path cannot verify, plain steps over several ``top_k``; the
gymnasium environments refuse what they used to ignore or misread."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from replay_helpers import UNIT_PROFILE, two_layer_drafter
from tiny_models import prompt, tiny_model

import hf_adaptive_spec as hfas
from hf_adaptive_spec.environments import MultiReplayEnvironment, ReplayEnvironment, cli, record_replay
from hf_adaptive_spec.environments.gym import DraftStepEnv, TreeConfigEnv
from hf_adaptive_spec.policies.base import DraftPolicy, TreeConfig

torch.set_num_threads(1)

RECORDED = TreeConfig(depth=4, top_k=3, total_tokens=9)
MAX_NEW = 20
REPEATING = torch.tensor([[5, 6, 7, 8, 9, 5, 6, 7, 8, 9, 5, 6]])  # the lookup branch matches here
PROFILE = UNIT_PROFILE
_drafter = two_layer_drafter


@pytest.fixture(scope="module")
def recording(target):
    return record_replay(target, _drafter(target), [REPEATING, prompt(7, seed=11)], RECORDED, MAX_NEW,
                         feature_layers=(1,))


@pytest.mark.parametrize("settings", [
    {"repetition_penalty": 1.5},
    {"no_repeat_ngram_size": 1},  # no token twice: the tiny model repeats tokens, not bigrams
    {"min_new_tokens": 8, "eos_token_id": "third"},  # the end-of-sequence token suppressed where it comes first
], ids=["repetition_penalty", "no_repeat_ngram_size", "min_new_tokens"])
def test_a_recording_picks_the_greedy_tokens_generate_picks_under_the_models_logits_processors(settings):
    """Greedy generate takes the argmax of the scores its generation_config's processors make; a recording that took
    the raw logits' argmax held another generation (a repetition penalty of 1.5 on the tiny model: another token
    from the first on) and the replay diverged from the first cycle."""
    target, ids = tiny_model("llama"), REPEATING  # a prompt of repeated n-grams, which an n-gram ban changes
    if settings.get("eos_token_id") == "third":
        settings = {**settings, "eos_token_id": target.generate(ids, max_new_tokens=3, do_sample=False)[0, -1].item()}
    for name, value in settings.items():
        setattr(target.generation_config, name, value)
    recording = record_replay(target, _drafter(target), [ids], RECORDED, MAX_NEW)
    policy = hfas.StaticTreePolicy(depth=4, top_k=3, total_tokens=9)
    live = target.generate(ids, max_new_tokens=MAX_NEW, do_sample=False, return_dict_in_generate=True,
                           assistant_model=_drafter(target), assistant_policy=policy)
    assert recording.sequence(0) == live.sequences[0].tolist()
    replayed = ReplayEnvironment(recording, PROFILE).replay_prompt(0, policy)
    assert [c.accepted_length for c in replayed] == live.speculation.accepted_lengths
    assert [c.verified_tokens for c in replayed] == live.speculation.verified_tokens


class _SampledPlainSteps(DraftPolicy):
    """Plain steps that keep ``sample_drafts``: generate grafts no lookup chain onto them."""

    def tree_config(self, state):
        return TreeConfig(depth=0, top_k=3, total_tokens=1, sample_drafts=True)


def test_a_sampled_plain_step_grafts_no_lookup_chain_as_generate_does(target, recording):
    """The replay grafted the chain onto a depth-0 sampled config (check_config lets depth 0 through), so it verified
    and charged the chain's tokens (5 where generate verifies 1)."""
    policy = _SampledPlainSteps()
    live = target.generate(REPEATING, max_new_tokens=MAX_NEW, do_sample=False, return_dict_in_generate=True,
                           assistant_policy=policy, prompt_lookup_num_tokens=4).speculation
    replayed = ReplayEnvironment(recording, PROFILE, lookup_tokens=4).replay_prompt(0, policy)
    assert [c.verified_tokens for c in replayed] == live.verified_tokens == [1] * len(live.verified_tokens)
    assert [c.accepted_length for c in replayed] == live.accepted_lengths


@pytest.mark.parametrize("lookup, match", [
    ({"lookup_tokens": -4}, "lookup_tokens must be an int >= 0, got -4"),
    ({"lookup_tokens": True}, "lookup_tokens must be an int >= 0, got True"),
    ({"lookup_tokens": 4, "lookup_ngram_size": 0}, "lookup_ngram_size must be an int >= 1, got 0"),
])
def test_a_lookup_branch_generate_refuses_is_refused_not_replayed_as_none(recording, lookup, match):
    """A negative length or n-gram size matched nothing, and the replay ran silently without a branch."""
    with pytest.raises(ValueError, match=match):
        ReplayEnvironment(recording, PROFILE, **lookup)
    with pytest.raises(ValueError, match=match):
        MultiReplayEnvironment([recording], PROFILE, **lookup)


def test_a_lookup_branch_past_the_static_paths_largest_bucket_is_refused_as_generate_refuses_it(target, recording):
    """generate refuses prompt_lookup_num_tokens >= the largest bucket; the replay verified the root and a 4-token
    chain (5 tokens) and charged them the 4-token bucket's time."""
    from hf_adaptive_spec.generation.static_path import fast_path

    static = tiny_model("llama")
    fast_path(static, buckets=(2, 4))
    with pytest.raises(ValueError, match="largest bucket"):
        static.generate(REPEATING, max_new_tokens=MAX_NEW, do_sample=False, cache_implementation="static",
                        assistant_model=_drafter(static), assistant_policy=hfas.StaticTreePolicy(4, 3, 9),
                        prompt_lookup_num_tokens=4)
    profile = replace(PROFILE, path="static", buckets=[2, 4], verify_tokens=[1, 2, 4, 16],
                      verify_seconds=[1.0, 1.5, 3.0, 6.0])
    with pytest.raises(ValueError, match=r"lookup_tokens=4 verifies up to 5 tokens .* pass lookup_tokens <= 3"):
        ReplayEnvironment(recording, profile, lookup_tokens=4)
    ReplayEnvironment(recording, profile, lookup_tokens=3)  # the root and 3 tokens fit the bucket of 4


def test_a_plain_step_of_any_top_k_replays_over_recordings_of_several_top_k(target, recording):
    """StaticTreePolicy(depth=0, top_k=1, total_tokens=1), the documented plain step, drafts nothing; the replay over
    recordings of top_k 2 and 3 refused it for want of a top_k-1 recording."""
    other = record_replay(target, _drafter(target), [REPEATING, prompt(7, seed=11)], replace(RECORDED, top_k=2),
                          MAX_NEW, feature_layers=(1,))
    plain = hfas.StaticTreePolicy(depth=0, top_k=1, total_tokens=1)
    multi = MultiReplayEnvironment([recording, other], PROFILE)
    multi.check_actions([plain.tree_config(None)])
    result, single = multi.replay(plain), ReplayEnvironment(recording, PROFILE).replay(plain)
    assert result.mean_accepted_tokens == single.mean_accepted_tokens == 1.0
    assert result.tokens_per_second == pytest.approx(single.tokens_per_second, rel=1e-3)


def test_tree_config_env_refuses_a_prompt_it_does_not_hold(recording):
    """reset(options={"prompt": -1}) replayed the last prompt under the name -1; a prompt past the end, or one with
    no cycle, failed with a bare IndexError."""
    empty = replace(recording, prompts=[*recording.prompts, []], prompt_ids=[*recording.prompt_ids, [3, 4]])
    env = TreeConfigEnv(empty, PROFILE, [RECORDED], cycles_per_action=2)
    for prompt_index in (-1, 2, 3):
        with pytest.raises(ValueError, match=rf"prompt {prompt_index} is not a recorded generation .* \[0, 1\]"):
            env.reset(options={"prompt": prompt_index})
    _, info = env.reset(options={"prompt": 1})
    assert info == {"prompt": 1, "position": 0}


def test_draft_step_env_refuses_a_position_without_its_prompt(recording):
    """reset(options={"position": 3}) drew a random cycle and ignored the position."""
    env = DraftStepEnv(recording, PROFILE)
    with pytest.raises(ValueError, match="names a position without its prompt"):
        env.reset(seed=0, options={"position": 3})
    _, info = env.reset(seed=0, options={"prompt": 1, "position": 3})
    assert (info["prompt"], info["position"]) == (1, 3)
    env.close()


def test_record_refuses_depth_0_before_writing_the_manifest_or_the_profile(monkeypatch, tmp_path, capsys):
    """--depth 0 records no tree: the command measured and wrote the --profile and the manifest first, then failed."""
    target = tiny_model("llama")
    monkeypatch.setattr(cli, "load_target", lambda name=None: (target, None))
    monkeypatch.setattr(cli, "load_drafter", lambda model, checkpoint: _drafter(model))
    monkeypatch.setattr(cli, "load_prompts", lambda tokenizer, a: [prompt(7, seed=11)])
    output, profile = tmp_path / "rec", tmp_path / "profile.json"
    argv = ["--output", str(output), "--num-prompts", "1", "--depth", "0", "--top-k", "2", "--total-tokens", "5",
            "--max-new-tokens", "6", "--profile", str(profile), "--profile-context-length", "8",
            "--profile-repeats", "1"]
    assert cli.main(argv) == 2
    assert "--depth must be at least 1, got 0" in capsys.readouterr().err
    assert not output.exists() and not profile.exists()


@pytest.mark.parametrize("environment", [DraftStepEnv, TreeConfigEnv])
def test_the_gym_environments_refuse_prompts_outside_the_recording(recording, environment):
    """prompts=[-1] drew the last prompt's episodes under the name -1 (TreeConfigEnv replayed them until a step);
    prompts=[2] of 2 failed with a bare IndexError."""
    extra = {"configs": [RECORDED]} if environment is TreeConfigEnv else {}
    for prompts in ([-1], [0, 2]):
        with pytest.raises(ValueError, match=r"outside the recording's 2 prompts: give indices 0 to 1"):
            environment(recording, PROFILE, prompts=prompts, **extra)


def test_the_card_names_a_recording_of_later_turns_by_its_conversations(tmp_path):
    """`record --turns 2` counts conversations per shard, each recorded one prompt per turn; the card called them
    "4 first user turns"."""
    import json

    from hf_adaptive_spec.environments.provenance import card_names

    (tmp_path / "shard-000000-000004").mkdir()
    (tmp_path / "shard-000000-000004" / "recording.json").write_text("{}", encoding="utf-8")
    manifest = {"drafter": "eagle3", "eagle3_checkpoint": None, "prompts_file": "data/heldout.jsonl"}
    for turns, named in ((None, "4 first user turns of"), (2, "4 conversations (up to 2 user turns each) of")):
        (tmp_path / "record_args.json").write_text(json.dumps({**manifest, **({"turns": turns} if turns else {})}),
                                                   encoding="utf-8")
        assert card_names(tmp_path)[2] == f"{named} data/heldout.jsonl, greedy replay recording"
