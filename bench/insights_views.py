"""Program tree / operations / insights benchmark (issue 6).

Measured side by side in one run, offscreen, on one synthetic profile with many programs
and ops (default 1 IPU x 1472 tiles x 20,000 steps, 300 layers: ~11.7k programs, ~1.8k ops,
~3.3M vertex rows):

* program tree: building the lazy model + view (``ProgramTreeView``) vs an eager
  QStandardItemModel holding every node (what a naive tree would do);
* ops filter: the vectorised name mask (``analysis.operations.name_mask`` + one proxy
  invalidation) vs QSortFilterProxyModel's own regex filter calling ``data()`` per row;
* ops sort: numpy argsort in the source model (one layout change) vs QSortFilterProxyModel's
  sort on the same raw values (``data()`` per comparison);
* select an op (the one with the most steps): steps + tiles resolved and written to the
  selection, as the view does on a click;
* ``analysis.insights.insights`` on the whole profile.

Times are medians of interleaved repetitions.

    python -m bench.insights_views            # writes the profile into a temp folder
    python -m bench.insights_views --profile run.pvl
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


def _median_ms(fn, reps: int) -> float:
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.insights_views")
    ap.add_argument("--profile", help="existing .pvl to use (else a synthetic one is written)")
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--layers", type=int, default=300)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv or [])
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

    import numpy as np
    from PySide6.QtCore import QRegularExpression, QSortFilterProxyModel, Qt
    from PySide6.QtGui import QStandardItem, QStandardItemModel
    from PySide6.QtWidgets import QApplication

    import popvision_lite as pvl
    from popvision_lite.analysis import selection as S
    from popvision_lite.analysis.insights import insights
    from popvision_lite.analysis.operations import name_mask, ops_table
    from popvision_lite.analysis.program_tree import ProgramTree
    from popvision_lite.gui.state.document import Document
    from popvision_lite.gui.state.resolve import select_op
    from popvision_lite.gui.views.operations_view import OpsFilterProxy, OpsTableModel
    from popvision_lite.gui.views.program_tree_view import ProgramTreeView

    app = QApplication.instance() or QApplication([])
    tmp = None
    path = args.profile
    if path is None:
        from popvision_lite.testing.synthetic import write_synthetic

        tmp = tempfile.TemporaryDirectory()
        path = Path(tmp.name) / "big.pvl"
        t0 = time.perf_counter()
        write_synthetic(path, num_ipus=1, tiles_per_ipu=1472, num_steps=args.steps, num_layers=args.layers,
                        over_capacity_tiles=5)
        print(f"wrote synthetic profile in {time.perf_counter() - t0:.1f} s")
    p = pvl.open(path)
    print(f"profile: {p.target.num_tiles} tiles, {len(p.stored_table('steps')):,} steps, {len(p.stored_table('programs')):,} programs, "
          f"{len(p.stored_table('ops')):,} ops, {len(p.stored_table('vertices')):,} vertex rows")
    for t in ("programs", "ops", "steps", "compute_sets"):
        getattr(p, t)  # tables read once, outside the timings

    # --- program tree: lazy vs eager ------------------------------------------------
    def lazy_tree():
        d = Document(p)
        v = ProgramTreeView(d)
        v.resize(900, 700)
        v.grab()
        v.deleteLater()

    def eager_tree():
        tree = ProgramTree(p)
        m = QStandardItemModel()
        items = {}
        for pid in tree.ids.tolist():  # parent before child
            row = [QStandardItem(str(x)) for x in tree.values(pid)]
            items[pid] = row[0]
            par = tree.parent_of(pid)
            (items[par] if par >= 0 else m.invisibleRootItem()).appendRow(row)
        return m

    lazy, eager = [], []
    for _ in range(max(1, args.reps // 2)):
        lazy.append(_median_ms(lazy_tree, 1))
        eager.append(_median_ms(eager_tree, 1))
        app.processEvents()
    lz, eg = statistics.median(lazy), statistics.median(eager)
    print(f"program tree open: lazy model + view {lz:8.1f} ms | eager QStandardItemModel {eg:8.1f} ms "
          f"| eager/lazy {eg / lz:5.1f}x")

    # --- ops filter: vectorised mask vs proxy regex ------------------------------------
    df = ops_table(p)
    model = OpsTableModel(df)
    ours = OpsFilterProxy()
    ours.setSourceModel(model)
    qt = QSortFilterProxyModel()
    qt.setSourceModel(model)
    qt.setFilterKeyColumn(0)
    pats = ["attention", "ffn/matmul", "layer1", "softmax", ""]

    def f_ours():
        for pat in pats:
            ours.set_mask(name_mask(model.cols[0], pat, True) if pat else None)
            ours.rowCount()

    def f_qt():
        for pat in pats:
            qt.setFilterRegularExpression(QRegularExpression(pat, QRegularExpression.CaseInsensitiveOption))
            qt.rowCount()

    a, b = [], []
    for _ in range(args.reps):
        a.append(_median_ms(f_ours, 1))
        b.append(_median_ms(f_qt, 1))
    fa, fb = statistics.median(a), statistics.median(b)
    same = all(
        np.array_equal(name_mask(model.cols[0], pat, True),
                       np.array([bool(QRegularExpression(pat, QRegularExpression.CaseInsensitiveOption)
                                      .match(str(n)).hasMatch()) for n in model.cols[0]]))
        for pat in pats)
    print(f"ops filter x{len(pats)} patterns over {len(df):,} ops: mask {fa:7.1f} ms | Qt regex proxy "
          f"{fb:7.1f} ms | Qt/mask {fb / fa:5.1f}x | same rows: {same}")

    # --- ops sort: numpy in the source model vs the proxy's own sort -----------------------
    from popvision_lite.gui.views.operations_view import SORT_ROLE

    qs = QSortFilterProxyModel()
    qs.setSourceModel(model)
    qs.setSortRole(SORT_ROLE)
    num_cols = [i for i, k in enumerate(model.keys) if k not in ("name", "type", "plan")]

    def s_ours():
        for c in num_cols:
            ours.sort(c, Qt.DescendingOrder)
            ours.rowCount()

    def s_qt():
        for c in num_cols:
            qt_order = Qt.DescendingOrder
            qs.sort(c, qt_order)
            qs.rowCount()

    ours.set_mask(None)
    a, b = [], []
    for _ in range(args.reps):
        a.append(_median_ms(s_ours, 1))
        b.append(_median_ms(s_qt, 1))
    sa, sb = statistics.median(a), statistics.median(b)
    print(f"ops sort x{len(num_cols)} columns over {len(df):,} ops: numpy {sa:7.1f} ms | Qt proxy sort "
          f"{sb:7.1f} ms | Qt/numpy {sb / sa:5.1f}x")

    # --- op selection ------------------------------------------------------------------
    st = p.stored_table("steps")
    counts = st[st["op_id"] >= 0].groupby("op_id").size()
    op = int(counts.idxmax())
    d = Document(p)

    def sel():
        d._cache.clear()
        select_op(d, op, "bench")
        d.selection.clear()

    t_sel = _median_ms(sel, args.reps)
    r = S.resolve_op(p, op)
    print(f"select op {op} ({int(counts.max()):,} steps, {len(r.tiles):,} tiles): {t_sel:7.1f} ms "
          f"(resolved on the GUI thread: {int(counts.max()) * p.target.num_tiles <= 4_000_000})")

    # --- insights ------------------------------------------------------------------------
    t_ins = _median_ms(lambda: insights(p), max(1, args.reps // 2))
    found = insights(p)
    print(f"insights: {t_ins:7.1f} ms for {len(found)} findings (off the GUI thread in the view)")
    p.close()
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
