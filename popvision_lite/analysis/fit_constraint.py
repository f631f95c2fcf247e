"""Why a run does not fit in tile memory: the binding constraint of each IPU, read from its profile (pure numpy /
pandas over a Profile, no Qt; usable from a notebook: ``binding_constraint(pvl.open("run.pvl")).text()``).

For each IPU the profile draws:

* **which tiles** are over their SRAM (how many, the fullest, as tile ranges);
* **the cause**: *total bytes* when the IPU's bytes summed over its tiles exceed its SRAM (no layout could fit
  them: fewer bytes per IPU are needed), else *uneven layout* (they would fit spread evenly; some tiles hold far
  more than the mean tile);
* **which Poplar memory category** holds the excess: for each category, its mean bytes on the over-capacity
  tiles against its mean on all the IPU's tiles, always-live and not-always-live apart;
* **which tensors**: the variables on the over-capacity tiles *at each tile's own peak* (always-live
  variables, and not-always-live ones live at the liveness step where that tile is fullest), ranked by their
  bytes there beyond an even share (their bytes spread over all the IPU's tiles), with how many tiles each is
  laid out on.

A drawn IPU may stand for several: one replica is drawn of R, and one IPU of each tensor-parallel group (they
run the same shard); the text says so (``run_totals``).  The fit advisor (``sweep/fit.py``) shows this for the
run it starts from and for the leanest placements it tried when none fits.

Every figure is computed once, from numpy columns (a ProfileData's typed columns as it holds them, an open file's
stored tables' arrays): the categories and tensors of an IPU are kept as columns (``IpuConstraint.category_columns``,
``tensor_columns``), and their DataFrames (``categories``, ``tensors``) are built from them on first use, pandas
imported then.  The headline reads the columns alone, so ``emulate``'s advice for a run that does not fit imports no
pandas (decision 0478).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from popvision_lite.analysis.run_totals import run_totals
from popvision_lite.analysis.tile_memory import TileMemory
from popvision_lite.profile import schema
from popvision_lite.profile.run_record import record_of
from popvision_lite.profile.schema import ProfileData, stored_table
from popvision_lite.units import format_bytes, format_percent

if TYPE_CHECKING:
    import pandas as pd

TOTAL_BYTES = "total bytes"
UNEVEN = "uneven layout"
FITS = "fits"


@dataclass
class IpuConstraint:
    """One drawn IPU: its tiles over capacity, the cause, the categories and tensors that hold the excess."""

    ipu: int
    tiles: int
    capacity: int                   # bytes per tile
    tiles_over: int
    over_tiles: np.ndarray          # global tile ids over capacity, fullest first
    fullest_tile: int               # global tile id
    fullest_bytes: int
    total_bytes: int                # summed over the IPU's tiles (each at its own peak)
    cause: str                      # TOTAL_BYTES | UNEVEN | FITS
    # the categories as numpy columns: "category" (names) and CATEGORY_COLUMNS (see :attr:`categories`)
    category_columns: dict[str, np.ndarray]
    # the variables holding the excess as numpy columns (TENSOR_COLUMNS; see binding_constraint), None for none
    # looked at (:attr:`tensors`)
    tensor_columns: dict[str, np.ndarray] | None = None
    peak_name: str = ""             # the program at the fullest tile's not-always-live peak
    # global tile ids the tensors are looked at on: the tiles over capacity, else the fullest tile
    focus_tiles: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False, compare=False)

    @property
    def categories(self) -> pd.DataFrame:
        """category x [mean_all, mean_over, always_live_over, not_always_live_over, excess] (index "category"):
        :attr:`category_columns` as a DataFrame (pandas imported here)."""
        import pandas as pd

        c = self.category_columns
        return pd.DataFrame({k: c[k] for k in CATEGORY_COLUMNS},
                            index=pd.Index(list(c["category"]), name="category"))

    @property
    def tensors(self) -> pd.DataFrame:
        """The variables holding the excess (TENSOR_COLUMNS, see :func:`binding_constraint`): :attr:`tensor_columns`
        as a DataFrame (pandas imported here)."""
        import pandas as pd

        if self.tensor_columns is None:
            return pd.DataFrame(columns=TENSOR_COLUMNS)
        return pd.DataFrame({k: self.tensor_columns[k] for k in TENSOR_COLUMNS})

    @property
    def num_tensors(self) -> int:
        t = self.tensor_columns
        return 0 if t is None else len(t["name"])

    @property
    def sram_bytes(self) -> int:
        return self.tiles * self.capacity

    @property
    def even_fill(self) -> float:
        """The IPU's bytes as a share of its SRAM: the fullest tile of a perfectly even layout."""
        return self.total_bytes / self.sram_bytes if self.sram_bytes else float("nan")

    @property
    def imbalance(self) -> float:
        """Fullest tile over the mean tile."""
        mean = self.total_bytes / self.tiles if self.tiles else 0.0
        return self.fullest_bytes / mean if mean else float("nan")

    @property
    def binding_category(self) -> str:
        """The category that binds: on an uneven layout the one with the most bytes above its mean on the
        over-capacity tiles (the fullest tile when none is over); when the total is too large, the largest there."""
        c = self.category_columns
        v = c["mean_over" if self.cause == TOTAL_BYTES else "excess"]
        ok = ~np.isnan(v)  # (as pandas' idxmax: the first largest, NaN skipped)
        if not ok.any():
            return ""
        return str(c["category"][np.flatnonzero(ok)[np.argmax(v[ok])]])

    def ranked_categories(self, n: int = 3) -> pd.DataFrame:
        """The categories behind the excess, as :attr:`binding_category` ranks them."""
        c = self.categories
        if self.cause == TOTAL_BYTES:
            return c[c["mean_over"] > 0].sort_values("mean_over", ascending=False).head(n)
        return c[c["excess"] > 0].sort_values("excess", ascending=False).head(n)


