"""The repeated blocks of an imported graph (transformer layers, ResNet stages' blocks): modules whose node
names (TorchScript exporter) or ``pkg.torch.onnx.name_scopes`` metadata (torch.export) end in a layer number."""

from __future__ import annotations

import re

_BLOCK = re.compile(r"^(.*?(?:^|[/.])(?:layers?|blocks?|h|stages?|encoder\.layer|decoder\.layer)[./_](\d+))(?=[/.]|$)")


def block_key(node) -> str | None:
    """The repeated module a node belongs to (``.../layer.3``, ``.../blocks.0``), from its name or, for
    torch.export's generic node names, its ``pkg.torch.onnx.name_scopes`` metadata; None outside one."""
    texts = [node.name.lstrip("/")]
    for p in node.metadata_props:
        if "name_scopes" in p.key:  # a list of scopes, outermost first, the node's own name last:
            # "['', 'm', 'm.layers', 'm.layers.0', 'm.layers.0.mlp', 'linear_3']"; the deepest scope that names a
            # layer holds the layer's name
            texts += reversed(p.value.strip("[]").replace("'", "").replace(" ", "").split(","))
    for t in texts:
        m = _BLOCK.match(t)
        if m:
            return m.group(1)
    return None


def find_blocks(nodes) -> list[tuple[int, int]]:
    """Recomputation blocks: for every repeated module (a name ending in a layer number, two numbers or more
    with the same stem), the node range from its first node to its last; ranges that overlap are dropped."""
    first, last = {}, {}
    for i, n in enumerate(nodes):
        k = block_key(n)
        if k is not None:
            first.setdefault(k, i)
            last[k] = i
    stems: dict = {}
    for k in first:
        stems.setdefault(re.sub(r"\d+$", "", k), []).append(k)
    keys = [k for ks in stems.values() if len(ks) >= 2 for k in ks]
    ranges = sorted((first[k], last[k] + 1) for k in keys)
    out = []
    for r in ranges:
        if out and r[0] < out[-1][1]:
            if r[1] <= out[-1][1]:
                continue  # nested (a block inside a block): keep the outer one
            return []  # interleaved blocks: no clean checkpoints
        out.append(r)
    return out
