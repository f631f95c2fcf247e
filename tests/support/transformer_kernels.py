"""A two-layer transformer's GPU pass as the emulator names its ops (split GEMMs and a norm per layer, the
embedding gather), annotated for tensor parallelism: for the GPU-placement and GPU-validation tests."""

from __future__ import annotations

import pandas as pd

from popvision_lite.analysis import tensor_parallel as tp


def two_layer_kernels(rows: int = 512, hidden: int = 256, ffn: int = 1024, heads: int = 4,
                      embedding: bool = True) -> tuple[pd.DataFrame, dict]:
    """(annotated kernels of one sample's pass, the model config they belong to)."""
    k = []
    for _layer in range(2):
        k.append(dict(name="ipu0/layer/ffn/matmul1", type="matmul", precision="fp16", flops=2.0 * rows * hidden * ffn,
                      min_bytes=2.0 * (rows * hidden + hidden * ffn + rows * ffn)))
        k.append(dict(name="ipu0/layer/ffn/layer_norm", type="layer_norm", precision="fp16", flops=5.0 * rows * hidden,
                      min_bytes=4.0 * rows * hidden))
    if embedding:
        k.append(dict(name="ipu0/embedding/gather", type="embedding", precision="fp16", flops=0.0,
                      min_bytes=2.0 * rows * hidden))
    cfg = dict(model="gpt", hidden=hidden, heads=heads, ffn=ffn, layers=2, seq=rows, vocab=1000, batch=1)
    return tp.annotate(pd.DataFrame(k), cfg), cfg
