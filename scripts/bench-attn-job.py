#!/usr/bin/env python3
"""PyTorch's side of scripts/bench-attn-job.sh: the whole attention job as a PyTorch user
writes it, in one process: import, read one record of ids (a JSON array on the first line
of IDS), torch.manual_seed(123) and nn.Embedding(50000, DIM); seeded again, W_query,
W_key and W_value by torch.rand for each head; embed, project, scaled_dot_product_attention
(causal), and write the (T, HEADS*D_V) result to stdout as one .npy stream.
Prints `compute WALL CPU` (seconds from the embedding table to the attention output, no
import, no output; CPU is the process's user+sys time over all threads) on stderr. Usage: bench-attn-job.py IDS DIM HEADS D_KQ D_V [THREADS]"""
import json
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

path = sys.argv[1]
dim, heads, d_kq, d_v = (int(a) for a in sys.argv[2:6])
torch.set_num_threads(int(sys.argv[6]) if len(sys.argv) > 6 else 2)
with open(path) as f:
    ids = json.loads(f.readline())
start, cpu = time.perf_counter(), time.process_time()
with torch.no_grad():
    torch.manual_seed(123)
    emb = nn.Embedding(50000, dim)
    torch.manual_seed(123)
    w = [(torch.rand(dim, d_kq), torch.rand(dim, d_kq), torch.rand(dim, d_v)) for _ in range(heads)]
    x = emb(torch.tensor(ids))
    q = torch.stack([x @ wq for wq, _, _ in w])[None]
    k = torch.stack([x @ wk for _, wk, _ in w])[None]
    v = torch.stack([x @ wv for _, _, wv in w])[None]
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    out = out[0].permute(1, 0, 2).reshape(len(ids), heads * d_v)
compute, cpu = time.perf_counter() - start, time.process_time() - cpu
np.save(sys.stdout.buffer, out.numpy())
print(f"compute {compute:.3f} {cpu:.3f}", file=sys.stderr)
