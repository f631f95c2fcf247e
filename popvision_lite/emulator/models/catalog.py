"""The bundled workloads by family name, and ``build``, which builds one on a backend.

Each ``build_*`` function (``small.py``, ``transformer.py``, ``resnet.py``) creates its seeded inputs and
weights on the backend, runs the forward pass and (when ``cfg.training``) the backward pass and an SGD
update, and returns a ``Built`` of named result handles (loss gradient, outputs, updated weights) that
full-numerics runs compare against the numpy reference.
"""

from __future__ import annotations

from .building import Built
from .config import ModelConfig
from .resnet import build_resnet
from .small import build_conv, build_gnn, build_mlp
from .transformer import build_bert

BUILDERS = {"mlp": build_mlp, "bert": build_bert, "conv": build_conv, "gnn": build_gnn, "resnet": build_resnet}


def build(be, cfg: ModelConfig) -> Built:
    return BUILDERS[cfg.model](be, cfg)
