"""--profile_steps: the operator table of a few optimizer steps, after unprofiled ones, written beside the run."""

from __future__ import annotations

import json

import pytest
from tiny_models import make_char_tokenizer, tiny_model

from hf_adaptive_spec.training.step_profile import PROFILE_FILE, StepProfileCallback


def _train(tmp_path, monkeypatch, max_steps: int, profile_steps: int):
    import hf_adaptive_spec.training.eagle3.script as script

    tokenizer = make_char_tokenizer()
    tokenizer.chat_template = "{% for m in messages %}{{ m['role'][0] + ',' + m['content'] + '.' }}{% endfor %}"
    monkeypatch.setattr("hf_adaptive_spec.training.base.load_model",
                        lambda name, dtype: (tiny_model("llama"), tokenizer))
    turns = [[{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a {i}"}] for i in range(8)]
    conversations = [{"conversation": conversation} for conversation in turns]
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(c) + "\n" for c in conversations), encoding="utf-8")
    args = script.Eagle3Config(output_dir=str(tmp_path / "out"), max_steps=max_steps, per_device_train_batch_size=2,
                               ttt_steps=2, draft_vocab_size=8, max_length=32, save_strategy="no", report_to=[],
                               disable_tqdm=True)
    script_args = script.Eagle3ScriptArguments(dataset_path=str(tmp_path / "data.jsonl"), profile_steps=profile_steps)
    script.main(script_args, args)
    return tmp_path / "out" / PROFILE_FILE


def test_the_profiled_steps_come_after_three_unprofiled_ones_and_their_table_is_written(tmp_path, monkeypatch):
    profile = _train(tmp_path, monkeypatch, max_steps=6, profile_steps=2)
    text = profile.read_text()
    assert text.startswith("optimizer steps 4..5 (2): ")  # steps 1-3 unprofiled, then 2, the 6th not
    assert "operators by self_cpu_time_total" in text and "aten::" in text and "Self CPU" in text
    phases = text.split("phases:\n")[1].split("operators by")[0]
    for phase in ("train.target_features", "train.draft_and_loss", "Optimizer.step"):
        assert f"  {phase}" in phases and "(2 calls)" in phases.split(f"  {phase}")[1].splitlines()[0]


def test_a_run_that_ends_inside_the_profiled_steps_reports_the_ones_it_ran(tmp_path, monkeypatch):
    text = _train(tmp_path, monkeypatch, max_steps=4, profile_steps=5).read_text()
    assert text.startswith("optimizer steps 4..4 (1): ")


def test_no_profile_unless_asked(tmp_path, monkeypatch):
    assert not _train(tmp_path, monkeypatch, max_steps=2, profile_steps=0).exists()


@pytest.mark.parametrize("steps, skip", [(0, 3), (-1, 3), (2.5, 3), (2, -1)])
def test_a_profile_of_no_steps_is_refused(steps, skip):
    with pytest.raises(ValueError, match="must be"):
        StepProfileCallback(steps, skip)


def test_a_profiler_that_does_not_start_leaves_the_stage_training_and_says_so(tmp_path, monkeypatch):
    """A lent GPU's call is minutes long: a profiler that fails there must not cost the stage."""
    import hf_adaptive_spec.training.step_profile as step_profile

    def broken(**_):
        raise RuntimeError("CUPTI could not be loaded")

    monkeypatch.setattr(step_profile, "profile", broken)
    text = _train(tmp_path, monkeypatch, max_steps=6, profile_steps=2).read_text()
    assert text.startswith("the profiler did not start (RuntimeError: CUPTI could not be loaded); training went on")


def test_a_phase_on_cuda_takes_its_host_time_from_the_host_row_and_its_device_time_from_the_device_row():
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    from hf_adaptive_spec.training.step_profile import phase_summary

    def row(device_type, cpu_us, device_us):
        return SimpleNamespace(key="train.draft_and_loss", device_type=device_type, cpu_time_total=cpu_us,
                               device_time_total=device_us, count=4)

    rows = [row(DeviceType.CPU, 8000.0, 0.0), row(DeviceType.CUDA, 0.0, 6000.0),
            SimpleNamespace(key="aten::mm", device_type=DeviceType.CPU, cpu_time_total=1.0, device_time_total=0.0,
                            count=1)]
    line = "  train.draft_and_loss: host 4.00 ms, accelerator 3.00 ms a step (4 calls)\n"
    assert phase_summary(rows, steps=2) == "phases:\n" + line
