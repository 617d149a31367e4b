#!/usr/bin/env python3
"""PyTorch's side of scripts/bench-attn.sh: times F.scaled_dot_product_attention on CPU
(fp32, batch 1, HEADS heads of D, 2 threads) and prints
`torch T heads d mode data path seconds GFLOP/s` in the same form as attn's `attn-bench`
example. DATA: `uniform` (Q, K, V uniform in (-1, 1)) or `seed` (N(0, 1) embeddings of
width 512 projected by uniform [0, 1) weights: scores in the tens, most softmax weights
zero). Usage: bench-attn.py T HEADS D causal|full [REPEATS [DATA]]"""
import sys
import time

import torch
import torch.nn.functional as F

torch.set_num_threads(2)
t, heads, d, mode = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
repeats = int(sys.argv[5]) if len(sys.argv) > 5 else 3
data = sys.argv[6] if len(sys.argv) > 6 else "uniform"
causal = mode == "causal"
g = torch.Generator().manual_seed(0)
if data == "seed":
    x = torch.randn(t, 512, generator=g)
    q, k, v = ((x @ torch.rand(512, heads * d, generator=g)).reshape(t, heads, d).transpose(0, 1)[None].contiguous() for _ in range(3))
else:
    q, k, v = (torch.rand(1, heads, t, d, generator=g) * 2 - 1 for _ in range(3))
best = float("inf")
with torch.no_grad():
    for _ in range(repeats):
        start = time.perf_counter()
        F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        best = min(best, time.perf_counter() - start)
pairs = t * (t + 1) / 2 if causal else t * t
print(f"torch {t} {heads} {d} {mode} {data} sdpa {best:.4f} {4 * pairs * d * heads / best / 1e9:.1f}")
