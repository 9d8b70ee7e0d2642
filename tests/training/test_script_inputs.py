"""A training script refuses a missing local input before any model loads, and quotes the recipe's command that
builds it (a recipe's derived data: ``cat`` of committed files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hf_adaptive_spec.training.base import run_training_script
from hf_adaptive_spec.training.script_inputs import building_command

RECIPES = Path(__file__).resolve().parents[2] / "trainers" / "recipes"


def test_a_missing_derived_input_is_refused_with_the_recipes_command_before_main_runs(tmp_path, monkeypatch):
    from hf_adaptive_spec.training.eagle3.script import make_parser

    monkeypatch.chdir(tmp_path)
    Path("held_out.jsonl").write_text("")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        "# Stage 2 on the two files together:\n"
        "#   cat first.jsonl \\\n"
        "#       second.jsonl > both.jsonl\n"
        "#   python trainers/eagle3.py --config recipe.yaml\n"
        f"dataset_path: both.jsonl\nheldout_path: held_out.jsonl\noutput_dir: {tmp_path / 'out'}\n"
    )
    ran = []
    with pytest.raises(FileNotFoundError) as refused:
        run_training_script(make_parser(), lambda *_: ran.append(1), ["--config", str(recipe)])
    assert ran == [] and not (tmp_path / "out").exists()  # nothing loaded, nothing written
    assert str(refused.value) == (
        "This run reads local inputs that do not exist:\n"
        "- dataset_path: no file or folder 'both.jsonl'; the recipe's header builds it with:\n"
        "    cat first.jsonl \\\n"
        "    second.jsonl > both.jsonl\n"
        "Build them first (derived files: artifacts/README.md), or pass the paths that hold them."
    )
    with pytest.raises(FileNotFoundError, match=r"- heldout_path: no file or folder 'gone.jsonl'\nBuild them"):
        run_training_script(make_parser(), lambda *_: ran.append(2), ["--config", str(recipe), "--heldout_path",
                                                                      "gone.jsonl", "--dataset_path", "held_out.jsonl"])
    Path("both.jsonl").write_text("")
    run_training_script(make_parser(), lambda *_: ran.append(3), ["--config", str(recipe)])
    assert ran == [3]


def test_each_path_of_a_list_argument_is_checked(tmp_path, monkeypatch):
    from hf_adaptive_spec.training.resps.script import make_parser

    monkeypatch.chdir(tmp_path)
    Path("rec4").mkdir()
    Path("p.json").write_text("")
    argv = ["--output_dir", str(tmp_path / "out"), "--hardware_profile", "p.json", "--recordings", "rec4", "rec8"]
    with pytest.raises(FileNotFoundError, match=r"- recordings: no file or folder 'rec8'\nBuild them") as refused:
        run_training_script(make_parser(), lambda *_: None, argv)
    assert "rec4" not in str(refused.value)


def test_the_shipped_recipes_derived_data_is_found_in_their_headers():
    """stage 18's header builds target6 over three lines, then target14 from it."""
    recipe = str(RECIPES / "eagle3_smollm2_stage18_cpu.yaml")
    target6 = building_command(recipe, "artifacts/sharegpt_smollm2_target6.jsonl")
    assert target6.startswith("(head -n 1756 artifacts/sharegpt_smollm2_regenerated.jsonl;")
    assert target6.count("\n") == 2
    assert building_command(recipe, "artifacts/sharegpt_smollm2_target14.jsonl") == (
        "cat artifacts/sharegpt_smollm2_target6.jsonl artifacts/sharegpt_smollm2_sampled{9,11,12,14}.jsonl "
        "> artifacts/sharegpt_smollm2_target14.jsonl"
    )
    assert building_command(recipe, "artifacts/sharegpt_smollm2_target1.jsonl") is None  # a prefix is no match


def test_the_commands_that_build_what_a_missing_input_reads_come_first(tmp_path, monkeypatch):
    from hf_adaptive_spec.training.script_inputs import building_commands

    monkeypatch.chdir(tmp_path)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("#   cat ab.jsonl c.jsonl > abc.jsonl\n#   cat a.jsonl b.jsonl > ab.jsonl\n"
                      "dataset_path: abc.jsonl\n")
    assert building_commands(str(recipe), "abc.jsonl") == ["cat a.jsonl b.jsonl > ab.jsonl",
                                                           "cat ab.jsonl c.jsonl > abc.jsonl"]
    Path("ab.jsonl").write_text("")  # built already: only the last command is left
    assert building_commands(str(recipe), "abc.jsonl") == ["cat ab.jsonl c.jsonl > abc.jsonl"]