@dataclass(repr=False)
class BindingConstraint:
    fits: bool
    capacity: int
    ipus: list[IpuConstraint]
    drawn: str                      # what a drawn IPU stands for ("one IPU of each 20-IPU tensor-parallel group")
    num_ipus: int                   # IPUs of the whole run
    notes: list[str] = field(default_factory=list)

    @property
    def binding(self) -> IpuConstraint | None:
        """The IPU that binds: the most tiles over capacity, then the fullest tile."""
        if not self.ipus:
            return None
        return max(self.ipus, key=lambda c: (c.tiles_over, c.fullest_bytes))

    @property
    def cause(self) -> str:
        b = self.binding
        return FITS if self.fits or b is None else b.cause

    def headline(self) -> str:
        """One or two sentences: where it does not fit and why."""
        b = self.binding
        if b is None:
            return "No memory recorded."
        if self.fits:
            return (f"Fits: the fullest tile (IPU {b.ipu}, tile {b.fullest_tile % b.tiles}) holds "
                    f"{format_bytes(b.fullest_bytes)} of {format_bytes(b.capacity)} "
                    f"({format_percent(b.fullest_bytes / b.capacity, 0)}).")
        over = [c for c in self.ipus if c.tiles_over]
        where = (f"IPU {b.ipu}" if len(over) == 1 else f"{len(over)} of {len(self.ipus)} drawn IPUs, most on IPU {b.ipu}")
        text = (f"{where}: {b.tiles_over:,} of {b.tiles:,} tiles over capacity, the fullest (tile "
                f"{b.fullest_tile % b.tiles}) at {format_bytes(b.fullest_bytes)} "
                f"({format_percent(b.fullest_bytes / b.capacity, 0)} of {format_bytes(b.capacity)}). ")
        if b.cause == TOTAL_BYTES:
            text += (f"Cause: total bytes - the IPU holds {format_bytes(b.total_bytes)}, "
                     f"{format_percent(b.even_fill, 0)} of its {format_bytes(b.sram_bytes)} SRAM, so even a perfectly "
                     f"even layout would not fit")
        else:
            text += (f"Cause: uneven layout - the IPU's {format_bytes(b.total_bytes)} would fill "
                     f"{format_percent(b.even_fill, 0)} of its SRAM spread evenly; the fullest tile holds "
                     f"{b.imbalance:.1f}x the mean tile")
        top = _top_tensor(b)
        text += (f"; mostly {b.binding_category}" + (f" ({top})" if top else "") + ".")
        return text

    def text(self) -> str:
        """The whole analysis, one paragraph per IPU that is over capacity (the fullest IPU when it fits)."""
        lines = [self.headline()]
        if self.drawn:
            lines.append(f"(Each drawn IPU stands for {self.drawn}; the run has {self.num_ipus:,} IPUs.)")
        shown = [c for c in self.ipus if c.tiles_over] or ([self.binding] if self.binding else [])
        for c in shown:
            lines.append("")
            lines.append(f"IPU {c.ipu}: {c.tiles_over:,} tiles over capacity"
                         + (f" ({_tile_ranges(c.over_tiles, c.tiles)})" if c.tiles_over else "")
                         + f"; {c.cause}: {format_bytes(c.total_bytes)} on the IPU = "
                         f"{format_percent(c.even_fill, 0)} of {format_bytes(c.sram_bytes)}; fullest tile "
                         f"{format_bytes(c.fullest_bytes)} = {c.imbalance:.2f}x the mean"
                         + (f"; its not-always-live peak is at {c.peak_name}" if c.peak_name else "") + ".")
            cat = c.ranked_categories()
            what = "over-capacity tiles" if c.tiles_over else "fullest tile"
            if len(cat):
                lines.append(f"  categories on the {what} (mean per tile there vs. over all the IPU's tiles):")
                for name, r in cat.iterrows():
                    lines.append(f"  - {name}: {format_bytes(r['mean_over'])} vs. {format_bytes(r['mean_all'])} "
                                 f"(always live {format_bytes(r['always_live_over'])}, not always live "
                                 f"{format_bytes(r['not_always_live_over'])})")
            if c.num_tensors:
                lines.append(f"  tensors on the {what} at each tile's peak"
                             + (" (the largest):" if c.cause == TOTAL_BYTES else " (beyond an even share):"))
                for r in c.tensors.itertuples(index=False):
                    lines.append(f"  - {r.name} ({'always live' if r.always_live else 'not always live'}): "
                                 f"{format_bytes(r.mean_on_over)} per tile there, laid out on {r.tiles_mapped:,} of "
                                 f"{c.tiles:,} tiles (an even share would be {format_bytes(r.even_share)})")
        lines += [f"Note: {n}" for n in self.notes]
        return "\n".join(lines)

    def to_frame(self) -> pd.DataFrame:
        """One row per drawn IPU: tiles over, fullest tile and bytes, total bytes, SRAM, even fill, imbalance,
        cause, binding category, top tensor."""
        import pandas as pd

        return pd.DataFrame([{
            "ipu": c.ipu, "tiles_over": c.tiles_over, "fullest_tile": c.fullest_tile, "fullest_bytes": c.fullest_bytes,
            "total_bytes": c.total_bytes, "sram_bytes": c.sram_bytes, "even_fill": c.even_fill,
            "imbalance": c.imbalance, "cause": c.cause, "binding_category": c.binding_category,
            "top_tensor": str(c.tensor_columns["name"][0]) if c.num_tensors else ""} for c in self.ipus])

    def numbers(self) -> dict:
        """The analysis as plain values (insights' ``Finding.numbers``, JSON)."""
        b = self.binding
        return {"fits": self.fits, "cause": self.cause, "num_ipus": self.num_ipus,
                "ipus": [{"ipu": c.ipu, "tiles_over": c.tiles_over, "fullest_tile": c.fullest_tile,
                          "fullest_bytes": c.fullest_bytes, "total_bytes": c.total_bytes, "sram_bytes": c.sram_bytes,
                          "cause": c.cause, "binding_category": c.binding_category,
                          "tensors": [str(n) for n in c.tensor_columns["name"]] if c.num_tensors else []}
                         for c in self.ipus],
                "binding_ipu": b.ipu if b is not None else None}

    def __repr__(self) -> str:
        return f"<BindingConstraint: {self.headline()}>"

    def _repr_html_(self) -> str:
        import html

        return "<pre>" + html.escape(self.text()) + "</pre>"


