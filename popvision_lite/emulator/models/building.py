"""What every model builder shares: the stage of a layer, the results a build returns and the seeded
values it draws (timing-only and planning backends get zeros without drawing).  Below both
``transformer`` (BERT, GPT), ``small`` (MLP, conv, GNN) and ``resnet``, which import it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


def stage_of(layer: int, layers: int, ipus: int) -> int:
    return min(ipus - 1, layer * ipus // max(1, layers))


@dataclass
class Built:
    results: dict = field(default_factory=dict)  # name -> handle to compare


def _init(rng, shape, fan_in):
    import numpy as np  # (numpy is imported in the functions of this module: a run config's checks need none)

    return (rng.standard_normal(shape) / math.sqrt(fan_in)).astype(np.float32)


class _Values:
    """Seeded values for a backend; backends that need no data (timing-only, planning) get zeros
    without drawing (same shapes, no cost).  Index data (ids, graphs) uses its own generator so
    it is identical in every mode."""

    def __init__(self, be, seed):
        import numpy as np

        self.rng = np.random.default_rng(seed)
        self.on = getattr(be, "needs_values", True)

    def init(self, shape, fan_in):
        import numpy as np

        return _init(self.rng, shape, fan_in) if self.on else np.broadcast_to(np.float32(0), shape)

    def normal(self, shape, scale=1.0):
        import numpy as np

        if not self.on:
            return np.broadcast_to(np.float32(0), shape)
        return (self.rng.standard_normal(shape) * scale).astype(np.float32)

    def const(self, shape, value):
        import numpy as np

        return np.broadcast_to(np.float32(value), shape)
