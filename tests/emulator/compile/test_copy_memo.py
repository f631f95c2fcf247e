"""The whole-graph compile replays the effects of a copy whose structure it has compiled before
(the same op in another layer, possibly on tiles rotated by an even count): the result must be
exactly what compiling every copy afresh gives."""

import numpy as np

import popvision_lite.emulator.compile as C
import popvision_lite.emulator.compile.copies as CO
import popvision_lite.emulator.compile.copy_memo as S
from popvision_lite.emulator import Graph, Target, TensorView
from popvision_lite.emulator import mapping as M
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.models.config import make_config
from popvision_lite.emulator.models.emulated import build_model


def test_copy_memo_matches_fresh_compile(monkeypatch):
    be, _ = build_model(make_config("bert-tiny", training=False, layers=2), "ipu-mk2", needs_values=False)
    memo, plain, n_memo, n_plain = _compile_both(monkeypatch, be.graph, be.program())
    assert n_memo < n_plain  # the second layer's copies were replayed
    _assert_same(memo, plain)

def _compile_both(monkeypatch, graph, prog):
    fresh = []
    orig = CO._compile_copy_fresh
    monkeypatch.setattr(CO, "_compile_copy_fresh", lambda c, info: (fresh.append(1), orig(c, info))[1])
    memo = C.compile_graph(graph, prog)
    n_memo = len(fresh)
    counter = iter(range(10**9))
    monkeypatch.setattr(CO, "_copy_structure_key", lambda c, p: (str(next(counter)).encode(), 0))
    plain = C.compile_graph(graph, prog)
    return memo, plain, n_memo, len(fresh) - n_memo


def _assert_same(memo, plain):
    assert np.array_equal(memo.memory, plain.memory)
    assert len(memo.templates) == len(plain.templates)
    for a, b in zip(memo.templates, plain.templates, strict=True):
        for f in ("kind", "duration", "ipu", "busy_max", "busy_sum", "in_sum", "out_sum", "tiles_active",
                  "bytes_exchange", "bytes_sram", "bytes_ipu_link"):
            assert getattr(a, f) == getattr(b, f), f
        for f in ("tiles", "cycles", "bytes_in", "bytes_out"):
            x, y = getattr(a, f), getattr(b, f)
            assert (x is None and y is None) or np.array_equal(x, y), f
    assert [i.code_bytes for i in memo.progs] == [i.code_bytes for i in plain.progs]
    assert np.array_equal(memo.tile_need, plain.tile_need)


def test_copy_memo_on_rotated_tiles(monkeypatch):
    """A broadcast copy (multicast pieces, shared-bus pairs) placed at several tile offsets, one of
    them wrapping past the last tile: replayed on rotated tiles it equals the fresh compile."""
    target = Target.from_device("ipu-mk2", num_ipus=1)
    T = target.num_tiles
    g = Graph(target)
    progs = []
    n_src, reps = 8 * 40, 8
    n_dst = n_src * reps
    for i, r in enumerate((0, 100, T - 20, 7, 100)):
        x = g.add_variable(f"x{i}", (n_src,), "float16", mapping=M.linear(n_src, (np.arange(8) + r) % T))
        y = g.add_variable(f"y{i}", (n_dst,), "float16", mapping=M.linear(n_dst, (np.arange(64) + r) % T))
        bcast = np.tile(np.arange(n_src), reps)
        progs.append(P.Copy(TensorView(x, bcast, (n_dst,)), y))
        progs.append(P.Copy(TensorView(y, np.arange(n_src)[::-1].copy(), (n_src,)), x))
    memo, plain, n_memo, n_plain = _compile_both(monkeypatch, g, P.Sequence(progs))
    assert n_plain == len(progs) and n_memo < n_plain
    _assert_same(memo, plain)


