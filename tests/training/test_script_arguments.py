"""Every training script names the model card's fields alike, and an argument renamed for that is refused by its new
name rather than by TRL's bare "unknown argument"."""

from __future__ import annotations

import dataclasses

import pytest

from hf_adaptive_spec.training.base import RENAMED_SCRIPT_ARGUMENTS, check_renamed_arguments, run_training_script
from hf_adaptive_spec.training.dvi import script as dvi_script
from hf_adaptive_spec.training.eagle3 import script as eagle3_script
from hf_adaptive_spec.training.ltd import script as ltd_script
from hf_adaptive_spec.training.ppow import script as ppow_script
from hf_adaptive_spec.training.radar import script as radar_script
from hf_adaptive_spec.training.resps import script as resps_script

POLICY_SCRIPTS = {"ltd": ltd_script, "radar": radar_script, "resps": resps_script}
DRAFTER_SCRIPTS = {"eagle3": eagle3_script, "ppow": ppow_script, "dvi": dvi_script}


def _script_fields(script) -> set[str]:
    script_type = script.make_parser().dataclass_types[0]
    return {field.name for field in dataclasses.fields(script_type)}


@pytest.mark.parametrize("method", [*POLICY_SCRIPTS, *DRAFTER_SCRIPTS])
def test_every_script_names_the_cards_target_data_and_command_alike(method):
    script = {**POLICY_SCRIPTS, **DRAFTER_SCRIPTS}[method]
    fields = _script_fields(script)
    assert {"base_model", "dataset_name", "reproduce_command"} <= fields
    assert ("drafter_name" in fields) == (method in POLICY_SCRIPTS)  # a drafter script trains the drafter it would name
    assert not fields & set(RENAMED_SCRIPT_ARGUMENTS)


def _never_called(*_):
    raise AssertionError("main ran: the argument was not refused")


@pytest.mark.parametrize("method", [*POLICY_SCRIPTS, *DRAFTER_SCRIPTS])
def test_a_base_model_that_is_no_hub_id_is_refused_before_training(method, tmp_path):
    """The card's metadata can name only a Hub id; a local path or a free name given as base_model would otherwise
    surface as a warning when the card is written, after training."""
    parser = {**POLICY_SCRIPTS, **DRAFTER_SCRIPTS}[method].make_parser()
    required = [arg for action in parser._actions if action.required for arg in (action.option_strings[0], "x")]
    for name in ("./my-target", "my target"):
        with pytest.raises(ValueError, match=f"base_model='{name}' is not a Hub model id"):
            run_training_script(parser, _never_called, [*required, "--output_dir", str(tmp_path), "--base_model", name])
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"output_dir: {tmp_path / 'out'}\nbase_model: ./my-target\n", encoding="utf-8")
    with pytest.raises(ValueError, match="is not a Hub model id"):
        run_training_script(parser, _never_called, [*required, "--config", str(recipe)])
    script_args, _ = parser.parse_args_and_config([*required, "--output_dir", str(tmp_path), "--base_model", "org/t"])
    assert script_args.base_model == "org/t"


@pytest.mark.parametrize("method", list(POLICY_SCRIPTS))
@pytest.mark.parametrize("old", list(RENAMED_SCRIPT_ARGUMENTS))
def test_an_old_name_is_refused_naming_the_new_one_in_a_recipe_and_on_the_command_line(method, old, tmp_path):
    new = RENAMED_SCRIPT_ARGUMENTS[old]
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"output_dir: {tmp_path / 'out'}\n{old}: org/some-name\n", encoding="utf-8")
    parser = POLICY_SCRIPTS[method].make_parser()
    message = f"{old} is now {new}"
    with pytest.raises(ValueError, match=message):
        run_training_script(parser, _never_called, ["--config", str(recipe)])
    with pytest.raises(ValueError, match=message):
        run_training_script(parser, _never_called, ["--output_dir", str(tmp_path), f"--{old}", "org/some-name"])
    with pytest.raises(ValueError, match=message):
        run_training_script(parser, _never_called, ["--output_dir", str(tmp_path), f"--{old}=org/some-name"])


def test_a_prefix_of_a_drafter_scripts_own_argument_is_not_taken_for_an_old_name():
    """argparse takes ``--target_model_name`` for ``--target_model_name_or_path`` in the drafter scripts: refusing it
    as Re-SpS's old ``target_model_name`` would send the user to ``base_model`` and train on the default target."""
    for script in DRAFTER_SCRIPTS.values():
        check_renamed_arguments(script.make_parser(), ["--target_model_name", "org/my-target"])
    script_args, _ = eagle3_script.make_parser().parse_args_and_config(
        ["--dataset_path", "d.jsonl", "--output_dir", "out", "--target_model_name", "org/my-target"]
    )
    assert script_args.target_model_name_or_path == "org/my-target" and script_args.base_model is None