def _top_tensor(c: IpuConstraint) -> str:
    if not c.num_tensors:
        return ""
    r = {k: v[0] for k, v in c.tensor_columns.items()}
    if c.cause == UNEVEN:
        return (f"{r['name']}: {format_bytes(r['mean_on_over'])} on each tile over against an even share of "
                f"{format_bytes(r['even_share'])}, laid out on {int(r['tiles_mapped']):,} of {c.tiles:,} tiles")
    return f"{r['name']}, on {int(r['tiles_mapped']):,} of {c.tiles:,} tiles"


def _tile_ranges(tiles: np.ndarray, per_ipu: int, limit: int = 6) -> str:
    """'tiles 12-19, 760-790 and 3 more ranges' (tile numbers within the IPU)."""
    t = np.sort(np.asarray(tiles, dtype=np.int64) % per_ipu)
    if not len(t):
        return ""
    starts = np.r_[0, np.flatnonzero(np.diff(t) > 1) + 1]
    ends = np.r_[starts[1:] - 1, len(t) - 1]
    parts = [f"{t[a]}" if a == b else f"{t[a]}-{t[b]}" for a, b in zip(starts, ends, strict=True)]
    more = len(parts) - limit
    return "tiles " + ", ".join(parts[:limit]) + (f" and {more} more ranges" if more > 0 else "")


