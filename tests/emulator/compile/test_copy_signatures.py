"""Outlining signs a broadcast copy in its compact form (copy_memo.broadcast_signature, decision 0441) without
expanding it: two compact copies get equal signatures exactly when their expanded pieces get equal ones
(plan_signature of copy_broadcasts.expand), however the compact forms number, split or place their blocks."""

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

import popvision_lite.emulator.compile.copy_broadcasts as CB
from popvision_lite.emulator import Target
from popvision_lite.emulator.compile.copy_memo import broadcast_signature, plan_signature
from tests.emulator.compile.test_copy_broadcasts import _graph


def _blocks(bp, order):
    """``bp`` with its blocks renumbered: new block i is old block order[i] (the same expanded pieces)."""
    idx = np.concatenate([np.arange(bp.first[b], bp.first[b] + bp.count[b]) for b in order])
    count = bp.count[order]
    new = np.empty(len(order), np.int64)
    new[order] = np.arange(len(order))
    return replace(bp, se=bp.se[idx], ln=bp.ln[idx], st=bp.st[idx], sk=bp.sk[idx],
                   blk=np.repeat(np.arange(len(order)), count), off=bp.off[idx],
                   first=np.cumsum(count) - count, count=count, rep=new[bp.rep])


def _split(bp):
    """``bp`` with a block taken by several vertices split in two identical blocks (the same expanded pieces)."""
    b = int(np.nonzero(np.bincount(bp.rep) > 1)[0][0])
    s = slice(bp.first[b], bp.first[b] + bp.count[b])
    nb = len(bp.count)
    rep = bp.rep.copy()
    rep[np.nonzero(rep == b)[0][1:]] = nb  # all but its first vertex take the copy
    return replace(bp, se=np.concatenate([bp.se, bp.se[s]]), ln=np.concatenate([bp.ln, bp.ln[s]]),
                   st=np.concatenate([bp.st, bp.st[s]]), sk=np.concatenate([bp.sk, bp.sk[s]]),
                   blk=np.concatenate([bp.blk, np.full(bp.count[b], nb)]), off=np.concatenate([bp.off, bp.off[s]]),
                   first=np.append(bp.first, len(bp.se)), count=np.append(bp.count, bp.count[b]), rep=rep)


def _variants(bp, T):
    """Compact plans with the same expanded pieces as ``bp`` (or moved: the same signature digest) and plans
    whose expanded pieces differ from ``bp``'s in one thing."""
    nb = len(bp.count)
    same = [bp, _blocks(bp, np.arange(nb)[::-1]), _blocks(bp, np.roll(np.arange(nb), 1)), _split(bp),
            _blocks(_split(bp), np.roll(np.arange(nb + 1), 2)),
            replace(bp, se=bp.se + 96, sk=bp.sk), replace(bp, d0=bp.d0 + 1000),
            replace(bp, st=(bp.st + 6) % T, dt=(bp.dt + 6) % T)]  # (tiles rotated: the base moves)
    ln = bp.ln.copy()
    ln[-1] += 1
    rep = bp.rep.copy()
    rep[3] = (rep[3] + 1) % nb
    d0 = bp.d0.copy()
    d0[2] += 4
    dt = bp.dt.copy()
    dt[[0, 1]] = dt[[1, 0]]
    st = bp.st.copy()
    st[1] = (st[1] + 2) % T
    off = bp.off.copy()
    b = int(np.nonzero(bp.count > 1)[0][0])
    off[bp.first[b] + bp.count[b] - 1] += 2  # (a block's last piece moved within the block)
    differ = [replace(bp, ln=ln), replace(bp, rep=rep), replace(bp, d0=d0), replace(bp, dt=dt),
              replace(bp, st=st), replace(bp, rep=rep, dt=dt), replace(bp, off=off)]
    return same, differ


@pytest.mark.parametrize("num_ipus", [1, 2])
def test_compact_signature_is_the_expanded_one(num_ipus):
    target = Target.from_device("ipu-mk2", num_ipus=1)
    T = target.num_tiles
    c = SimpleNamespace(num_tiles=T, target=SimpleNamespace(num_ipus=num_ipus))
    plans, groups = [], []
    for seed in (0, 1):
        g, prog = _graph(target, seed)
        for p in prog.programs:
            bp = CB.broadcast_plan(p.src, p.dst, T)
            same, differ = _variants(bp, T)
            if num_ipus > 1:  # (several IPUs: tiles are not taken relative to a base, a rotation is another copy)
                differ.append(same.pop())
            groups.append((len(plans), len(same), len(differ)))
            plans += [(bp_, 2) for bp_ in same + differ] + [(bp, 4)]  # (and another element size)
    compact = [broadcast_signature(c, bp, isz) for bp, isz in plans]
    expanded = [plan_signature(c, CB.expand(bp), isz) for bp, isz in plans]
    assert [s.key for s in compact] == [plan_signature(c, bp, isz).key for bp, isz in plans]  # (the dispatch)
    assert [s.base for s in compact] == [s.base for s in expanded]
    for i in range(len(plans)):
        for j in range(len(plans)):
            assert (compact[i].sig == compact[j].sig) == (expanded[i].sig == expanded[j].sig), (i, j)
    # each copy's variants with the same pieces (renumbered, split, moved blocks) have its signature, the others not
    for i, n_same, n_differ in groups:
        assert len({s.sig for s in compact[i:i + n_same]}) == 1
        assert all(s.sig != compact[i].sig for s in compact[i + n_same:i + n_same + n_differ + 1])


def test_digest_keeps_dtypes_and_shapes_apart():
    """The digests the signatures and structure keys compare (compiled.digest) tell the same bytes apart by dtype
    (kind, size, byte order, fields) and by shape, and are equal for equal arrays."""
    from popvision_lite.emulator.compile.compiled import digest

    a = np.arange(6, dtype=np.int64)
    b = a.view(np.uint8)
    same_bytes = [a, a.view(np.uint64), a.view(np.float64), a.view(">i8"), a.view(np.int32), b,
                  b.view([("x", "<i8")]), b.view([("x", "<i4"), ("y", "<i4")]), b.view("V8"), b.view("S8"),
                  a.reshape(2, 3), a.reshape(3, 2), a.reshape(6, 1)]
    keys = [digest(x) for x in same_bytes]
    assert len(set(keys)) == len(same_bytes)
    assert keys == [digest(x.copy()) for x in same_bytes]
    assert digest(a, a) != digest(np.concatenate([a, a]))