def _broadcast_graph(target, pairs):
    """A broadcast copy and its reverse gather per (source vertices / 8, tile offset) in ``pairs``."""
    T = target.num_tiles
    g = Graph(target)
    progs = []
    reps = 8
    for i, (rows, r) in enumerate(pairs):
        n_src = 8 * rows
        n_dst = n_src * reps
        x = g.add_variable(f"x{i}", (n_src,), "float16", mapping=M.linear(n_src, (np.arange(8) + r) % T))
        y = g.add_variable(f"y{i}", (n_dst,), "float16", mapping=M.linear(n_dst, (np.arange(64) + r) % T))
        progs.append(P.Copy(TensorView(x, np.tile(np.arange(n_src), reps), (n_dst,)), y))
        progs.append(P.Copy(TensorView(y, np.arange(n_src)[::-1].copy(), (n_src,)), x))
    return g, P.Sequence(progs)


def test_copy_memo_shared_across_graphs(monkeypatch):
    """A CopyMemo shared by the graphs of one copy cost key (the stage graphs of pipelined runs): a later
    graph replays the copies an earlier one compiled, on the same tiles or on tiles rotated by an even count
    (only their effects and outlining signature are kept, never their pieces: the signature moves with the
    tiles), compiles the others afresh, and its result (memory, steps, code, outlined copies) equals
    compiling it alone."""
    target = Target.from_device("ipu-mk2", num_ipus=1)
    fresh = []
    orig = CO._compile_copy_fresh
    monkeypatch.setattr(CO, "_compile_copy_fresh", lambda c, info: (fresh.append(1), orig(c, info))[1])
    g1, p1 = _broadcast_graph(target, ((40, 0), (48, 0)))
    g2, p2 = _broadcast_graph(target, ((40, 0), (48, 0), (56, 0), (40, 100), (48, 0)))
    alone = C.compile_graph(g2, p2, outline=True)
    assert len(fresh) == 6  # three structures, two copies each; the rotated and repeated pairs replay
    memo = S.CopyMemo()
    C.compile_graph(g1, p1, outline=True, copy_memo=memo)
    assert all(isinstance(v[0], S.CopySignature) for v in memo.copies.values())  # no plan kept
    before = len(fresh)
    shared = C.compile_graph(g2, p2, outline=True, copy_memo=memo)
    assert len(fresh) - before == 2  # the 56-row pair; the rotated 40-row pair replays g1's
    _assert_same(shared, alone)
    assert shared.outlined_copies == alone.outlined_copies > 0
    assert len(memo.copies) == 6
    memo.keep_used()  # the entries the graphs since the last call used: all six
    assert len(memo.copies) == 6
    bow = Target.from_device("ipu-bow", num_ipus=1)  # another device of equal copy costs: the memo is used
    g3, p3 = _broadcast_graph(bow, ((48, 0),))
    before = len(fresh)
    C.compile_graph(g3, p3, outline=True, copy_memo=memo)
    assert len(fresh) - before == 0
    memo.keep_used()
    assert len(memo.copies) == 2  # one run's entries kept, not every run's
    memo.keep_used()  # a run that compiled nothing (its stage graphs all cached) keeps them for the next run
    assert len(memo.copies) == 2
    two = Target.from_device("ipu-mk2", num_ipus=2)  # another copy cost key: the memo is not used
    g4, p4 = _broadcast_graph(two, ((48, 0),))
    C.compile_graph(g4, p4, outline=True, copy_memo=memo)
    assert len(fresh) - before == 2


def test_digest_narrowing_keeps_dtype_and_values_apart():
    """The structure-key digest hashes ints in the narrowest width that holds them, yet equal keys still
    mean equal dtype, shape and values."""
    from popvision_lite.emulator.compile.compiled import digest

    small = np.array([0, 5, -3, 32767], np.int64)
    assert digest(small) == digest(small.copy())
    assert digest(small) != digest(small.astype(np.int32))  # same values, another dtype
    assert digest(small) != digest(small.astype(np.int16))
    wide = small.copy()
    wide[3] = 32768  # needs int32: hashed at another width, and another value
    assert digest(small) != digest(wide)
    assert digest(wide) != digest(np.array([0, 5, -3, 32768 + 2**32], np.int64))  # needs all 64 bits
    assert digest(small, small) != digest(np.concatenate([small, small]))  # shapes are part of the key


