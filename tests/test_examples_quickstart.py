"""``examples/quickstart.py``: a profile and a tree of the user's are not both taken, one silently over the other."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from example_scripts import load_example


@pytest.fixture
def quickstart(monkeypatch):
    example = load_example("quickstart")
    monkeypatch.setattr(example.hfas, "load_default_model", lambda **kwargs: pytest.fail("loaded the models"))
    return example


@pytest.mark.parametrize(
    "argv", [["--profile", "p.json", "--no-profile"], ["--profile", "p.json", "--tree", "3", "2", "6"]]
)
def test_a_profile_with_no_profile_or_a_tree_is_refused_before_loading(quickstart, argv, capsys):
    """``--no-profile`` silently dropped ``--profile``; a profile replaced ``--tree`` with its own recommendation."""
    with pytest.raises(SystemExit) as exit_info:
        quickstart.main(argv)
    assert exit_info.value.code == 2
    assert "--profile sets the tree from its recommendation" in capsys.readouterr().err


def test_a_tree_given_is_decoded_with_whatever_default_profile_there_is(quickstart, monkeypatch):
    """The default profile (``profile``'s default path, when there is one) replaced an explicit ``--tree``."""
    monkeypatch.setattr(quickstart, "_default_profile_for", lambda model, drafter: "default_profile.json")
    monkeypatch.setattr(quickstart.hfas, "fast_path", lambda model, buckets: None)
    monkeypatch.setattr(quickstart, "_say_when_the_default_tree_is_slow", lambda model, dtype: None)
    args = quickstart.parse_args(["--tree", "3", "2", "6"])
    tree = quickstart._speculation(args, SimpleNamespace(), None)["assistant_policy"].config
    assert (tree.depth, tree.top_k, tree.total_tokens) == (3, 2, 6)
    defaults = quickstart.parse_args([])
    monkeypatch.setattr(quickstart.hfas, "recommended_buckets", lambda profile, model, drafter: [2])
    monkeypatch.setattr(quickstart.hfas, "recommended_generate_kwargs",
                        lambda profile, model, drafter: {"from": profile})
    assert quickstart._speculation(defaults, SimpleNamespace(), None) == {"from": "default_profile.json"}
