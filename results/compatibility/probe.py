"""Greedy identity and sampling of the engine on a tiny random model of one transformers family.

Usage: OUT=results/compatibility/out python results/compatibility/probe.py FAMILY   (env: POLICY=tree|wide|deep|chain,
PLEN prompt length, NEW new tokens, TAG suffix). For 3 prompts, float32 greedy: stock generate against the engine with
three drafters (the target itself, a smaller random model of the family, the target's first 2 layers), on the dynamic
cache and on cache_implementation="static"; then sampling runs (shape only). Writes OUT/FAMILY{TAG}.json.
Written by the session-47 audit (2026-11-30); summarize.py tables the results."""
import json, sys, time, traceback, os
import torch
torch.set_num_threads(1)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_adaptive_spec as hfas
from families import build, V

family = sys.argv[1]
NEW = int(os.environ.get("NEW", 40))
results = {"family": family, "cases": []}

def prompt(seed, length=None):
    length = length or PLEN
    g = torch.Generator().manual_seed(seed)
    return torch.randint(1, V, (1, length), generator=g)

def err(e):
    return f"{type(e).__name__}: {e}"

try:
    target, attn = build(family, 4, 0)
    hfas.enable(target)
    small, attn2 = build(family, 2, 1)
    results["attn"] = attn
except Exception as e:
    results["build_error"] = err(e)
    print(json.dumps(results)); sys.exit(0)

drafters = {"self": lambda: hfas.CausalLMDrafter(target), "small": lambda: hfas.CausalLMDrafter(small),
            "early": lambda: hfas.CausalLMDrafter.from_target_layers(target, 2)}
POL = os.environ.get("POLICY", "tree")
PLEN = int(os.environ.get("PLEN", 9))
SHAPE = {"tree": (3, 3, 8), "wide": (2, 8, 16), "deep": (7, 2, 15), "chain": (4, 1, 4)}[POL]
policy = lambda: hfas.StaticTreePolicy(depth=SHAPE[0], top_k=SHAPE[1], total_tokens=SHAPE[2])
TAG = os.environ.get("TAG", "")
for pseed in (11, 22, 33):
    ids = prompt(pseed)
    try:
        with torch.no_grad():
            ref = target.generate(ids, max_new_tokens=NEW, do_sample=False)
    except Exception as e:
        results["cases"].append(dict(prompt=pseed, mode="stock", result="error", error=err(e)))
        continue
    ref_static = None
    try:
        ref_static = target.generate(ids, max_new_tokens=NEW, do_sample=False, cache_implementation="static")
        results["cases"].append(dict(prompt=pseed, mode="stock-static-vs-stock", result="identical" if torch.equal(ref_static, ref) else "differs"))
    except Exception as e:
        results["cases"].append(dict(prompt=pseed, mode="stock-static", result="error", error=err(e)))
    for mode in ("dynamic", "static"):
        for dname, mk in drafters.items():
            case = dict(prompt=pseed, mode=mode, drafter=dname)
            kw = dict(cache_implementation="static") if mode == "static" else {}
            t = time.time()
            try:
                out = target.generate(ids, max_new_tokens=NEW, do_sample=False, assistant_model=mk(), assistant_policy=policy(),
                                      return_dict_in_generate=True, **kw)
                seq = out.sequences
                case["tau"] = round(out.speculation.mean_accepted_tokens, 2)
                if seq.shape == ref.shape and torch.equal(seq, ref):
                    case["result"] = "identical"
                else:
                    n = min(seq.shape[1], ref.shape[1])
                    diff = (seq[0, :n] != ref[0, :n]).nonzero()
                    first = int(diff[0]) - ids.shape[1] if len(diff) else n - ids.shape[1]
                    case["result"] = "differs"
                    case["first_diff_new_pos"] = first
                    case["shapes"] = [list(seq.shape), list(ref.shape)]
                    if ref_static is not None and mode == "static":
                        case["matches_stock_static"] = bool(seq.shape == ref_static.shape and torch.equal(seq, ref_static))
            except Exception as e:
                case["result"] = "error"
                case["error"] = err(e)
                case["where"] = traceback.format_exc().strip().splitlines()[-3:]
            case["s"] = round(time.time() - t, 2)
            results["cases"].append(case)
# sampling
for mode in ("dynamic", "static"):
    for dname, mk in drafters.items():
        case = dict(mode="sample-" + mode, drafter=dname)
        kw = dict(cache_implementation="static") if mode == "static" else {}
        try:
            torch.manual_seed(5)
            out = target.generate(prompt(44), max_new_tokens=NEW, do_sample=True, temperature=0.9, top_k=0,
                                  assistant_model=mk(), assistant_policy=policy(), **kw)
            case["result"] = "ok" if tuple(out.shape) == (1, PLEN + NEW) else f"shape {tuple(out.shape)}"
        except Exception as e:
            case["result"] = "error"; case["error"] = err(e)
        results["cases"].append(case)
OUT = os.environ.get("OUT", os.path.join(os.path.dirname(os.path.abspath(__file__)), "out"))
os.makedirs(OUT, exist_ok=True)
results["family"] = family + TAG
json.dump(results, open(os.path.join(OUT, f"{family}{TAG}.json"), "w"), indent=1)
print(json.dumps(results))
