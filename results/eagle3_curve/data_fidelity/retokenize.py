"""Does an answer's text re-encode to the tokens the target generated? The committed training files hold text
(regeneration decodes each answer with skip_special_tokens=True), and training re-encodes it with the chat template.

Usage: python results/eagle3_curve/data_fidelity/retokenize.py N MAX_NEW_TOKENS
Greedy float32 answers of the SmolLM2 target to the first user turns of N training conversations (records 2000.. of
artifacts/sharegpt_smollm2_target14.jsonl), each decoded, re-encoded as training does and compared token by token.
"""

import difflib
import json
import sys

import torch

import hf_adaptive_spec as hfas
from hf_adaptive_spec.training.eagle3.data import tokenize_conversation

torch.set_num_threads(1)
model, tok = hfas.load_default_model()
n, max_new = int(sys.argv[1]), int(sys.argv[2])
with open("artifacts/sharegpt_smollm2_target14.jsonl", encoding="utf-8") as handle:
    records = [json.loads(line) for line in handle][2000 : 2000 + n]
eos = {tok.eos_token_id, tok.convert_tokens_to_ids("<|im_end|>")}
differ = tokens = differing = 0
for record in records:
    messages = record["conversation"][:1]
    ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)["input_ids"]
    out = model.generate(ids, max_new_tokens=max_new, do_sample=False)[0, ids.shape[1] :].tolist()
    generated = out[: next((i for i, t in enumerate(out) if t in eos), len(out))]
    text = tok.decode(generated, skip_special_tokens=True)
    sample = tokenize_conversation(tok, messages + [{"role": "assistant", "content": text}], 4096)
    answer = [t for t, m in zip(sample["input_ids"], sample["loss_mask"]) if m]
    answer = answer[: next((i for i, t in enumerate(answer) if t in eos), len(answer))]
    tokens += len(generated)
    if answer != generated:
        differ += 1
        spans = difflib.SequenceMatcher(None, generated, answer, autojunk=False).get_opcodes()
        differing += sum(max(i2 - i1, j2 - j1) for op, i1, i2, j1, j2 in spans if op != "equal")
        k = next((i for i, (a, b) in enumerate(zip(answer, generated)) if a != b), min(len(answer), len(generated)))
        print(f"{record['id']}: differs at {k}/{len(generated)}: generated {tok.convert_ids_to_tokens(generated[k:k + 4])} "
              f"re-encoded {tok.convert_ids_to_tokens(answer[k:k + 4])}", flush=True)
print(f"answers {len(records)}, differ {differ} ({differ / len(records):.1%}); tokens {tokens}, "
      f"tokens in differing spans {differing} ({differing / max(tokens, 1):.1%})")
