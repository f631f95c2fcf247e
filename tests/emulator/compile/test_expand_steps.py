"""compile.steps.expand: the executed step sequence and each program's first and last step, against the
per-level record lists it replaced (kept here as the reference), on random program trees with nested Repeats
(counts 0, 1 and more), empty Sequences and leaves without steps."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np

from popvision_lite.emulator import programs as P
from popvision_lite.emulator.compile.compiled import ProgInfo
from popvision_lite.emulator.compile.steps import expand


def _reference_steps_of(c, children, pid):
    """The old recursive form: (steps, relative (prog, first, last) records of the subtree)."""
    info = c.progs[pid]
    p = info.prog
    if isinstance(p, P.Sequence | P.Repeat):
        parts, recs, off = [], [], 0
        for ch in children.get(pid, []):
            s, r = _reference_steps_of(c, children, ch)
            recs += [(q, f + off if f >= 0 else -1, lst + off if lst >= 0 else -1) for q, f, lst in r]
            parts.append(s)
            off += len(s)
        body = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        if isinstance(p, P.Repeat):
            k = p.count
            L = len(body)
            recs = [(q, f if k else -1, lst + (k - 1) * L if (k and lst >= 0) else -1) for q, f, lst in recs]
            body = np.tile(body, k)
        seq = body
    else:
        seq = np.asarray(info.templates, np.int64)
        recs = []
    recs.append((pid, 0 if len(seq) else -1, len(seq) - 1 if len(seq) else -1))
    return seq, recs


def _random_tree(rng: random.Random, depth: int = 0):
    r = rng.random()
    if depth >= 5 or (depth and r < 0.35):
        return P.Sync()
    kids = [_random_tree(rng, depth + 1) for _ in range(rng.choice([0, 1, 2, 3]))]
    if r < 0.7:
        return P.Sequence(kids)
    return P.Repeat(rng.choice([0, 1, 2, 3, 5]), P.Sequence(kids))


def _compiled(rng: random.Random, root):
    """A compile's program records in pre-order (as compile._walk makes them), each leaf with 0-3 templates."""
    c = SimpleNamespace(progs=[], templates=[])

    def walk(p, parent):
        info = ProgInfo(prog=p, prog_id=len(c.progs), parent_id=parent, op=None)
        c.progs.append(info)
        kids = p.children() if isinstance(p, P.Sequence | P.Repeat) else []
        if not kids and not isinstance(p, P.Sequence | P.Repeat):
            for _ in range(rng.choice([0, 1, 1, 2, 3])):
                info.templates.append(len(c.templates))
                c.templates.append(SimpleNamespace(duration=rng.randrange(1, 100)))
        for ch in kids:
            walk(ch, info.prog_id)

    walk(root, -1)
    return c


def test_expand_matches_the_per_level_records_on_random_trees():
    rng = random.Random(49)
    repeats_seen = set()
    for _ in range(300):
        c = _compiled(rng, _random_tree(rng))
        expand(c)
        children: dict = {}
        for info in c.progs:
            if info.parent_id >= 0:
                children.setdefault(info.parent_id, []).append(info.prog_id)
        want_seq, recs = _reference_steps_of(c, children, 0)
        assert c.seq.dtype == np.int64 and np.array_equal(c.seq, want_seq)
        first = np.full(len(c.progs), -1, np.int64)
        last = np.full(len(c.progs), -1, np.int64)
        for q, f, lst in recs:
            first[q], last[q] = f, lst
        assert np.array_equal(c.prog_first, first) and np.array_equal(c.prog_last, last)
        dur = np.array([t.duration for t in c.templates], np.int64)
        assert c.total_cycles == int(dur[want_seq].sum())
        for info in c.progs:
            if isinstance(info.prog, P.Repeat):
                repeats_seen.add(info.prog.count)
                assert c.prog_repeat[info.prog_id] == info.prog.count
    assert repeats_seen == {0, 1, 2, 3, 5}
