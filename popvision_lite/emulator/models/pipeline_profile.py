"""The profile of one replica of a pipelined run: each IPU's stage graph tables joined by the profile
assembler (profile/assemble.py), and a timeline of per-IPU lanes overlapping in time (fill, steady state,
drain; middle pipeline cycles elided when the timeline would exceed MAX_PROFILE_CELLS), then the all-reduce,
optimizer and DDR stream steps."""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np

from popvision_lite.emulator.compile import K_COMPUTE, K_STREAM, K_XG, StepTemplate
from popvision_lite.emulator.profile_builder import BlockRows, step_tile_arrays, steps_table
from popvision_lite.emulator.target import Target
from popvision_lite.profile import schema
from popvision_lite.profile.assemble import (
    Part,
    VariableRow,
    append_variables,
    concat_parts,
    program_step_spans,
)
from popvision_lite.profile.columns import Columns

from .stages import ATT_PARTS, PHASES

# step x tile cells of the profile timeline (= 60,000 steps of one 1472-tile IPU); pipeline cycles beyond
# that budget are elided, so the written profile stays tens of MB whatever S, G and R
MAX_PROFILE_CELLS = 60_000 * 1472
# the stage graph tables joined per IPU (the steps are composed from the pipeline's timeline)
PART_TABLES = ("ops", "programs", "compute_sets", "vertices", "variables", "variable_tiles", "variable_intervals",
               "liveness_steps")
# step-summed op columns: an op of the layer body runs once per attention / FFN block of the IPU per micro-batch
OP_TOTALS = ("flops", "bytes_sram", "bytes_exchange", "bytes_ipu_link", "bytes_ddr", "cycles", "compute_cycles",
             "exchange_cycles", "sync_cycles", "stream_cycles")


def compose_profile(cfg, target1: Target, graphs: dict, kinds: list, stages: list, pipe: dict, schedule: dict,
                    fits: bool, split: list, blocks: list) -> schema.ProfileData:
    """One replica's pipeline as a profile (see the module doc); ``schedule`` gains the fill / drain cycles,
    the busy IPU cycles of each pipeline phase and what the timeline shows."""
    S = len(stages)  # IPUs of the replica
    T = target1.tiles_per_ipu
    parts, op_counts = _ipu_parts(cfg, graphs, kinds, stages, T)
    tables, offsets = concat_parts(parts)
    templates, phase_tpl = _ipu_templates(graphs, kinds, schedule, offsets, T)
    n = pipe["cycles"]
    xc_t = len(templates)
    templates.append(_synthetic(K_XG, -1, pipe["copy_cycles"], T,
                                cfg.batch * cfg.seq * cfg.hidden * (2 if cfg.precision == "fp16" else 4)))
    tl = SimpleNamespace(S=S, pipe=pipe, xc_t=xc_t, durs=pipe["durations"],
                         starts=np.concatenate([[0], np.cumsum(pipe["durations"])[:-1]]).astype(np.int64),
                         dur_all=np.array([t.duration for t in templates], np.int64),
                         work=_lane_work(phase_tpl, stages, split, blocks,
                                         int(getattr(cfg, "attention_serialisation", 1))))
    shown = _shown_cycles(tl, n, T)
    ids_l, st_l = [], []
    for t in shown:
        for ids, st, _ip in _cycle_steps(tl, int(t)):
            ids_l.append(ids)
            st_l.append(st)
    t_end = int(tl.starts[-1] + tl.durs[-1]) if n else 0
    _update_steps(cfg, stages, templates, t_end, T, ids_l, st_l)
    seq = np.concatenate(ids_l) if ids_l else np.zeros(0, np.int64)
    start = np.concatenate(st_l).astype(np.int64) if st_l else np.zeros(0, np.int64)
    order = np.argsort(start, kind="stable")
    seq, start = seq[order], start[order]
    dur = np.array([t.duration for t in templates], np.int64)[seq] if len(seq) else np.zeros(0, np.int64)
    steps = steps_table(templates, seq, start, start + dur, S * T)
    elided = int(n - len(shown))
    _record_phases(schedule, tl, templates, n, shown, elided)
    pr = tables["programs"]
    pr["first_step"], pr["last_step"] = program_step_spans(pr["parent_id"], steps["prog_id"])
    base = {k: sg.base for k, sg in graphs.items()}
    mem = np.concatenate([a["mem"] for a in stages], axis=0)
    ltb, nal_rows = _liveness(base, kinds, stages, tables["liveness_steps"], T)
    info = Target(target1.spec, S).info()
    data = schema.ProfileData(
        target=info, run=_run_record(cfg, target1, schedule, fits, elided, n, op_counts), memory=mem, steps=steps,
        **step_tile_arrays(templates, seq, S * T),
        liveness_tile_bytes=ltb, extra=dict(base[kinds[0]].extra), **tables)
    rows = []
    for s, a in enumerate(stages):
        for name, dtype, per_tile in a.get("added_variables", ()):
            tb = np.zeros(S * T, np.int64)
            tb[s * T:(s + 1) * T] = per_tile
            rows.append(VariableRow(f"ipu{s}/{name}", dtype, "(weights)", tb))
    append_variables(data, rows + nal_rows)
    return data