def test_carried_copies_replay_the_previous_graphs_exchanges(monkeypatch):
    """A whole graph (outline off) replays the copies the previous whole graph compiled, also on another
    device whose copy constants are equal (the Bow IPU and the Mk2 on one IPU), with the result of compiling
    it alone; afterwards only the entries that compile used are kept."""
    fresh = []
    orig = CO._compile_copy_fresh
    monkeypatch.setattr(CO, "_compile_copy_fresh", lambda c, info: (fresh.append(1), orig(c, info))[1])
    mk2, bow = Target.from_device("ipu-mk2", num_ipus=1), Target.from_device("ipu-bow", num_ipus=1)
    assert S.copy_cost_key(mk2) == S.copy_cost_key(bow) and mk2.em != bow.em
    g_bow, p_bow = _broadcast_graph(bow, ((40, 0), (48, 0), (56, 0), (40, 100)))
    alone = C.compile_graph(g_bow, p_bow)
    assert len(fresh) == 6  # three structures; the rotated pair replays within the graph
    before = len(fresh)
    C.compile_graph(*_broadcast_graph(bow, ((40, 0), (48, 0), (56, 0), (40, 100))))
    assert len(fresh) - before == 6  # without a CarriedCopies nothing outlives a compile
    carry = C.CarriedCopies()
    g1, p1 = _broadcast_graph(mk2, ((40, 0), (48, 0)))
    C.compile_graph(g1, p1, copy_memo=carry)
    before = len(fresh)
    g2, p2 = _broadcast_graph(bow, ((40, 0), (48, 0), (56, 0), (40, 100)))
    carried = C.compile_graph(g2, p2, copy_memo=carry)
    assert len(fresh) - before == 2  # only the 56-row pair is new
    _assert_same(carried, alone)
    assert len(carry.copies) == 6  # the entries this graph used (its six structures)
    g3, p3 = _broadcast_graph(mk2, ((24, 0),))
    C.compile_graph(g3, p3, copy_memo=carry)
    assert len(carry.copies) == 2  # one graph's entries kept, not every graph's
    two = Target.from_device("ipu-mk2", num_ipus=2)  # another copy cost key: nothing carried over
    assert S.copy_cost_key(two) != S.copy_cost_key(mk2)
    g4, p4 = _broadcast_graph(two, ((24, 0),))
    before = len(fresh)
    C.compile_graph(g4, p4, copy_memo=carry)
    assert len(fresh) - before == 2
    assert vars(carried.caches) == vars(C.CompileCaches())  # a compiled graph keeps none of its caches


class _Reads(dict):
    """Emulator constants that record the keys read while ``on`` is set."""

    def __init__(self, d):
        super().__init__(d)
        self.on = False
        self.read: set = set()

    def __getitem__(self, k):
        if self.on:
            self.read.add(k)
        return super().__getitem__(k)

    def get(self, k, default=None):
        if self.on:
            self.read.add(k)
        return super().get(k, default)


def test_copy_compile_reads_only_the_constants_of_its_cost_key(monkeypatch):
    """The carried copies are keyed by copy_cost_key: compiling copies (within an IPU, and between IPUs
    with multicast over the IPU-Links) must read no other emulator constant of the target."""
    import popvision_lite.emulator.compile as CP

    orig = CP.compile_copy

    def watched(c, info):
        c.target.em.on = True
        try:
            orig(c, info)
        finally:
            c.target.em.on = False

    monkeypatch.setattr(CP, "compile_copy", watched)
    for ipus, keys in ((1, S.COPY_EM_KEYS), (2, S.COPY_EM_KEYS + S.COPY_EM_KEYS_MULTI_IPU)):
        target = Target.from_device("ipu-mk2", num_ipus=ipus)
        target.em = _Reads(target.em)
        g, p = _broadcast_graph(target, ((40, 0), (48, target.tiles_per_ipu - 4)))  # (2 IPUs: across both)
        c = C.compile_graph(g, p)
        assert target.em.read and target.em.read <= set(keys), target.em.read - set(keys)
        assert any(t.kind == C.K_XG for t in c.templates) == (ipus == 2)  # a global exchange on two IPUs
