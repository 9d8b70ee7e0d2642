"""The model card's reproduce command is the one that trained the run: the recipe's, plus the overrides."""

from __future__ import annotations

from hf_adaptive_spec.training.base import run_training_script, with_overrides

RECIPE_COMMAND = "python trainers/radar.py --config trainers/recipes/radar_smollm2_compiled.yaml"


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