def _drawn_text(profile) -> tuple[str, int]:
    """(what one drawn IPU stands for, IPUs of the whole run), from the run's one definition (run_totals)."""
    try:
        rt = run_totals(profile)
    except (KeyError, ValueError, TypeError):  # a profile without a schedule: every IPU is drawn
        return "", int(profile.target.num_ipus)
    parts = []
    if rt.tensor_parallel > 1:
        parts.append(f"the {rt.tensor_parallel} IPUs of its tensor-parallel group (one shard drawn, the others alike)")
    if rt.replicas > 1:
        parts.append(f"its IPU in each of the {rt.replicas} replicas")
    return " and ".join(parts), int(rt.num_ipus)


def _peak_lsteps(profile, tiles: np.ndarray) -> np.ndarray:
    """The liveness step where each of ``tiles`` holds the most not-always-live bytes (-1 without liveness)."""
    live = getattr(profile, "liveness", None)
    if live is None:  # a ProfileData: the run's liveness array in memory
        live = profile.liveness_tile_bytes
        if not len(tiles) or np.shape(live)[0] == 0:
            return np.full(len(tiles), -1, np.int64)
        return np.asarray(live[:, np.asarray(tiles, np.int64)]).argmax(axis=0).astype(np.int64)
    if not len(tiles) or live.num_lsteps == 0:
        return np.full(len(tiles), -1, np.int64)
    tb = np.asarray(live.tile_bytes(tiles=[int(t) for t in tiles]))
    return tb.argmax(axis=0).astype(np.int64)


def _table(profile, name: str):
    """Table ``name`` as the analysis reads it: a ProfileData's as it holds it (typed numpy columns while no
    DataFrame was asked of it: none is built here), an open file's stored frame; None for none."""
    if isinstance(profile, ProfileData):
        return profile.table(name)
    return stored_table(profile, name)