def _liveness(base: dict, kinds: list, stages: list, ls, T: int) -> tuple[BlockRows, list[VariableRow]]:
    """The replica's not-always-live bytes per liveness step and tile, block-diagonal per IPU (each stage
    graph's rows on its own tiles; ``ls``, the joined liveness_steps table, gets its byte columns from it), and
    the variables behind the bytes the pipeline adds to them: each IPU's stash, live at every liveness step of
    its stage program, and its optimizer-state stream buffer, live at the IPU's last liveness step (the
    optimizer's, appended by :func:`_ipu_parts`), so that the variables live at a tile's peak add up to its
    not-always-live bytes in the memory array (``pipeline._ipu_stage``: max(stage peak + stash, stream buffer))."""
    S = len(stages)
    # each IPU's block as stored (uint32), its rows' figures from the block, the rows of the replica only formed
    # as the writer streams them (BlockRows): a dense array of (liveness steps x every tile of the replica) grew with
    # the square of the stages (315 MB as uint32, 630 MB as int64, of BERT-Large on 16 IPUs; its blocks are 20 MB)
    ltb = BlockRows((len(ls), S * T), [])
    stats = np.zeros((3, len(ls)), np.int64)  # total bytes, fullest tile, its bytes (0 for a row of no IPU)
    rows, r = [], 0
    for s, a in enumerate(stages):
        cur = np.asarray(base[kinds[s]].liveness_tile_bytes, np.int64)
        n = len(cur)
        name, dtype, stash = a.get("stash_variable", ("", "", None))
        if stash is not None and n and np.any(stash):
            cur = cur + np.asarray(stash, np.int64)[None, :]
            rows.append(_ipu_row(s, name, dtype, stash, S, T, [(r, r + n - 1)]))
        _put_block(ltb, stats, r, cur, s, S, T)
        r += n
        name, dtype, buf = a.get("stream_variable", ("", "", None))
        if _streams(a):
            _put_block(ltb, stats, r, np.asarray(buf, np.int64).reshape(1, -1), s, S, T)
            rows.append(_ipu_row(s, name, dtype, buf, S, T, [(r, r)]))
            r += 1
    ls["total_bytes"], ls["max_tile"], ls["max_tile_bytes"] = stats
    return ltb, rows


def _put_block(ltb: BlockRows, stats: np.ndarray, r: int, blk: np.ndarray, s: int, S: int, T: int) -> None:
    """Rows r.. of the liveness array: IPU s's tiles hold ``blk`` (int64, stored as uint32 as ``astype`` would),
    every other tile 0; with each row's total, first fullest tile and its bytes, as of the whole row."""
    n = len(blk)
    if not n or not T:
        return
    ltb.blocks.append((r, s * T, blk.astype(np.uint32)))
    lm, la = blk.max(axis=1), blk.argmax(axis=1)
    stats[0, r:r + n] = blk.sum(axis=1)
    stats[2, r:r + n] = np.maximum(lm, 0)  # (as the whole row's maximum with initial 0)
    if S == 1:
        stats[1, r:r + n] = la
        return
    # the other IPUs' tiles are 0: the first of the row's maxima is in the block when its maximum is above 0 (or is
    # 0 on IPU 0's block), else tile 0 (or tile T, the first 0 after IPU 0's block, for a block all below 0)
    zero_at = np.where(lm == 0, la, T) if s == 0 else 0
    stats[1, r:r + n] = np.where(lm > 0, s * T + la, zero_at)


