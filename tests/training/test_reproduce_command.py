"""The model card's reproduce command is the one that trained the run: the recipe's, plus the overrides."""

from __future__ import annotations

import pytest

from hf_adaptive_spec.training.base import run_training_script, with_overrides

RECIPE_COMMAND = "python trainers/radar.py --config trainers/recipes/radar_smollm2_compiled.yaml"

pytestmark = pytest.mark.usefixtures("placeholder_inputs")  # the inputs the argv below names


def test_overrides_on_the_command_line_are_appended_to_the_recipes_command():
    argv = ["--config", "recipe.yaml", "--profile_path", "p.json", "--output_dir=out dir"]
    assert with_overrides(RECIPE_COMMAND, argv) == f"{RECIPE_COMMAND} --profile_path p.json '--output_dir=out dir'"
    assert with_overrides(RECIPE_COMMAND, ["--config=recipe.yaml", "--seed", "3"]) == f"{RECIPE_COMMAND} --seed 3"
    assert with_overrides(RECIPE_COMMAND, ["--config", "recipe.yaml"]) == RECIPE_COMMAND  # the recipe alone
    assert with_overrides(None, ["--seed", "3"]) is None  # no command recorded stays so
    assert with_overrides("mine", ["--reproduce_command", "mine", "--seed", "3"]) == "mine"  # given: kept as is


def test_a_trainer_script_records_its_overrides_for_the_card(tmp_path):
    from hf_adaptive_spec.training.ltd.script import make_parser

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"output_dir: {tmp_path / 'out'}\nreproduce_command: {RECIPE_COMMAND}\n")
    seen = {}
    run_training_script(make_parser(), lambda script_args, training_args: seen.update(vars(script_args)),
                        ["--config", str(recipe), "--recording_dir", "rec", "--profile_path", "p.json"])
    assert seen["reproduce_command"] == f"{RECIPE_COMMAND} --recording_dir rec --profile_path p.json"


def test_a_resumed_script_keeps_the_script_arguments_that_define_its_run(tmp_path):
    """A resumed LTD run on another recording would train on other data under the same checkpoint."""
    import json

    import pytest

    from hf_adaptive_spec.training.ltd.script import make_parser

    out, ran = tmp_path / "out", []
    base = ["--output_dir", str(out), "--profile_path", "p.json", "--dataset_name", "first"]
    run_training_script(make_parser(), lambda *_: ran.append(1), [*base, "--recording_dir", "rec"])
    assert json.loads((out / "script_args.json").read_text())["recording_dir"] == "rec"
    (out / "checkpoint-5").mkdir()
    resumed = [*base, "--resume_from_checkpoint", str(out / "checkpoint-5")]
    with pytest.raises(ValueError, match=r"other script arguments \(recording_dir: 'rec' -> 'other'; top_k: None -> 4"):
        run_training_script(make_parser(), lambda *_: ran.append(2),
                            [*resumed, "--recording_dir", "other", "--top_k", "4"])
    cards_and_threads = ["--recording_dir", "rec", "--dataset_name", "renamed", "--num_threads", "2"]
    run_training_script(make_parser(), lambda *_: ran.append(3), [*resumed, *cards_and_threads])  # may change
    assert ran == [1, 3]


def test_a_run_started_before_a_script_argument_existed_resumes_with_its_default(tmp_path):
    """Its script_args.json lacks the argument: the run used the default, so only another value is refused."""
    import json

    import pytest

    from hf_adaptive_spec.training.eagle3.script import make_parser

    out, ran = tmp_path / "out", []
    base = ["--output_dir", str(out), "--dataset_path", "data.jsonl"]
    run_training_script(make_parser(), lambda *_: ran.append(1), base)
    stored = json.loads((out / "script_args.json").read_text())
    del stored["target_dtype"]  # as a run started before target_dtype was added wrote it
    (out / "script_args.json").write_text(json.dumps(stored))
    (out / "checkpoint-5").mkdir()
    resumed = [*base, "--resume_from_checkpoint", str(out / "checkpoint-5")]
    run_training_script(make_parser(), lambda *_: ran.append(2), resumed)
    with pytest.raises(ValueError, match=r"target_dtype: 'float32' -> 'bfloat16'"):
        run_training_script(make_parser(), lambda *_: ran.append(3), [*resumed, "--target_dtype", "bfloat16"])
    assert ran == [1, 2]


def test_a_checkpoint_is_resumed_against_the_arguments_that_trained_it_not_a_later_failed_run(tmp_path):
    """The run folder's script_args.json is written at a run's start: a later run into the folder that failed at once
    (here: main raising) rewrote it, and a resume of the earlier run's checkpoint was then compared with the failed
    run's arguments (its data accepted, the real ones refused). A checkpoint keeps its own copy, which a resume
    reads first."""
    import json

    from hf_adaptive_spec.training.ltd.script import make_parser
    from hf_adaptive_spec.training.resume import keep_script_args, read_script_args

    out, ran = tmp_path / "out", []
    base = ["--output_dir", str(out), "--profile_path", "p.json"]
    run_training_script(make_parser(), lambda *_: ran.append(1), [*base, "--recording_dir", "rec"])
    run_arguments = read_script_args(str(out))  # as SpecTrainer reads them when it is built
    (out / "checkpoint-5").mkdir()

    def failing(*_):
        raise RuntimeError("failed before training")

    with pytest.raises(RuntimeError):
        run_training_script(make_parser(), failing, [*base, "--recording_dir", "other"])
    assert json.loads((out / "script_args.json").read_text())["recording_dir"] == "other"
    keep_script_args(run_arguments, str(out / "checkpoint-5"), str(out))  # the first run saves its checkpoint late
    keep_script_args(run_arguments, str(out), str(out))  # the final save into the run folder writes nothing
    assert json.loads((out / "script_args.json").read_text())["recording_dir"] == "other"
    resumed = [*base, "--resume_from_checkpoint", str(out / "checkpoint-5")]
    with pytest.raises(ValueError, match=r"recording_dir: 'rec' -> 'other'"):
        run_training_script(make_parser(), lambda *_: ran.append(2), [*resumed, "--recording_dir", "other"])
    run_training_script(make_parser(), lambda *_: ran.append(3), [*resumed, "--recording_dir", "rec"])
    assert ran == [1, 3]