def _col(table, name: str, dtype=None) -> np.ndarray:
    """Column ``name`` of a DataFrame or typed columns as a 1-D numpy array (of ``dtype`` when given)."""
    v = table[name]
    v = v.to_numpy() if hasattr(v, "to_numpy") else np.asarray(v)
    return v if dtype is None else v.astype(dtype, copy=False)


def _live_at(profile, var_ids: np.ndarray, lsteps: np.ndarray, always: np.ndarray, first: np.ndarray,
             last: np.ndarray) -> np.ndarray:
    """Per (variable, liveness step) row: is the variable live there (always live, or a live interval holds it;
    a variable live more than once - ``variable_intervals`` - only inside one of its intervals)."""
    live = always | ((first <= lsteps) & (lsteps <= last) & (lsteps >= 0))
    iv = _table(profile, "variable_intervals")
    if iv is None or not len(iv):
        return live
    iv_var = _col(iv, "var_id", np.int64)
    several = np.isin(var_ids, iv_var)
    if not several.any():
        return live
    idx = np.flatnonzero(several & live & ~always)
    # each of these rows against each interval of its variable: live where one of them holds its step
    o = np.argsort(iv_var, kind="stable")
    sv, f, la = iv_var[o], _col(iv, "first_lstep", np.int64)[o], _col(iv, "last_lstep", np.int64)[o]
    v = var_ids[idx].astype(np.int64, copy=False)
    lo, n = np.searchsorted(sv, v, "left"), np.searchsorted(sv, v, "right") - np.searchsorted(sv, v, "left")
    row = np.repeat(np.arange(len(idx)), n)
    j = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n) + np.repeat(lo, n)
    s = lsteps[idx][row]
    inside = idx[np.unique(row[(f[j] <= s) & (s <= la[j])])]
    live[idx] = False
    live[inside] = True
    return live


TENSOR_COLUMNS = ["name", "always_live", "bytes_on_tiles", "mean_on_over", "tiles_mapped", "even_share", "excess",
                  "var_id"]
CATEGORY_COLUMNS = ("mean_all", "mean_over", "always_live_over", "not_always_live_over", "excess")


