# Session 76: the TTT attention as the trainer runs it (transformers sdpa_attention_forward over ttt_attention_mask) against one causal block + k diagonal scores (a split function, not kept); agreement, then 3 rounds fwd+bwd of 5 steps, bfloat16, 4 x 511 tokens.
# The split function was not built into the trainer (about 2% of a step); it is defined here.
# python results/eagle3_curve/step_profile/full_data/ttt_attention_split_check.py
import time, torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

def split_ttt_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """One causal [L, L] block over step 0's keys plus the k diagonal (ancestor) scores, one float32 softmax."""
    batch, heads, length, dim = query.shape
    kv_heads, steps = key.shape[1], key.shape[2] // length - 1
    grouped = query.view(batch, kv_heads, heads // kv_heads, length, dim)
    scores = (grouped @ key[:, :, None, :length].transpose(-1, -2)) * scaling
    scores = scores.masked_fill(~torch.ones(length, length, dtype=torch.bool).tril(), float("-inf"))
    ancestor_keys = key[:, :, length:].unflatten(2, (steps, length))
    ancestor_values = value[:, :, length:].unflatten(2, (steps, length))
    ancestor_scores = torch.einsum("bhgld,bhkld->bhglk", grouped, ancestor_keys) * scaling
    probs = torch.softmax(torch.cat([scores, ancestor_scores], dim=-1).float(), dim=-1).to(query.dtype)
    out = probs[..., :length] @ value[:, :, None, :length]
    out = out + torch.einsum("bhglk,bhkld->bhgld", probs[..., length:], ancestor_values)
    return out.reshape(batch, heads, length, dim).transpose(1, 2).contiguous(), None
from hf_adaptive_spec.training.eagle3.ttt import ttt_attention_mask
torch.manual_seed(0); torch.set_num_threads(2)
class M(torch.nn.Module):
    num_key_value_groups=3; is_causal=True
m=M()
B,H,HKV,L,D=4,9,3,511,64
for dt,tol in [(torch.float32,1e-5),(torch.bfloat16,2e-2)]:
    q=torch.randn(B,H,L,D,dtype=dt)
    for k in range(4):
        K=torch.randn(B,HKV,(k+1)*L,D,dtype=dt); V=torch.randn_like(K)
        mask=ttt_attention_mask(L,k,dt,q.device)
        a,_=sdpa_attention_forward(m,q,K,V,mask,scaling=D**-0.5)
        b,_=split_ttt_attention(m,q,K,V,mask,scaling=D**-0.5)
        print(dt,k,a.shape,b.shape,(a.float()-b.float()).abs().max().item())
def run(fn):
    q=torch.randn(B,H,L,D,dtype=torch.bfloat16,requires_grad=True)
    for k in range(5):
        K=torch.randn(B,HKV,(k+1)*L,D,dtype=torch.bfloat16,requires_grad=True); V=torch.randn_like(K,requires_grad=True)
        o,_=fn(m,q,K,V,ttt_attention_mask(L,k,torch.bfloat16,q.device),scaling=D**-0.5); o.float().square().sum().backward()
run(sdpa_attention_forward); run(split_ttt_attention)
for r in range(3):
    for name,fn in [('dense',sdpa_attention_forward),('split',split_ttt_attention)]:
        t=time.perf_counter(); run(fn); print(r,name,round(time.perf_counter()-t,3),flush=True)
