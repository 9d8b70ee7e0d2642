# Session 76: the lower bound of the TTT attention on this CPU: the causal block alone through sdpa (flash, is_causal), 5 steps fwd+bwd, bfloat16
import time, torch, torch.nn.functional as F
torch.manual_seed(0); torch.set_num_threads(2)
B,H,HKV,L,D=4,9,3,511,64
def run():
    q=torch.randn(B,H,L,D,dtype=torch.bfloat16,requires_grad=True)
    for k in range(5):
        K=torch.randn(B,HKV,L,D,dtype=torch.bfloat16,requires_grad=True); V=torch.randn_like(K,requires_grad=True)
        o=F.scaled_dot_product_attention(q,K,V,is_causal=True,enable_gqa=True); o.float().square().sum().backward()
run()
for r in range(3):
    t=time.perf_counter(); run(); print('causal-only lower bound',round(time.perf_counter()-t,3))
print(torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default._schema)
print(torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default._schema)
