"""What recomputing the TTT loss's softmaxes costs and saves (``Eagle3Config.recompute_loss_softmax``):
one forward+backward of the training-time-test loss (5 steps) on the stage-12 drafter (12,288-token
head) over 2 held-out conversations cut at 256 tokens, in bfloat16 autocast as GPU training runs,
recomputed against kept, interleaved, median of 5 after one warm-up; and the bytes of the distinct
storages autograd keeps for the backward pass.

    python examples/eagle3_loss_memory.py
"""
import statistics, sys, time
import torch
import hf_adaptive_spec as hfas
from hf_adaptive_spec.drafters.eagle3 import Eagle3DraftModel
from hf_adaptive_spec.training.eagle3 import TargetFeatures, TTTBatch, ttt_loss, ttt_unroll, load_samples, collate
from hf_adaptive_spec.training.eagle3.ttt import soft_cross_entropy_sum
torch.set_num_threads(2)
model, tok = hfas.load_default_model()
draft = Eagle3DraftModel.from_pretrained("artifacts/eagle3-smollm2-stage12", target=model).float().train()
samples = load_samples(tok, "artifacts/eagle3_heldout_regenerated.jsonl", 256, 2)
batch = collate(samples, 0)
features = TargetFeatures(model, draft.config.aux_hidden_state_layer_ids, draft.draft_to_target())
with torch.no_grad():
    feats, target_logits = features(batch["input_ids"], batch["attention_mask"])
b = TTTBatch(batch["input_ids"], feats, target_logits, batch["loss_mask"])
def plain():
    total = 0.0
    for step, u in enumerate(ttt_unroll(draft, b, 5)):
        total = total + 0.8**step * soft_cross_entropy_sum(u.logits, u.target_logits, u.mask) / u.mask.sum().clamp(min=1.0)
    return total
def kept(fn):
    st = {}
    def pack(t):
        s = t.untyped_storage(); st[s.data_ptr()] = s.nbytes(); return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), torch.autocast("cpu", dtype=torch.bfloat16):
        out = fn()
    return out, sum(st.values())
runs = {"recomputed": lambda: ttt_loss(draft, b, steps=5, decay=0.8, recompute_softmax=True)[0], "kept": plain}
times = {k: [] for k in runs}
for i in range(6):
    for name, fn in runs.items():
        draft.zero_grad(); t = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = fn()
        loss.backward(); dt = time.perf_counter() - t
        if i: times[name].append(dt)
for name, fn in runs.items():
    _, k = kept(fn)
    print(f"{name}: median {statistics.median(times[name]):.3f} s per forward+backward, autograd keeps {k/1e6:.1f} MB", flush=True)
print("shape", tuple(b.input_ids.shape), "draft vocab", draft.config.draft_vocab_size)
