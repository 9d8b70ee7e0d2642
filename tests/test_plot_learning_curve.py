"""``examples/plot_learning_curve.py`` writes its plot and table where --output says, folders included."""

from __future__ import annotations

from pathlib import Path

from example_scripts import load_example

REPO = Path(__file__).resolve().parents[1]


def test_output_in_a_folder_that_does_not_exist_yet(tmp_path):
    example = load_example("plot_learning_curve")
    output = tmp_path / "curve" / "new" / "mymodel"
    example.main(["--curve", f"stage 6={REPO / 'artifacts' / 'eagle3-smollm2-stage6'}", "--output", str(output)])
    assert output.with_suffix(".png").stat().st_size > 0
    assert "| stage 6 |" in output.with_suffix(".md").read_text()
