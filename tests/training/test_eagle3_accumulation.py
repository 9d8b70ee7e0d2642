"""EAGLE-3 training with gradient accumulation: the accumulated update is the one of a single larger batch."""

from __future__ import annotations

import pytest
import torch
from tiny_models import prompt, tiny_model
from transformers import TrainerCallback

from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
from hf_adaptive_spec.training.eagle3 import Eagle3Config, Eagle3Trainer, build_draft_vocabulary, collate
from hf_adaptive_spec.training.ppow import PPOWConfig, PPOWTrainer

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def target():
    return tiny_model("llama")


@pytest.fixture(scope="module")
def samples(target):
    """Eight conversations, the first four with answers of 4 tokens, the others of 40: micro-batches of four hold
    very different numbers of answer tokens."""
    rows = []
    for seed in range(8):
        ids = target.generate(prompt(4, seed=seed), max_new_tokens=4 if seed < 4 else 40, do_sample=False)[0].tolist()
        rows.append({"input_ids": ids, "loss_mask": [0] * 4 + [1] * (len(ids) - 4)})
    return rows


class KeepGradients(TrainerCallback):
    """Keeps the accumulated gradient before the optimizer step uses it."""

    def __init__(self, model):
        self.model, self.gradients = model, None

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self.gradients = torch.cat([p.grad.flatten() for p in self.model.parameters() if p.grad is not None]).clone()


def _first_gradients(target, samples, tmp_path, batch_size, accumulation, **settings):
    """The gradient of the first optimizer step (learning rate 0) and the logged training loss, the conversations
    drawn in order."""
    torch.manual_seed(0)
    draft = Eagle3DraftModel.from_target(target, draft_to_target=build_draft_vocabulary(samples, 32, 96))
    args = Eagle3Config(output_dir=str(tmp_path / f"{batch_size}x{accumulation}"), max_steps=1,
                        per_device_train_batch_size=batch_size, gradient_accumulation_steps=accumulation,
                        warmup_ratio=0.0, learning_rate=0.0, max_grad_norm=0.0, save_strategy="no", report_to=[],
                        disable_tqdm=True, train_sampling_strategy="sequential", **settings)
    kept = KeepGradients(draft)
    trainer = Eagle3Trainer(model=draft, args=args, target_model=target, train_dataset=samples,
                            data_collator=lambda b: collate(b, pad_token_id=0), callbacks=[kept])
    trainer.train()
    return kept.gradients, trainer.state.log_history[-1]["train_loss"]


@pytest.mark.parametrize("settings", [dict(ttt_steps=1), dict(ttt_steps=3, copy_loss_weight=2.0)],
                         ids=["one step", "three steps, copy-weighted"])
def test_accumulated_micro_batches_train_as_one_batch_holding_them(target, samples, tmp_path, settings):
    """4 × 2 and 8 × 1 over the same conversations in the same order give the same first gradient and loss: each
    step's loss is divided by its loss weight summed over the accumulated micro-batches (the mean of the two
    micro-batches' means gave gradients 1.17 apart, relatively)."""
    one_batch, one_loss = _first_gradients(target, samples, tmp_path, 8, 1, **settings)
    accumulated, accumulated_loss = _first_gradients(target, samples, tmp_path, 4, 2, **settings)
    torch.testing.assert_close(accumulated, one_batch, rtol=1e-5, atol=1e-7)
    assert accumulated_loss == pytest.approx(one_loss, rel=1e-5)


def test_without_accumulation_the_loss_and_its_gradients_are_the_batch_mean(target, samples, tmp_path):
    """One micro-batch: the counted totals are the batch's own, so loss and gradients equal the uncounted loss's
    (the batch's mean), bit for bit; the per-step losses logged stay the batch's own means."""
    draft = Eagle3DraftModel.from_target(target, draft_to_target=build_draft_vocabulary(samples, 32, 96))
    args = Eagle3Config(output_dir=str(tmp_path), ttt_steps=3, copy_loss_weight=1.0, report_to=[])
    trainer = Eagle3Trainer(model=draft, args=args, target_model=target, train_dataset=samples,
                            data_collator=lambda b: collate(b, pad_token_id=0))
    batch = collate(samples[:4], pad_token_id=0)
    _, totals = trainer.get_batch_samples(iter([batch]), 1, trainer.args.device)
    assert totals.shape == (3,)
    results = []
    for counted in (None, totals):
        draft.zero_grad()
        loss = trainer.compute_loss(draft, batch, num_items_in_batch=counted)
        loss.backward()
        results.append((loss.detach(), [p.grad.clone() for p in draft.parameters() if p.grad is not None],
                        [values[-1] for key, values in trainer.step_metrics.items() if key.startswith("loss_step")]))
    (loss, gradients, step_losses), (counted_loss, counted_gradients, counted_step_losses) = results
    assert torch.equal(counted_loss, loss) and step_losses == counted_step_losses
    assert all(torch.equal(a, b) for a, b in zip(counted_gradients, gradients))


def test_the_per_step_losses_stay_the_batch_means_whatever_it_is_divided_by(target, samples, tmp_path):
    draft = Eagle3DraftModel.from_target(target, draft_to_target=build_draft_vocabulary(samples, 32, 96))
    args = Eagle3Config(output_dir=str(tmp_path), ttt_steps=2, report_to=[])
    trainer = Eagle3Trainer(model=draft, args=args, target_model=target, train_dataset=samples,
                            data_collator=lambda b: collate(b, pad_token_id=0))
    batch = collate(samples[4:], pad_token_id=0)
    _, totals = trainer.get_batch_samples(iter([batch]), 1, trainer.args.device)
    own = trainer.compute_loss(draft, batch).detach()
    means = [trainer.step_metrics[f"loss_step{step}"][-1] for step in range(2)]
    doubled = trainer.compute_loss(draft, batch, num_items_in_batch=2 * totals).detach()
    torch.testing.assert_close(doubled, own / 2)  # half the weight of a batch twice its size
    assert [trainer.step_metrics[f"loss_step{step}"][-1] for step in range(2)] == means


def test_ppow_keeps_trainers_division_by_the_accumulation_steps(target, samples, tmp_path):
    """PPOW's trainer inherits Eagle3Trainer but computes its own loss, a micro-batch's mean over its windows: it gets
    no counted totals, so Trainer goes on dividing that loss by the accumulation steps."""
    draft = Eagle3DraftModel.from_target(target, draft_to_target=build_draft_vocabulary(samples, 32, 96))
    args = PPOWConfig(output_dir=str(tmp_path), window_size=3, num_generations=2, num_prefixes=2,
                      num_iterations=2, gradient_accumulation_steps=2, acceptance="greedy", report_to=[])
    trainer = PPOWTrainer(model=draft, args=args, target_model=target, train_dataset=samples,
                          data_collator=lambda b: collate(b, pad_token_id=0))
    batches = [collate(samples[:4], pad_token_id=0), collate(samples[4:], pad_token_id=0)]
    assert trainer.get_batch_samples(iter(batches), 2, trainer.args.device)[1] is None
    trainer.current_gradient_accumulation_steps = 2
    torch.manual_seed(0)
    loss = trainer.compute_loss(draft.train(), batches[0])
    trainer._micro_step = 2  # the next optimizer step's first micro-batch: the same rollout again (num_iterations)
    assert torch.equal(trainer.training_step(draft, batches[0]), loss.detach() / 2)
