"""Ops replayed from another stage graph of the run (backends/op_memo.py) give the graph building them gives:
every tensor, mapping, compute set, vertex group, field, program, op record and the op library's state."""

import numpy as np

from popvision_lite.emulator import Target
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.backends.emulator_backend import EmulatorBackend
from popvision_lite.emulator.backends.op_memo import OpMemo
from popvision_lite.emulator.graph import Concat, Field, Regions, TensorView
from popvision_lite.emulator.models.config import make_config
from popvision_lite.emulator.models.transformer import build_bert_stage
from tests.support.devices import ID as SMALL  # the shipped Mk2 cut to 92 tiles (decision 0395)

CFG = dict(layers=2, seq=128, vocab=1000)


def _stage(target, cfg, stage, memo=None):
    be = EmulatorBackend(target, cfg.precision, needs_values=False)
    be.op_memo = memo
    build_bert_stage(be, cfg, stage, 3)
    return be


def _arrays(f):
    """A field's or view's content: its kind, tensor and element runs."""
    s, n = f.runs()
    out = [type(f).__name__, f.tensor.id, np.asarray(s).tolist(), np.asarray(n).tolist()]
    if isinstance(f, Field):
        out.append(f.n)
    return out


def _program(p):
    out = [p.kind, p.name, p.op]
    if isinstance(p, P.Copy):
        out += [_arrays(p.src), _arrays(p.dst)]
    elif isinstance(p, P.Execute):
        out.append(p.cs.id)
    elif isinstance(p, P.Sequence):
        out += [[_program(c) for c in p.programs], [t.id for t in p.call_args]]
    return out


def _graph(be) -> dict:
    g, ctx = be.graph, be.ctx
    return dict(
        tensors=[(t.id, t.name, t.shape, t.dtype, t.kind, t.op, t.mapping.tile.tolist(), t.mapping.start.tolist(),
                  t.mapping.stop.tolist()) for t in g.tensors],
        cs=[(cs.id, cs.name, cs.op, [grp.id for grp in cs.groups]) for cs in g.compute_sets],
        groups=[(grp.id, grp.cs.id, grp.codelet.name, grp.tiles.tolist(),
                 {k: _arrays(f) for k, f in grp.fields.items()},
                 {k: np.asarray(v).tolist() for k, v in grp.params.items()}) for grp in g.groups],
        programs=[_program(p) for p in ctx.programs], records=ctx.records, op_info=g.op_info,
        counts=ctx._counts, used=sorted(ctx._used), rotation=ctx.rotation, marks=be.marks)


def test_replayed_stage_graph_is_the_built_one():
    """The middle stage graph built after the first with one memo (most of its layer replayed) and the last after
    the middle (every layer op replayed: the same stage input) are, object for object, the graphs built alone."""
    target = Target.from_device(SMALL, num_ipus=1)
    cfg = make_config("gpt2-small", **CFG)
    memo = OpMemo()
    _stage(target, cfg, 0, memo)
    assert memo.hits == 0 and memo.misses > 0
    middle = _stage(target, cfg, 1, memo)
    hits = memo.hits
    assert hits > 0
    assert _graph(middle) == _graph(_stage(target, cfg, 1))
    last = _stage(target, cfg, 2, memo)
    assert memo.hits - hits >= 20
    assert _graph(last) == _graph(_stage(target, cfg, 2))
    # a replay shares no object with the graph it was recorded in, only read-only arrays
    fields = [f for grp in last.graph.groups for f in grp.fields.values()]
    assert all(f.tensor.graph is last.graph for f in fields)
    regions = [f for f in fields if isinstance(f, Regions)]
    assert regions and not any(f.starts.flags.writeable for f in regions)


def test_an_op_whose_reads_differ_is_built():
    """An operand with another mapping, or the op library at another rotation, is no replay: the op is built."""
    target = Target.from_device(SMALL, num_ipus=1)
    memo = OpMemo()
    graphs = []
    for spread in (8, 8, 16, 8):
        be = EmulatorBackend(target, "fp16", needs_values=False)
        be.op_memo = memo
        x = be.input("x", np.zeros((64, 32)))
        be.graph.set_mapping(x, be.ctx.linear_mapping(64 * 32, grain=64 * 32 // spread))
        y = be.gelu(x, "act")
        graphs.append((be, y))
    assert (memo.hits, memo.misses) == (2, 2)  # the second and fourth replayed; the third (16 tiles) built
    assert graphs[1][1].mapping is graphs[0][1].mapping
    assert graphs[2][1].mapping is not graphs[0][1].mapping
    be = EmulatorBackend(target, "fp16", needs_values=False)
    be.op_memo = memo
    x = be.input("x", np.zeros((64, 32)))
    be.graph.set_mapping(x, graphs[0][0].graph.tensors[0].mapping)
    be.ctx.rotation = 2
    be.gelu(x, "act")
    assert memo.misses == 3


def test_an_operand_layout_the_op_does_not_read_is_no_miss():
    """A matmul reads its A operand's shape, not its layout or name: with A named and mapped otherwise it is
    replayed, and the graph is the one building it gives."""
    target = Target.from_device(SMALL, num_ipus=1)
    memo = OpMemo()
    built = []
    for name, spread, m in (("x", 8, memo), ("y", 16, memo), ("y", 16, None)):
        be = EmulatorBackend(target, "fp16", needs_values=False)
        be.op_memo = m
        x = be.input(name, np.zeros((64, 96)))
        be.graph.set_mapping(x, be.ctx.linear_mapping(64 * 96, grain=64 * 96 // spread))
        be.ctx.rotation = 0  # (where each spread left it: the op library's state is part of the key)
        w = be.weight("w", np.zeros((96, 48)))
        be.matmul(x, w, "mm")
        built.append(be)
    assert (memo.hits, memo.misses) == (1, 1)
    assert _graph(built[1]) == _graph(built[2])
    assert type(built[0].graph.tensors[0]) is type(built[0].graph.tensors[-1])  # the recording left no trace


def test_endpoints_are_copied_with_their_tensor():
    """Copy endpoints of every kind (views, fields, their Concat) are rebound to the replaying graph's tensors."""
    target = Target.from_device(SMALL, num_ipus=1)
    cfg = make_config("gpt2-small", **CFG)
    memo = OpMemo()
    _stage(target, cfg, 1, memo)
    be = _stage(target, cfg, 2, memo)
    kinds = set()
    for p in be.ctx.programs:
        if isinstance(p, P.Copy):
            for e in (p.src, p.dst):
                kinds.add(type(e).__name__)
                parts = e.parts if isinstance(e, Concat) else [e]
                assert all(q.tensor.graph is be.graph for q in parts)
                assert isinstance(e, Concat | Field | TensorView)
    assert {"TensorView", "Regions"} <= kinds
