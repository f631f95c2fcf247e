"""Write a resolved op / program selection (steps + tiles) to a document's selection.

Used by the program tree, operations and insights views.  The cheap part (op, program,
step range) is written at once; the tiles need the step x tile data of those steps, so
when that is large it is read on a worker thread and the exact tiles follow in a second
update (only if the selection still names the same op / program).  Until then an op's
selection carries the tiles holding its vertices (a table lookup).
"""

from __future__ import annotations

import numpy as np

from popvision_lite.analysis import selection as S
from popvision_lite.gui.workers import start_task

# resolve synchronously below this many step x tile cells (a few ms of reading)
SYNC_CELLS = 4_000_000


def _cells(profile, steps: np.ndarray) -> int:
    return int(len(steps)) * int(profile.target.num_tiles)


def select_op(document, op_id: int, source: str):
    """Select ``op_id``: its step range at once, then its tiles.  Returns the worker or None."""
    profile = document.profile
    steps = S.op_steps(profile, op_id)
    prog = S.program_for_op(profile, op_id)
    key = ("op_tiles", int(op_id))
    if document.has_cached(key) or _cells(profile, steps) <= SYNC_CELLS:
        tiles = document.cached(key, S.op_tiles, profile, op_id, steps)
        document.selection.update(source=source, op_id=int(op_id), prog_id=prog,
                                  step_range=S.step_range_of(steps), tiles=tiles)
        return None
    # provisional tiles (those running the op's vertices: a table lookup) so listeners have something
    # to show and never fall back to resolving on the GUI thread; the exact set follows
    document.selection.update(source=source, op_id=int(op_id), prog_id=prog,
                              step_range=S.step_range_of(steps), tiles=S.op_vertex_tiles(profile, op_id))

    def work(task):
        return S.op_tiles(profile, op_id, steps)

    def done(tiles):
        document.put_cached(key, tiles)
        if document.selection.state.op_id == op_id:
            document.selection.update(source=source, tiles=tiles)

    w = start_task(work, title=f"Resolving tiles of op {op_id}")
    w.signals.result.connect(done)
    return w


def select_program(document, prog_id: int, op_id: int | None, source: str):
    """Select program ``prog_id``: its step range (descendants included), then the tiles active in it."""
    profile = document.profile
    rng = S.program_step_range(profile, prog_id)
    key = ("prog_steps", int(prog_id))
    steps = document.cached(key, S.program_steps, profile, prog_id)
    if rng is None:
        rng = S.step_range_of(steps)
    tkey = ("prog_tiles", int(prog_id))
    op = None if op_id is None or op_id < 0 else int(op_id)
    if document.has_cached(tkey) or _cells(profile, steps) <= SYNC_CELLS:
        tiles = document.cached(tkey, S.tiles_active_in_steps, profile, steps)
        document.selection.update(source=source, prog_id=int(prog_id), op_id=op, step_range=rng, tiles=tiles)
        return None
    document.selection.update(source=source, prog_id=int(prog_id), op_id=op, step_range=rng, tiles=())

    def work(task):
        return S.tiles_active_in_steps(profile, steps)

    def done(tiles):
        document.put_cached(tkey, tiles)
        if document.selection.state.prog_id == prog_id:
            document.selection.update(source=source, tiles=tiles)

    w = start_task(work, title=f"Resolving tiles of program {prog_id}")
    w.signals.result.connect(done)
    return w
