# The TTT attention of one microbatch at stage 18 recipe shape (4 x 511 tokens, 9 query / 3 key-value heads, 5 steps,
# bfloat16, forward + backward): dense over [L, (k+1)L] keys with an additive mask (as the trainer runs it) against
# one causal block plus the k diagonal scores; flex attention checked for agreement only (no CPU backward in torch
# 2.13). Session 75: python results/eagle3_curve/step_profile/full_data/ttt_attention_micro.py
import time, torch, torch.nn.functional as F
from torch.nn.attention.flex_attention import flex_attention, create_block_mask
torch.manual_seed(0); torch.set_num_threads(2)
B,H,HKV,L,D=4,9,3,511,64
dt=torch.bfloat16
def mask_add(L,k,dtype):
    allowed=[torch.ones(L,L,dtype=torch.bool).tril()]+[torch.eye(L,dtype=torch.bool)]*k
    m=torch.zeros(L,(k+1)*L,dtype=dtype); return m.masked_fill_(~torch.cat(allowed,1),torch.finfo(dtype).min)[None,None]
def dense(q,K,V,k):
    Kr=K.repeat_interleave(H//HKV,1); Vr=V.repeat_interleave(H//HKV,1)
    return F.sdpa(q,Kr,Vr,attn_mask=mask_add(L,k,q.dtype)) if hasattr(F,'sdpa') else F.scaled_dot_product_attention(q,Kr,Vr,attn_mask=mask_add(L,k,q.dtype))
def manual(q,K,V,k):
    Kr=K.repeat_interleave(H//HKV,1); Vr=V.repeat_interleave(H//HKV,1)
    s=D**-0.5
    k0,v0=Kr[:,:,:L],Vr[:,:,:L]
    sc=(q@k0.transpose(-1,-2))*s
    sc=sc.masked_fill(~torch.ones(L,L,dtype=torch.bool).tril(),float('-inf'))
    if k:
        kd=Kr[:,:,L:].unflatten(2,(k,L)); vd=Vr[:,:,L:].unflatten(2,(k,L))  # B,H,k,L,D
        sd=(q[:,:,None]*kd).sum(-1).permute(0,1,3,2)*s  # B,H,L,k
        sc=torch.cat([sc,sd],-1)
    p=torch.softmax(sc.float(),-1).to(q.dtype)
    out=p[...,:L]@v0
    if k: out=out+(p[...,L:].permute(0,1,3,2)[...,None]*vd).sum(2)
    return out
fl=torch.compile(flex_attention)
masks={}
def flex(q,K,V,k):
    if k not in masks:
        def mm(b,h,qi,kv): return torch.where(kv<L, kv<=qi, (kv%L)==qi)
        masks[k]=create_block_mask(mm,None,None,L,(k+1)*L,device='cpu')
    return fl(q,K,V,block_mask=masks[k],enable_gqa=True)
def run(fn):
    tot=0
    q=torch.randn(B,H,L,D,dtype=dt,requires_grad=True)
    for k in range(5):
        K=torch.randn(B,HKV,(k+1)*L,D,dtype=dt,requires_grad=True); V=torch.randn_like(K,requires_grad=True)
        o=fn(q,K,V,k); o.float().square().sum().backward()
    return q.grad
# correctness
torch.manual_seed(1); q=torch.randn(B,H,L,D,dtype=torch.float32); K=torch.randn(B,HKV,3*L,D); V=torch.randn_like(K)
ref=dense(q,K,V,2); print('manual err',(manual(q,K,V,2)-ref).abs().max().item(),'flex err',(flex(q,K,V,2)-ref).abs().max().item())
for name,fn in [('dense',dense),('manual',manual)]:
    run(fn)
for r in range(3):
    for name,fn in [('dense',dense),('manual',manual)]:
        t=time.perf_counter(); run(fn); print(r,name,round(time.perf_counter()-t,3),flush=True)