def _lookup(keys: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """The row of each of ``wanted`` in the id column ``keys`` (each present: the reader checks the ids)."""
    o = np.argsort(keys, kind="stable")
    return o[np.minimum(np.searchsorted(keys[o], wanted), max(len(keys) - 1, 0))]


def _sums(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct ``keys`` ascending, the int64 sum of ``values`` of each): a groupby sum."""
    o = np.argsort(keys, kind="stable")
    k = keys[o]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]]) if len(k) else np.zeros(0, np.int64)
    return k[starts], (np.add.reduceat(values[o].astype(np.int64), starts) if len(k) else np.zeros(0, np.int64))


def _tiles_per_var(var: np.ndarray, tile: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct ``var`` ascending, how many distinct tiles each has rows on): ``np.unique`` of the
    (var, tile) pairs, then of their vars with counts, by one sort of a combined int64 key (numpy 2.4's
    ``np.unique`` of 365,623 pairs took 0.23 s, the sort 0.02 s)."""
    if not len(var):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    v = var.astype(np.int64)
    t = tile.astype(np.int64)
    v0, t0 = int(v.min()), int(t.min())
    key = np.sort((v - v0) * (int(t.max()) - t0 + 1) + (t - t0))
    pair_var = key[np.r_[True, key[1:] != key[:-1]]] // (int(t.max()) - t0 + 1)  # one per distinct pair, sorted
    starts = np.flatnonzero(np.r_[True, pair_var[1:] != pair_var[:-1]])
    return pair_var[starts] + v0, np.diff(np.r_[starts, len(pair_var)])


def _tensors(profile, tiles: np.ndarray, per_ipu: int, top: int, by: str = "excess") -> dict[str, np.ndarray] | None:
    """The variables on ``tiles`` at each tile's own peak, ranked by their bytes there beyond an even share
    (``by`` "excess": what an uneven layout piles up) or by their bytes there ("bytes_on_tiles": what a total too
    large is made of): TENSOR_COLUMNS as numpy columns, None when no variable is laid out there at all."""
    vt = _table(profile, "variable_tiles")
    if not len(tiles) or vt is None or not len(vt):
        return None
    v = _table(profile, "variables")
    vt_tile, vt_var, vt_bytes = _col(vt, "tile"), _col(vt, "var_id"), _col(vt, "bytes")
    on = np.isin(vt_tile, tiles)
    rtile, vid, rbytes = vt_tile[on], vt_var[on], vt_bytes[on]
    peak = _peak_lsteps(profile, tiles)
    v_id = _col(v, "var_id")
    at = _lookup(v_id, vid)
    always = _col(v, "always_live")[at].astype(bool)
    first = _col(v, "first_lstep")[at].astype(np.int64)
    last = _col(v, "last_lstep")[at].astype(np.int64)
    ls = peak[_lookup(np.asarray(tiles), rtile)].astype(np.int64)  # each row's tile's peak step
    live = _live_at(profile, vid, ls, always, first, last)
    var_id, bytes_on = _sums(vid[live], rbytes[live])
    if not len(var_id):
        return None
    # how many of the IPU's tiles each of these variables is laid out on, and its even share of a tile
    mine = np.isin(vt_var, var_id) & (vt_tile // per_ipu == int(tiles[0]) // per_ipu)
    m_var, m_tile = vt_var[mine], vt_tile[mine]
    mapped_var, mapped_n = _tiles_per_var(m_var, m_tile)
    on_var, on_bytes = _sums(m_var, vt_bytes[mine])
    tiles_mapped = np.zeros(len(var_id), np.int64)
    hit = np.isin(var_id, mapped_var)
    tiles_mapped[hit] = mapped_n[np.searchsorted(mapped_var, var_id[hit])]
    on_ipu = np.zeros(len(var_id), np.float64)
    hit = np.isin(var_id, on_var)
    on_ipu[hit] = on_bytes[np.searchsorted(on_var, var_id[hit])]
    row = _lookup(v_id, var_id)
    out = {"var_id": var_id, "bytes_on_tiles": bytes_on,
           "name": np.array([str(x) for x in _col(v, "name")[row].tolist()], dtype=object).reshape(-1),
           "always_live": _col(v, "always_live")[row].astype(bool), "tiles_mapped": tiles_mapped,
           "even_share": on_ipu / per_ipu, "mean_on_over": bytes_on / len(tiles)}
    out["excess"] = bytes_on - out["even_share"] * len(tiles)
    keep = np.lexsort((var_id, -out[by]))  # by ``by`` from the largest, then by var_id
    if by == "excess":
        keep = keep[out["excess"][keep] > 0]
    keep = keep[:top]
    return {c: out[c][keep] for c in TENSOR_COLUMNS}


def _peak_name(profile, tile: int) -> str:
    ls = profile.stored_table("liveness_steps")
    if profile.liveness.num_lsteps == 0 or not len(ls):
        return ""
    step = int(_peak_lsteps(profile, np.array([tile]))[0])
    hit = ls[ls["lstep"] == step]
    return f"liveness step {step} ({hit['name'].iat[0]})" if len(hit) else f"liveness step {step}"


def binding_constraint(profile, top: int = 5) -> BindingConstraint:
    """The binding memory constraint of ``profile`` per drawn IPU (see the module docstring); ``top`` tensors
    are named per IPU."""
    tm = TileMemory(profile)
    out = [_ipu_figures(tm, ipu) for ipu in range(tm.num_tiles // tm.tiles_per_ipu)]
    for c in out:
        _add_detail(profile, c, top, tensors=bool(c.tiles_over) or c.ipu == 0)
    drawn, n = _drawn_text(profile)
    return BindingConstraint(fits=_fits(profile, out), capacity=int(tm.capacity), ipus=out, drawn=drawn, num_ipus=n)


def binding_headline(profile) -> str:
    """:meth:`BindingConstraint.headline` of ``profile``, reading only what the headline shows: the tensors of
    the binding IPU alone, no run totals, no peak program (the advice ``emulate`` prints for a run that does not
    fit; the same text as ``binding_constraint(profile).headline()``, without the work of the whole analysis on
    every other IPU, which grew with the pipeline's depth).  ``profile``: an open Profile, or the ProfileData of
    a run still in memory (the tables and arrays the writer stores, not read back)."""
    tm = TileMemory(profile)
    out = [_ipu_figures(tm, ipu) for ipu in range(tm.num_tiles // tm.tiles_per_ipu)]
    b = BindingConstraint(fits=_fits(profile, out), capacity=int(tm.capacity), ipus=out, drawn="", num_ipus=0)
    c = b.binding
    if c is not None and not b.fits:
        _add_detail(profile, c, 5, tensors=bool(c.tiles_over) or c.ipu == 0, peak=False)
    return b.headline()


def _ipu_figures(tm: TileMemory, ipu: int) -> IpuConstraint:
    """IPU ``ipu``'s tiles over capacity, the fullest, its total, the cause and the categories (from the memory
    array alone; the tensors and the peak program are added by :func:`_add_detail`)."""
    per_ipu, cap = tm.tiles_per_ipu, int(tm.capacity)
    sl = slice(ipu * per_ipu, (ipu + 1) * per_ipu)
    total = tm.total[sl]
    over_local = np.flatnonzero(total > cap)
    over_local = over_local[np.argsort(-total[over_local], kind="stable")]
    full = int(np.argmax(total)) if len(total) else 0
    focus = over_local if len(over_local) else np.array([full])  # where the excess is (or the fullest tile)
    a = tm.array[sl]
    f = a[focus]
    cat = {"mean_all": a.sum(axis=2).mean(axis=0), "mean_over": f.sum(axis=2).mean(axis=0),
           "always_live_over": f[:, :, 0].mean(axis=0), "not_always_live_over": f[:, :, 1].mean(axis=0)}
    cat["excess"] = cat["mean_over"] - cat["mean_all"]
    held = (cat["mean_all"] > 0) | (cat["mean_over"] > 0)  # the categories the IPU holds bytes of
    cat = {"category": np.array(schema.MEMORY_CATEGORIES, dtype=object)[held], **{k: v[held] for k, v in cat.items()}}
    tot = int(total.sum())
    n_over = len(over_local)
    cause = FITS if not n_over else (TOTAL_BYTES if tot > per_ipu * cap else UNEVEN)
    c = IpuConstraint(ipu=ipu, tiles=per_ipu, capacity=cap, tiles_over=n_over,
                      over_tiles=(over_local + ipu * per_ipu).astype(np.int64),
                      fullest_tile=int(full + ipu * per_ipu), fullest_bytes=int(total[full]) if len(total) else 0,
                      total_bytes=tot, cause=cause, category_columns=cat,
                      focus_tiles=(focus + ipu * per_ipu).astype(np.int64))
    return c


def _add_detail(profile, c: IpuConstraint, top: int, tensors: bool, peak: bool = True) -> None:
    """The tensors on ``c``'s over-capacity tiles (its fullest tile when none is over) and the program at its
    fullest tile's not-always-live peak."""
    if tensors:
        c.tensor_columns = _tensors(profile, c.focus_tiles, c.tiles, top, "bytes_on_tiles" if c.cause == TOTAL_BYTES else "excess")
    if peak:
        c.peak_name = _peak_name(profile, c.fullest_tile)


def _fits(profile, out: list[IpuConstraint]) -> bool:
    """No drawn IPU over capacity, unless the run record says otherwise: the emulator's verdict is the one
    definition of "fits"."""
    fits = not any(c.tiles_over for c in out)
    rec = record_of(profile)
    if "fits" in rec and rec.fits != fits:
        fits = rec.fits
    return fits