@pytest.mark.parametrize("method, argv, message", [
    ("radar", ["--dataset_path", "rec", "--profile_path", "p.json", "--eval_fraction", "-0.1"],
     r"eval_fraction must be a number >= 0 and < 1"),  # held out 9 of 10 prompts and trained on one
    ("ltd", ["--recording_dir", "rec", "--profile_path", "p.json", "--depth", "0"],
     r"depth must be an int >= 1 \(unset: the recording's\)"),  # 0 read as unset: the recording's depth
    ("ltd", ["--recording_dir", "rec", "--profile_path", "p.json", "--num_threads", "0"],
     r"num_threads must be an int >= 1"),  # torch's RuntimeError after the recording loaded
    ("eagle3", ["--dataset_path", "data.jsonl", "--num_conversations", "0"],
     r"num_conversations must be an int >= 1"),  # torch's sampler error after the target loaded
    ("resps", ["--recordings", "rec", "--hardware_profile", "p.json", "--num_eval_prompts", "-3"],
     r"num_eval_prompts must be an int >= 0"),  # trained on all but 3 prompts and evaluated on none
    ("resps", ["--recordings", "rec", "--hardware_profile", "p.json", "--target_num_hidden_layers", "0"],
     r"target_num_hidden_layers must be an int >= 1"),
], ids=["radar-eval-fraction", "ltd-depth-zero", "ltd-threads", "eagle3-conversations", "resps-eval-prompts",
        "resps-target-layers"])
def test_a_script_argument_that_meant_something_else_is_refused_before_the_run(placeholder_inputs, tmp_path, method,
                                                                               argv, message):
    script = {**POLICY_SCRIPTS, **DRAFTER_SCRIPTS}[method]
    ran = []
    with pytest.raises(ValueError, match=message):
        run_training_script(script.make_parser(), lambda *_: ran.append(1),
                            [*argv, "--output_dir", str(tmp_path / "out")])
    assert not ran and not (tmp_path / "out").exists()  # refused before the run folder was written


def test_a_continued_ltd_policy_refuses_shape_arguments_other_than_its_own(tmp_path):
    """A continued policy keeps its shape: other depth, size choices or lookup_feature were ignored silently (the
    recipes set a shape, so the policy's own values are taken, others refused by name)."""
    from hf_adaptive_spec.policies.ltd import LTDPolicy
    from hf_adaptive_spec.training.ltd.script import LTDScriptArguments, build_policy

    LTDPolicy(depth=2, top_k=2, total_tokens=4, size_choices=[1, 3], depth_actor=(8,), depth_critic=(8,),
              size_actor=(8,), size_critic=(8,)).save_pretrained(tmp_path / "policy")

    def continued(**shape):
        script_args = LTDScriptArguments(recording_dir="rec", profile_path="p.json", init_from=str(tmp_path / "policy"),
                                         **shape)
        return build_policy(script_args, recording=None)

    assert continued(depth=2, size_choices=[1, 3]).size_choices == [1, 3]  # its own values: taken
    with pytest.raises(ValueError, match=r"another shape \(depth: 2 -> 3; size_choices: \[1, 3\] -> \[1, 2, 3\]\)"):
        continued(depth=3, size_choices=[1, 2, 3])
    with pytest.raises(ValueError, match=r"lookup_feature: False -> True"):
        continued(lookup_feature=True)


@pytest.mark.parametrize("method", [*POLICY_SCRIPTS, *DRAFTER_SCRIPTS])
def test_a_recipe_key_no_argument_has_is_refused_naming_the_closest(method, tmp_path):
    """TRL's own refusal is a traceback that tells to edit the dataclass or pass fail_with_unknown_args=False."""
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"output_dir: {tmp_path / 'out'}\nlearning_ratee: 0.1\nnot_close_to_anything_xyz: 1\n"
                      "env:\n  TOKENIZERS_PARALLELISM: 'false'\n", encoding="utf-8")
    parser = {**POLICY_SCRIPTS, **DRAFTER_SCRIPTS}[method].make_parser()
    with pytest.raises(ValueError, match=r"does not have: learning_ratee \(did you mean learning_rate\?\), "
                                         r"not_close_to_anything_xyz\. Fix or remove them"):
        run_training_script(parser, _never_called, [f"--config={recipe}"])
    assert not (tmp_path / "out").exists()  # refused before the run writes its arguments
