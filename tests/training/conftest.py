"""Fixtures of the training tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def placeholder_inputs(tmp_path, monkeypatch):
    """Run in ``tmp_path``, where the relative inputs the script-argument tests name exist (``rec``, ``other``,
    ``p.json``, ``data.jsonl``): a script checks that its local inputs exist before it calls ``main``."""
    monkeypatch.chdir(tmp_path)
    for folder in ("rec", "other"):
        (tmp_path / folder).mkdir()
    for file in ("p.json", "data.jsonl"):
        (tmp_path / file).write_text("")
    return tmp_path