def _streams(stage: dict) -> bool:
    """Whether an IPU holds an optimizer-state stream buffer (a liveness step of its own after the stage's)."""
    buf = stage.get("stream_variable", ("", "", None))[2]
    return buf is not None and bool(np.any(buf))


def _ipu_row(s: int, name: str, dtype: str, per_tile, S: int, T: int, spans: list) -> VariableRow:
    tb = np.zeros(S * T, np.int64)
    tb[s * T:(s + 1) * T] = per_tile
    return VariableRow(f"ipu{s}/{name}", dtype, "(per tile)", tb, spans)


def _ipu_parts(cfg, graphs: dict, kinds: list, stages: list, T: int) -> tuple[list[Part], dict]:
    """Each IPU's stage graph tables as one part of the profile (names under ``ipu<s>/``, the op totals per
    step), and run["op_counts"]: how often each op runs."""
    parts = []
    op_counts = {"calls_per_microbatch": [], "runs_per_call": [], "runs_per_step": []}
    for s in range(len(stages)):
        sg = graphs[kinds[s]]
        part = {n: _columns(sg.base, n) for n in PART_TABLES}
        n_att, n_ffn = stages[s]["blocks"]
        ops = part["ops"]
        names = [f"ipu{s}/{x}" for x in ops["name"].tolist()]
        # an op of the layer body runs once per attention / FFN block of the IPU per micro-batch, every op
        # G times per step
        att = np.array([x.startswith(f"ipu{s}/layer/attention/") for x in names], bool)
        ffn = np.array([x.startswith(f"ipu{s}/layer/") for x in names], bool) & ~att
        tpl_op = np.array([t.op_id for t in sg.c.templates], np.int64)
        # a serialised attention core's ops run once per block of every attention half
        serial = np.ones(len(ops), np.int64)
        for nm in ("layer_fwd_attcore", "layer_bwd_attcore"):
            ids = np.unique(tpl_op[sg.steps.get(nm, np.zeros(0, np.int64))])
            serial[ids[(ids >= 0) & (ids < len(ops))]] = int(getattr(cfg, "attention_serialisation", 1))
        mult = np.where(att, n_att, np.where(ffn, n_ffn, 1)) * serial * cfg.grad_accum
        part["ops"] = ops.replace(name=names, ipu=s, **{col: (ops[col] * mult).astype(np.int64) for col in OP_TOTALS})
        # runs of each op per call of its phase program: the phases whose steps contain it (2 when
        # recomputation replays a forward op before its gradient); run["op_counts"] records the counts
        rpc = np.zeros(len(ops), np.int64)
        for nm in PHASES:
            ids = np.unique(tpl_op[sg.steps.get(nm, np.zeros(0, np.int64))])
            rpc[ids[(ids >= 0) & (ids < len(ops))]] += 1
        rpc = np.maximum(rpc, 1)
        calls = (np.where(att, n_att, np.where(ffn, n_ffn, 1)) * serial).astype(np.int64)
        for key, v in (("calls_per_microbatch", calls), ("runs_per_call", rpc),
                       ("runs_per_step", calls * rpc * cfg.grad_accum)):
            op_counts[key] += [int(x) for x in v]
        pr = part["programs"]
        # the root program: the IPU's own stage program, named after the IPU (IPUs of one kind share a compiled
        # stage graph, but each runs its own copy: naming them all after the kind's first IPU read "stage1" on
        # IPUs 1-3 of a 4-stage BERT, issue 46)
        part["programs"] = pr.replace(name=np.where(pr["parent_id"] >= 0, pr["name"], f"ipu{s}/stage{s}"))
        part["variables"] = part["variables"].replace(
            name=[f"ipu{s}/{x}" for x in part["variables"]["name"].tolist()])
        if _streams(stages[s]):  # the optimizer's liveness step: the state stream buffer live, the stash empty
            lsr = part["liveness_steps"]
            part["liveness_steps"] = Columns.concat("liveness_steps", [lsr, Columns.typed("liveness_steps", [
                {"lstep": len(lsr), "prog_id": -1, "name": f"ipu{s}/optimizer: state streamed from DDR",
                 "total_bytes": 0, "max_tile_bytes": 0, "max_tile": 0}])])
        parts.append(Part(part, first_tile=s * T))
    return parts, op_counts


