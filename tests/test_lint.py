"""The code keeps to the project's ruff rules (``[tool.ruff]`` in pyproject.toml): a line over 120 characters, an
unsorted import, an ``assert`` of a bare string that cannot fail, and the other selected rules fail the suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKED = ("hf_adaptive_spec", "tests", "trainers", "scripts", "examples")


def _ruff(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    ruff = Path(sys.executable).with_name("ruff")
    assert ruff.is_file(), f"ruff is not installed next to {sys.executable}: pip install -e '.[test]' (setup.sh does)"
    return subprocess.run([str(ruff), "check", "--no-cache", *args], cwd=cwd, capture_output=True, text=True)


def test_the_code_keeps_to_the_ruff_rules():
    result = _ruff("--output-format", "concise", *CHECKED)
    assert result.returncode == 0, f"ruff check {' '.join(CHECKED)} found:\n{result.stdout}{result.stderr}"


def test_the_rules_catch_an_assert_that_cannot_fail_and_a_long_line(tmp_path):
    """The check above is not vacuous: the rules it runs flag the bug this test suite once had (a message asserted
    alone, its ``in`` test a separate statement) and a line over the configured length."""
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "bad.py").write_text(
        'def check(note):\n    assert "a message "\n    "the rest" in note\n\n\nLONG = "' + "x" * 120 + '"\n',
        encoding="utf-8",
    )
    found = _ruff("--output-format", "concise", "bad.py", cwd=tmp_path).stdout
    assert "B015" in found and "E501" in found, found
