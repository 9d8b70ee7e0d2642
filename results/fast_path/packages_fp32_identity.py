"""SmolLM2 float32 through ahead-of-time packages (built in this run) against stock greedy generate: 4 prompts, 96 tokens, EAGLE-3 + lookup 2/4/8."""
import torch, hf_adaptive_spec as hfas
torch.set_num_threads(2)
model, tok = hfas.load_default_model(dtype=torch.float32)
hfas.enable(model)
drafter = hfas.Eagle3Drafter.from_pretrained(hfas.shipped_checkpoint("eagle3"), target=model)
cc = hfas.fast_path_compile_config(model.device)
same = 0
texts = ["Hi!", "Explain photosynthesis to a child in three sentences.", "Write a Python function that reverses a linked list.", "What is 17 * 23? Think step by step."]
for text in texts:
    ids = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, return_tensors="pt", return_dict=True)["input_ids"]
    ref = model.generate(ids, max_new_tokens=96, do_sample=False)
    out = model.generate(ids, max_new_tokens=96, do_sample=False, assistant_model=drafter, assistant_policy=hfas.StaticTreePolicy(2, 4, 8),
                         prompt_lookup_num_tokens=4, cache_implementation="static", compile_config=cc, return_dict_in_generate=True)
    same += torch.equal(out.sequences, ref)
    print(text[:30], torch.equal(out.sequences, ref), out.speculation.packaged, round(out.speculation.compile_time, 1), round(out.speculation.mean_accepted_tokens, 2), flush=True)
print(f"fp32 identical {same}/{len(texts)}")