def _columns(data: schema.ProfileData, name: str) -> Columns:
    """Table ``name`` of a stage graph's profile as typed columns (a DataFrame a caller asked for, cast back)."""
    t = data.table(name)
    return t if isinstance(t, Columns) else Columns.typed(name, t)


def _ipu_templates(graphs: dict, kinds: list, schedule: dict, offsets: list, T: int) -> tuple[list, list]:
    """Every IPU's step templates, its ids shifted as its part's tables were, with the tensor-parallel
    all-reduce closing each phase; per IPU: phase -> template ids."""
    templates: list[StepTemplate] = []
    phase_tpl = []
    for s, off in enumerate(offsets):
        sg = graphs[kinds[s]]
        t_off = len(templates)
        templates += [_shift_template(t, s, T, off["ops"], off["programs"]) for t in sg.c.templates]
        phase_tpl.append({nm: sg.steps.get(nm, np.zeros(0, np.int64)) + t_off for nm in PHASES})
        tp = int(schedule.get("tensor_parallel", 1))
        for nm, d in (schedule.get("tensor_parallel_allreduce_cycles") or {}).items():
            if d and len(phase_tpl[-1][nm]):  # the phase's all-reduce over the tensor-parallel group, at its end
                ring = int(2 * (tp - 1) / tp * schedule["tensor_parallel_allreduce_bytes"])
                templates.append(_synthetic(K_XG, s, d, T, ring, ring))
                phase_tpl[-1][nm] = np.concatenate([phase_tpl[-1][nm], [len(templates) - 1]])
    return templates, phase_tpl


def _half(pt: dict, kind: str, h: str, serial: int) -> np.ndarray:
    """Template ids of one layer half of ``kind`` (fwd, recompute, bwd): an attention half with a serialised core
    is its parts in order, the core once per block."""
    if h != "att" or serial <= 1:
        return pt[f"layer_{kind}_{h}"]
    pre, core, post = (pt[f"layer_{kind}_{x}"] for x in ATT_PARTS[kind])
    return np.concatenate([pre, *([core] * serial), post])


def _lane_work(phase_tpl: list, stages: list, split: list, blocks: list, serial: int = 1) -> list:
    """Per IPU: (pipeline stage, forward template ids, backward template ids) of each stage it runs."""
    work = []
    pos = np.concatenate([[0], np.cumsum([2 * float(x) for x in split])]).astype(np.int64)
    V = len(split)
    for s in range(len(stages)):
        pt = phase_tpl[s]
        mine = []
        for v, _f, _b in stages[s]["vstages"]:
            halves = _halves(*blocks[v], start_att=pos[v] % 2 == 0)
            fw = ([pt["emb_fwd"]] if v == 0 else []) + [_half(pt, "fwd", h, serial) for h in halves]
            bw = ([pt["head"]] if v == V - 1 else []) + [
                np.concatenate([_half(pt, "recompute", h, serial), _half(pt, "bwd", h, serial)])
                for h in reversed(halves)]
            mine.append((v, fw, bw))
        work.append(mine)
    return work


def _cycle_steps(tl: SimpleNamespace, t: int) -> list:
    """The steps of pipeline cycle ``t``: (template ids, start cycles, IPU) per lane, then the inter-IPU copy."""
    pipe, starts = tl.pipe, tl.starts
    parts = []
    for s in range(tl.S):
        seq = []
        for v, fw, bw in tl.work[s]:
            if pipe["fwd_on"][t, v]:
                seq += fw
            if pipe["bwd_on"][t, v]:
                seq += bw
        ids = np.concatenate(seq) if seq else np.zeros(0, np.int64)
        if len(ids):
            st = starts[t] + np.concatenate([[0], np.cumsum(tl.dur_all[ids])[:-1]])
            parts.append((ids, st, np.full(len(ids), s)))
    if pipe["copy_cycles"]:
        parts.append((np.array([tl.xc_t]), np.array([starts[t] + tl.durs[t] - pipe["copy_cycles"]]), np.array([-1])))
    return parts


