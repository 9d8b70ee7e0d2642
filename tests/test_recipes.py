"""Recipes that a fresh clone runs as they are: they parse with their trainer's parser, name data the clone holds,
and leave machine timings to the user's own profile."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from hf_adaptive_spec.checkpoints import shipped_checkpoint
from hf_adaptive_spec.policies.ltd import LTDPolicy
from hf_adaptive_spec.policies.radar import RadarPolicy
from hf_adaptive_spec.training.dvi import script as dvi_script
from hf_adaptive_spec.training.eagle3 import script as eagle3_script
from hf_adaptive_spec.training.ltd import script as ltd_script
from hf_adaptive_spec.training.ppow import script as ppow_script
from hf_adaptive_spec.training.radar import script as radar_script
from hf_adaptive_spec.training.resps import script as resps_script

REPO = Path(__file__).resolve().parents[1]
RECIPES = REPO / "trainers" / "recipes"
#: a recipe's method is the start of its file name, as in trainers/<method>.py
SCRIPTS = {"dvi": dvi_script, "eagle3": eagle3_script, "ltd": ltd_script, "ppow": ppow_script, "radar": radar_script,
           "resps": resps_script}


@pytest.mark.parametrize("recipe", sorted(path.name for path in RECIPES.glob("*.yaml")))
def test_every_recipe_parses_with_its_methods_script(recipe):
    """A recipe with a key its script does not know (one renamed since, a typo) fails only when a user runs it.
    A GPU recipe's ``bf16`` and ``tf32`` are refused on a machine without one: turned off here to read the rest."""
    method = recipe.split("_", 1)[0]
    assert method in SCRIPTS, f"{recipe}: name recipes <method>_..., for a method of trainers/"
    _, training_args = SCRIPTS[method].make_parser().parse_args_and_config(
        args=["--config", str(RECIPES / recipe), *(("--bf16", "false", "--tf32", "false") if "gpu" in recipe else ())]
    )
    assert training_args.output_dir


#: a command a recipe's header gives, up to the shell's next separator: ``hf-adaptive-spec record|profile ...`` or
#: ``python trainers/<name>.py ...``
HEADER_COMMAND = re.compile(r"(?:hf-adaptive-spec (record|profile)|python trainers/(\w+)\.py)([^;|&()>]*)")


def command_flags(command: str) -> set[str]:
    """The option strings ``hf-adaptive-spec <command>`` or ``trainers/<command>.py`` parses."""
    if command in ("record", "profile"):
        from hf_adaptive_spec.environments import cli as record_cli
        from hf_adaptive_spec.profiling import cli as profile_cli

        parser = {"record": record_cli, "profile": profile_cli}[command].make_parser()
    elif command in SCRIPTS:
        parser = SCRIPTS[command].make_parser()
    else:
        sys.path.insert(0, str(REPO / "trainers"))
        try:
            parser = __import__(command).make_parser()
        finally:
            sys.path.remove(str(REPO / "trainers"))
    return set(parser._option_string_actions) | {"--config"}  # TRL's parser reads --config before argparse


def header_commands(recipe: str) -> list[tuple[str, list[str]]]:
    """Each command of ``recipe``'s comment lines (continued lines joined): its name and the flags it passes."""
    lines = [line.lstrip("#").strip() for line in (RECIPES / recipe).read_text(encoding="utf-8").splitlines()
             if line.startswith("#")]
    commands = []
    for line in "\n".join(lines).replace("\\\n", " ").splitlines():
        for match in HEADER_COMMAND.finditer(line):
            flags = re.findall(r"(?<![\w-])(--[a-z][\w-]*)", match.group(3))
            commands.append((match.group(1) or match.group(2), flags))
    return commands


@pytest.mark.parametrize("recipe", sorted(path.name for path in RECIPES.glob("*.yaml")))
def test_the_commands_in_a_recipe_s_header_pass_flags_their_script_parses(recipe):
    """A header says how the recipe's data, recording and profile were made; a flag renamed since (``profile
    --eagle3-checkpoint`` for ``--eagle3``) fails only when a user reruns it."""
    for command, flags in header_commands(recipe):
        known = command_flags(command)
        assert not set(flags) - known, f"{recipe}: {command} does not take {sorted(set(flags) - known)}"


@pytest.mark.parametrize("recipe", sorted(path.name for path in RECIPES.glob("radar*.yaml")))
def test_radar_recipes_take_the_policy_call_from_the_profile(recipe):
    """A recipe holding one machine's policy-call time overrode the user's own profile's measurement."""
    parser = radar_script.make_parser()
    script_args, training_args = parser.parse_args_and_config(args=["--config", str(RECIPES / recipe)])
    assert training_args.policy_step_seconds is None  # unset: the profile's policy_call_seconds
    assert script_args.profile_path and script_args.dataset_path
    # the header says how the committed policy was trained: with the EPYC's policy-call time, or with the profile's
    header = (RECIPES / recipe).read_text(encoding="utf-8")
    assert "--policy_step_seconds 3.0e-4" in header or "trained so (the profile's policy_call_seconds)" in header


def test_the_eagle3_smoke_recipe_runs_on_data_a_fresh_clone_holds():
    script_args, training_args = eagle3_script.make_parser().parse_args_and_config(
        args=["--config", str(RECIPES / "eagle3_smollm2_smoke.yaml")]
    )
    assert (REPO / script_args.dataset_path).is_file()  # committed (artifacts/README.md), read from the repository root
    assert script_args.num_conversations == 64 and training_args.max_steps == 4


def test_the_ltd_lookup_first_recipe_trains_the_shipped_compiled_variants_shape():
    """The recipe behind the shipped ``cpu/bfloat16/compiled`` LTD: lookup first, with the 4-token branch it needs."""
    script_args, _ = ltd_script.make_parser().parse_args_and_config(
        args=["--config", str(RECIPES / "ltd_smollm2_compiled_lookup_first.yaml")]
    )
    assert script_args.lookup_first and not script_args.lookup_feature and script_args.lookup_tokens == 4
    shipped = LTDPolicy.from_pretrained(shipped_checkpoint("ltd", "cpu/bfloat16/compiled"))
    assert shipped.lookup_first and shipped.size_choices == script_args.size_choices
    assert shipped.trained_with_lookup_tokens == script_args.lookup_tokens


def test_the_radar_lookup_first_recipe_trains_the_shipped_compiled_variants_shape():
    """The recipe behind the shipped ``cpu/bfloat16/compiled`` RADAR: lookup first, with the 4-token branch it needs."""
    script_args, training_args = radar_script.make_parser().parse_args_and_config(
        args=["--config", str(RECIPES / "radar_smollm2_compiled_lookup_first.yaml")]
    )
    assert script_args.lookup_first and script_args.lookup_tokens == 4 and training_args.allow_skip
    shipped = RadarPolicy.from_pretrained(shipped_checkpoint("radar", "cpu/bfloat16/compiled"))
    assert shipped.lookup_first and shipped.allow_skip and shipped.tree.total_tokens == script_args.total_tokens
    assert shipped.tree.depth == script_args.depth and shipped.trained_with_lookup_tokens == script_args.lookup_tokens