def _shown_cycles(tl: SimpleNamespace, n: int, T: int) -> np.ndarray:
    """The pipeline cycles the timeline draws: one steady-state cycle (it stands for all of them:
    profile/phases.py), then the fill and the drain, within the step budget."""
    pipe, S = tl.pipe, tl.S
    per_cycle = np.zeros(n, np.int64)
    for s in range(S):
        for v, fw, bw in tl.work[s]:
            per_cycle += pipe["fwd_on"][:, v] * sum(len(x) for x in fw) + pipe["bwd_on"][:, v] * sum(len(x) for x in bw)
    keep = np.zeros(n, bool)
    budget = max(1, MAX_PROFILE_CELLS // (S * T))
    order = list(range(n))
    Dp = int(pipe["stages"])  # pipeline stages (IPUs, plus one when the placement wraps)
    head, tail = order[: 2 * Dp - 1], order[max(2 * Dp - 1, n - (2 * Dp - 2)):]
    for t in head[-1:] + head[:-1] + tail[::-1]:
        if per_cycle[t] <= budget or not keep.any():
            keep[t] = True
            budget -= per_cycle[t]
    return np.nonzero(keep)[0]


def _update_steps(cfg, stages: list, templates: list, t_end: int, T: int, ids_l: list, st_l: list) -> None:
    """After the pipeline: all-reduce, optimizer, stream (per IPU, overlapping lanes), appended to the
    templates and to the steps (``ids_l``, ``st_l``)."""
    R = max(int(cfg.replicas), 1)
    wbytes = 2 if cfg.precision == "fp16" else 4
    for s, a in enumerate(stages):
        off = t_end
        # bytes each IPU moves: its off-chip optimizer state (its 1/R shard with RTS) in and out over DDR, and its
        # gradients in the ring all-reduce over the IPU-Links (2 (R-1)/R x the gradient bytes each way)
        streamed = int(a["bytes"]["optimizer_state_offchip"] / (R if cfg.rts else 1))
        ring = int(2 * (R - 1) / R * a["params"] * wbytes)
        for kind, d, b_in, b_out in ((K_STREAM, a["stream_cycles"] // 2, streamed, 0),
                                     (K_XG, a["allreduce_cycles"], ring, ring), (K_COMPUTE, a["optimizer_cycles"], 0, 0),
                                     (K_STREAM, a["stream_cycles"] - a["stream_cycles"] // 2, 0, streamed)):
            if d <= 0:
                continue
            templates.append(_synthetic(kind, s, d, T, b_in, b_out))
            ids_l.append(np.array([len(templates) - 1]))
            st_l.append(np.array([off]))
            off += d


def _record_phases(schedule: dict, tl: SimpleNamespace, templates: list, n: int, shown: np.ndarray,
                   elided: int) -> None:
    """The schedule's fill / drain cycles, busy IPU cycles per step kind of each pipeline phase and what the
    timeline shows of the pipeline."""
    durs, S = tl.durs, tl.S
    # wall cycles of the fill and the drain (the first and last 2D - 2 pipeline cycles): profile/phases.py
    Dp = int(tl.pipe["stages"])
    nfd = min(2 * Dp - 2, n)
    schedule["fill_cycles"] = int(durs[:nfd].sum())
    schedule["drain_cycles"] = int(durs[max(nfd, n - nfd):].sum()) if n > nfd else 0
    # busy IPU cycles per step kind of each pipeline phase (one run; a step on every IPU counts once per IPU),
    # from every pipeline cycle, drawn or not: the totals need them where the timeline leaves cycles out
    kind_of = np.array([tp.kind for tp in templates], np.int64)
    busy = {ph: np.zeros(len(schema.STEP_KINDS), np.int64) for ph in ("fill", "steady", "drain")}
    for t in [*range(nfd), *([nfd] if n > 2 * nfd else []), *range(max(nfd, n - nfd), n)]:
        ph = "fill" if t < nfd else "drain" if t >= max(nfd, n - nfd) else "steady"
        for ids, _st, ip in _cycle_steps(tl, t):
            np.add.at(busy[ph], kind_of[ids], tl.dur_all[ids] * np.where(np.asarray(ip) < 0, S, 1))
    schedule["phase_ipu_cycles"] = {ph: {k: int(v[i]) for i, k in enumerate(schema.STEP_KINDS)}
                                    for ph, v in busy.items()}
    schedule["profile_pipeline_cycles_shown"] = int(len(shown))
    schedule["profile_pipeline_cycles_elided"] = elided
    # micro-batches whose steady-state cycles are not drawn (each elided cycle = one micro-batch slot)
    schedule["elided_microbatches"] = elided


def _run_record(cfg, target1: Target, schedule: dict, fits: bool, elided: int, n: int, op_counts: dict) -> dict:
    """The profile's run dict (the caller adds the schedule, training state and out-of-memory tiles)."""
    total = int(schedule["step_cycles"])
    return {"model": cfg.model, "config": {}, "fits": bool(fits), "timing_only": True, "numeric_checks": {},
            "mode": "timing", "total_cycles": total, "seconds": total / target1.clock_hz,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "oom_tiles": [],
            "profile_note": (f"one replica of {cfg.replicas}" + (
                f" (one IPU of each stage's {cfg.tensor_parallel}-IPU tensor-parallel group drawn; the others run "
                f"the same shard)" if cfg.tensor_parallel > 1 else "")
                + (f"; {elided} of {n} pipeline cycles elided from the timeline" if elided else "")),
            # the ops table holds per-step totals of one replica (flops, bytes_* but min_bytes, cycles):
            # an op runs runs_per_step = calls_per_microbatch x runs_per_call x grad_accum times a step
            "op_counts": dict(op_counts, table="totals per step of one replica; min_bytes per run")}


def _shift_template(t: StepTemplate, s: int, T: int, op_off: int, prog_off: int) -> StepTemplate:
    tiles = (np.arange(T, dtype=np.int64) if t.tiles is None else np.asarray(t.tiles, np.int64)) + s * T
    return StepTemplate(kind=t.kind, prog_id=t.prog_id + prog_off if t.prog_id >= 0 else -1,
                        op_id=t.op_id + op_off if t.op_id >= 0 else -1, ipu=s, duration=t.duration, tiles=tiles,
                        cycles=t.cycles, bytes_in=t.bytes_in, bytes_out=t.bytes_out, busy_max=t.busy_max,
                        busy_sum=t.busy_sum, tiles_active=t.tiles_active, in_sum=t.in_sum, out_sum=t.out_sum)


def _synthetic(kind: int, ipu: int, dur: int, T: int, nbytes: int = 0, nbytes_out: int | None = None) -> StepTemplate:
    """A step the schedule adds (inter-IPU copy, all-reduce, optimizer, DDR stream): every tile of
    the IPU busy for the whole step (``ipu`` -1: all IPUs of the replica; tiles left empty).  ``nbytes`` /
    ``nbytes_out``: bytes the IPU's tiles receive / send in it (spread evenly; out = in unless given)."""
    n_out = nbytes if nbytes_out is None else nbytes_out
    if ipu < 0:
        z = np.zeros(0, np.uint32)
        return StepTemplate(kind=kind, prog_id=-1, op_id=-1, ipu=-1, duration=int(dur), tiles=np.zeros(0, np.int64),
                            cycles=z, bytes_in=z, bytes_out=z, busy_max=int(dur), in_sum=nbytes, out_sum=n_out)
    tiles = np.arange(T, dtype=np.int64) + ipu * T
    cyc = np.full(T, min(int(dur), 2**32 - 1), np.uint32)
    b_in = np.full(T, min(nbytes // max(T, 1), 2**32 - 1), np.uint32)
    b_out = np.full(T, min(n_out // max(T, 1), 2**32 - 1), np.uint32)
    return StepTemplate(kind=kind, prog_id=-1, op_id=-1, ipu=ipu, duration=int(dur), tiles=tiles, cycles=cyc,
                        bytes_in=b_in, bytes_out=b_out, busy_max=int(dur), busy_sum=int(dur) * T, tiles_active=T,
                        in_sum=int(b_in.sum()), out_sum=int(b_out.sum()))


def _halves(n_att: int, n_ffn: int, start_att: bool) -> list[str]:
    """The order of a stage's layer halves: alternating attention / FFN from the stage's start."""
    out, a, f, nxt = [], n_att, n_ffn, "att" if start_att else "ffn"
    while a or f:
        if (nxt == "att" and a) or not f:
            out.append("att")
            a -= 1
            nxt = "ffn"
        else:
            out.append("ffn")
            f -= 1
            nxt = "att"
    return out
