"""What a profile's ops table counts, and one model pass of it (pure: pandas / numpy, no Qt).

Two kinds of ops table exist:

* **whole-graph runs** (mlp, conv, gnn, resnet, one-graph BERT): every row is one op of ONE micro-batch of one
  replica, as the graph runs it.  Recomputation has its own rows (``.../recompute/...``) and the graph's
  optimizer-update ops are rows too.  ``table_runs`` = 1.
* **pipelined runs** (``emulator/models/pipeline.py``: BERT / GPT stage programs): a row is one op of one stage
  program, and its ``flops``, ``bytes_sram``, ``bytes_exchange``, ``bytes_ipu_link``, ``bytes_ddr`` and cycle
  columns are TOTALS over one training step of one replica; ``min_bytes`` is per run.  The op runs
  ``calls_per_microbatch`` times per micro-batch (the layers on its IPU for a layer-body op, else once),
  ``runs_per_call`` times per call (2 when recomputation re-runs a forward op before its gradient) and
  ``grad_accum`` micro-batches per step.  Profile format 2.1 writes these counts in ``run["op_counts"]``;
  for a 2.0 file they are reconstructed by the rule the 2.0 writer applied (``ipu{s}/layer/...`` rows x
  ``layer_split[s]`` x G, other rows x G; recomputed = ops under a ``layer_recompute`` program).

:func:`model_pass` turns either into the kernels a framework launches for one forward + backward pass of one
micro-batch of the whole model: per-run values, each op repeated once per call, the IPU's recomputation runs
and the optimizer-update ops left out (the optimizer step is added once per step by the GPU estimate).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from popvision_lite.analysis import tensor_parallel as tp
from popvision_lite.errors import ConfigError
from popvision_lite.profile.run_record import record_of
from popvision_lite.profile.schema import stored_table

# ops-table columns that a pipelined profile holds as per-step totals (min_bytes stays per run)
TOTAL_COLUMNS = ("flops", "bytes_sram", "bytes_exchange", "bytes_ipu_link", "bytes_ddr", "cycles",
                 "compute_cycles", "exchange_cycles", "sync_cycles", "stream_cycles")
COUNT_KEYS = ("runs_per_step", "calls_per_microbatch", "runs_per_call")
MAX_IPU_PREFIXES = 1024  # ipu<s>/ name prefixes looked for (run_record.MAX_IPUS): one pass over the names each
# kernel launches of one model pass (one forward + backward of one micro-batch): ~45 per transformer layer (183 for
# the 4 BERT layers of sample_profiles/bert_mini_4ipu_pipeline.pvl), so ~4,300 for GPT-3's 96; past 100,000 a file's
# counts are not a model (10^12 repeats asked model_pass for 10.7 PiB; a verdict costs ~0.1 ms per launch)
MAX_KERNELS = 100_000


@dataclass
class OpCounts:
    """Per-op execution counts of a profile's ops table (arrays aligned with ``profile.ops`` rows)."""

    table_runs: np.ndarray            # runs the row's flops / bytes_* / cycles total over (1 = one run)
    model_calls: np.ndarray           # runs of the op in one micro-batch of the MODEL (no recomputation)
    recompute_runs: np.ndarray        # the IPU's further runs per micro-batch that recompute the forward
    pipelined: bool
    grad_accum: int
    basis: str                        # where the counts came from
    notes: list = field(default_factory=list)

    @property
    def calls_per_microbatch(self) -> np.ndarray:   # model_calls under the name of its run["op_counts"] key
        return self.model_calls


def _programs(profile):
    try:
        pr = stored_table(profile, "programs")
    except Exception:  # noqa: BLE001 - a profile object without a programs table
        return None
    return pr if pr is not None and len(pr) else None


def _recomputed_op_ids(profile) -> set[int]:
    """op ids of the programs under a ``layer_recompute*`` phase (2.0 pipelined files: the replayed forward;
    ``layer_recompute`` or, with attention / FFN half-layer stages, ``layer_recompute_att`` / ``_ffn``)."""
    pr = _programs(profile)
    if pr is None:
        return set()
    is_root = pr["name"].astype(str).str.startswith("layer_recompute").to_numpy()
    if not is_root.any():
        return set()
    parent = dict(zip(pr["prog_id"].to_numpy().tolist(), pr["parent_id"].to_numpy().tolist(), strict=True))
    roots = set(pr.loc[is_root, "prog_id"].tolist())
    out = set()
    for pid, oid in zip(pr["prog_id"].to_numpy().tolist(), pr["op_id"].to_numpy().tolist(), strict=True):
        if oid < 0:
            continue
        q, seen = parent.get(pid, -1), 0
        while q >= 0 and seen < 10_000:
            if q in roots:
                out.add(int(oid))
                break
            q, seen = parent.get(q, -1), seen + 1
    return out


def _is_loss(name: str, typ: str) -> bool:
    parts = name.split("/")
    return typ in ("mse_grad", "loss_grad") or "loss" in parts[:-1] or parts[-1] in ("loss", "loss_grad")


def _whole_graph_runs(profile, n: int) -> tuple[np.ndarray, np.ndarray, str]:
    """(runs of each op per micro-batch, of which recomputation) of a whole-graph profile, from its programs
    table: a program replayed (an outlined ResNet block called again, or re-run to recompute it: a Sequence
    named ``<phase>/replay`` holding the same programs; a graph function called again, ``<op>/call/replay``)
    lists the op's programs once more, and a Repeat runs its body ``repeat`` times.  A replay of a forward phase
    (``...fwd.../replay``, or one under a ``/recompute/`` scope) after the loss is recomputation; a replay inside
    a replay counts as the outer one's."""
    ones = np.ones(n, np.float64)
    pr = _programs(profile)
    if pr is None or n == 0:
        return ones, np.zeros(n), "one run per op (no programs table)"
    pid = pr["prog_id"].to_numpy(np.int64)
    par = pr["parent_id"].to_numpy(np.int64)
    oid = pr["op_id"].to_numpy(np.int64)
    rep = pr["repeat"].to_numpy(np.int64) if "repeat" in pr.columns else np.ones(len(pr), np.int64)
    names = pr["name"].astype(str).to_numpy()
    if len(pid) and not (pid == np.arange(len(pid))).all():
        return ones, np.zeros(n), "one run per op (programs table not in id order)"
    is_replay = np.char.endswith(names.astype(str), "/replay")
    if not is_replay.any() and not (rep > 1).any():
        return ones, np.zeros(n), "one run per op (nothing replayed or repeated)"
    ops = stored_table(profile, "ops")
    loss_ids = {int(i) for i, nm, t in zip(ops["op_id"], ops["name"].astype(str), ops["type"].astype(str),
                                           strict=True) if _is_loss(nm, t)}
    loss_rows = np.nonzero(np.isin(oid, list(loss_ids)))[0] if loss_ids else np.zeros(0, np.int64)
    bwd_start = int(loss_rows.min()) if len(loss_rows) else len(pid)
    weight = np.ones(len(pid), np.float64)   # product of the Repeat counts above (and of) the row
    replay_root = np.full(len(pid), -1, np.int64)
    for i in range(len(pid)):                # parents come before their children
        p = par[i]
        if 0 <= p < i:
            weight[i] = weight[p] * max(int(rep[i]), 1)
            # the outermost replay: a graph function called inside a recomputed block is recomputation
            replay_root[i] = replay_root[p] if replay_root[p] >= 0 else (i if is_replay[i] else -1)
        else:
            weight[i] = max(int(rep[i]), 1)
            replay_root[i] = i if is_replay[i] else -1
    leaf = oid >= 0
    total = np.bincount(oid[leaf], weights=weight[leaf], minlength=n)[:n]
    orig = leaf & (replay_root < 0)
    base = np.bincount(oid[orig], weights=np.ones(int(orig.sum())), minlength=n)[:n]
    rec = leaf & (replay_root >= 0)
    if rec.any():
        roots = replay_root[rec]
        fwd_after_loss = np.array([("fwd" in names[r].lower() or "/recompute/" in names[r]) and r > bwd_start
                                   for r in roots])
        rec_rows = np.nonzero(rec)[0][fwd_after_loss]
    else:
        rec_rows = np.zeros(0, np.int64)
    rec_total = np.bincount(oid[rec_rows], weights=weight[rec_rows], minlength=n)[:n]
    with np.errstate(divide="ignore", invalid="ignore"):
        runs = np.where(base > 0, np.round(total / np.where(base > 0, base, 1)), 1.0)
        recomputed = np.where(base > 0, np.round(rec_total / np.where(base > 0, base, 1)), 0.0)
    return np.maximum(runs, 1.0), np.minimum(recomputed, np.maximum(runs, 1.0) - 1), \
        "runs per op from the programs table (replayed phases, Repeat counts)"


def op_counts(profile) -> OpCounts:
    """How often each row of ``profile.ops`` runs, and what its totals cover (see the module docstring)."""
    rec = record_of(profile)
    ops = stored_table(profile, "ops")
    n = len(ops)
    where = str(getattr(profile, "path", "profile"))
    sched = rec.schedule
    G = sched.grad_accum
    names = ops["name"].astype(str) if n else pd.Series([], dtype=object)
    if "op_counts" in rec:
        oc = rec.op_counts
        missing = [k for k in COUNT_KEYS if k not in oc]
        if missing:
            raise ConfigError(f"{where}: run['op_counts'] lacks {', '.join(missing)}")
        if len(oc.runs_per_step) != n:
            raise ConfigError(f"{where}: run['op_counts'] lists {len(oc.runs_per_step)} counts per key, but the ops "
                              f"table has {n} rows (one count per op)")
        per_step, calls, rpc = (np.asarray(getattr(oc, k), np.int64).reshape(n) for k in COUNT_KEYS)
        bad = np.nonzero(per_step != calls * rpc * G)[0]
        if len(bad):
            i = int(bad[0])
            raise ConfigError(f"{where}: run['op_counts'] row {i}: runs_per_step {per_step[i]} is not "
                              f"calls_per_microbatch {calls[i]} x runs_per_call {rpc[i]} x grad_accum {G}")
        return OpCounts(table_runs=np.maximum(per_step, 1), model_calls=calls,
                        recompute_runs=calls * np.maximum(rpc - 1, 0), pipelined=True, grad_accum=G,
                        basis="run['op_counts'] (written with the pipelined profile)")
    split = sched.layer_split
    if split and n and names.str.match(r"ipu\d+/").all():
        # a pipelined profile of format 2.0: the rule its writer applied (emulator/models/pipeline_profile.py::_ipu_parts):
        # attention / FFN blocks per IPU when the schedule lists them, else whole layers per IPU
        calls = np.ones(n, np.int64)
        per_ipu = sched.blocks_per_ipu
        if per_ipu:
            for s, blk in enumerate(per_ipu[:MAX_IPU_PREFIXES]):
                if len(blk) != 2:
                    raise ConfigError(f"{where}: run['schedule']['blocks_per_ipu'][{s}] = {list(blk)!r} is not "
                                      "(attention, FFN) block counts")
                att = names.str.startswith(f"ipu{s}/layer/attention/").to_numpy()
                ffn = names.str.startswith(f"ipu{s}/layer/").to_numpy() & ~att
                calls[att], calls[ffn] = blk[0], blk[1]
        else:
            for s, k in enumerate(split[:MAX_IPU_PREFIXES]):
                if k != int(k):  # a 2.0 writer placed whole layers only
                    raise ConfigError(f"{where}: run['schedule']['layer_split'][{s}] = {k!r} is not a whole layer "
                                      "count (a file of format 2.0 without op counts)")
                calls[names.str.startswith(f"ipu{s}/layer/").to_numpy()] = max(int(k), 1)
        rec = _recomputed_op_ids(profile)
        rpc = np.where(ops["op_id"].isin(rec).to_numpy(), 2, 1).astype(np.int64)
        notes = []
        if rec:
            notes.append(f"{len(rec)} forward ops recomputed before their gradients (found under the "
                         "'layer_recompute' programs)")
        return OpCounts(table_runs=np.maximum(calls * rpc * G, 1), model_calls=calls, recompute_runs=calls * (rpc - 1),
                        pipelined=True, grad_accum=G,
                        basis="reconstructed (pipelined profile of format 2.0: layer-body ops x layers (or attention "
                              "/ FFN blocks) x grad_accum, recomputation from the programs table)", notes=notes)
    runs, rec_runs, how = _whole_graph_runs(profile, n)
    # products of nested Repeat counts (each bounded by the reader) can pass any integer type: past MAX_KERNELS a
    # count says only "too many" (model_pass refuses it), so it is clipped before it becomes an int64
    runs, rec_runs = np.minimum(runs, MAX_KERNELS + 1), np.minimum(rec_runs, MAX_KERNELS + 1)
    named_rec = names.str.contains("/recompute/", regex=False).to_numpy() if n else np.zeros(0, bool)
    rec_runs = np.where(named_rec, runs, rec_runs)
    return OpCounts(table_runs=runs.astype(np.int64), model_calls=(runs - rec_runs).astype(np.int64),
                    recompute_runs=rec_runs.astype(np.int64), pipelined=False, grad_accum=G,
                    basis=f"whole-graph profile: the ops table is one micro-batch of one replica; {how}")


def per_run(ops: pd.DataFrame, counts: OpCounts) -> pd.DataFrame:
    """``ops`` with the total columns divided by the runs they cover (one run of each op)."""
    out = ops.copy()
    div = counts.table_runs.astype(float)
    for col in TOTAL_COLUMNS:
        if col in out.columns:
            out[col] = out[col].to_numpy(dtype=float) / div
    return out


@dataclass
class ModelPass:
    """The kernels of one forward + backward pass of one micro-batch of the whole model (one replica): a
    tensor-parallel run's shard is scaled back to the whole model (analysis/tensor_parallel.py)."""

    ops: pd.DataFrame            # one row per kernel launch; per-run flops / min_bytes; tensor_parallel.SPLIT_COLUMNS
    counts: OpCounts
    dropped_recompute: int       # IPU recomputation runs not carried over
    dropped_optimizer: int       # optimizer-update rows left out (the estimate adds one update per step)
    notes: list = field(default_factory=list)
    tensor_parallel: int = 1     # the IPU run's tensor-parallel degree (the shard the profile holds was x this)
    shard_split_params: float = 0.0   # parameters of the split weights in ONE shard (tensor_parallel.split_weight_params)


def model_pass(profile, keep_recompute: bool = False) -> ModelPass:
    """One forward + backward pass of one micro-batch of the model in ``profile`` as a kernel list."""
    from popvision_lite.analysis.gpu_estimate import op_class

    ops = stored_table(profile, "ops").reset_index(drop=True)
    c = op_counts(profile)
    one = per_run(ops, c)
    is_opt = np.array([op_class(t) == "optimizer" for t in ops["type"]], dtype=bool) if len(ops) else \
        np.zeros(0, bool)
    # a graph function's argument and result copies (emulator/ops/graph_function.py) are the IPU framework's
    # way of calling shared code; a GPU framework launches the op's own kernels only
    is_call = np.array([str(t) == "call" for t in ops["type"]], dtype=bool) if len(ops) else np.zeros(0, bool)
    keep = ~is_opt & ~is_call
    reps = c.model_calls + (c.recompute_runs if keep_recompute else 0)
    launches = int(np.asarray(reps, dtype=object)[keep].sum()) if len(ops) else 0  # Python ints: no wrap-around
    if launches > MAX_KERNELS:
        raise ConfigError(f"{getattr(profile, 'path', 'profile')}: the ops table's counts make {launches:,} kernel "
                          f"launches for one model pass (at most {MAX_KERNELS:,}); run['op_counts'] or the "
                          "programs' repeat counts are not those of a model")
    rec_runs = 0 if keep_recompute else int(c.recompute_runs[keep].sum())
    one = one[keep]
    reps = np.asarray(reps)[keep]
    kernels = one.loc[one.index.repeat(reps)].reset_index(drop=True)
    notes = list(c.notes)
    notes.append(f"ops table: {c.basis}")
    if is_call.any():
        notes.append(f"{int(is_call.sum())} graph-function calls (their argument and result copies) are the IPU "
                     "framework's and not carried to the GPU")
    if rec_runs:
        notes.append(f"the IPU's recomputation ({rec_runs} op runs per micro-batch) is not carried to the GPU "
                     "(forward once, activations kept; the memory fit counts them)")
    rec = record_of(profile)
    t = rec.schedule.tensor_parallel
    cfg = rec.config
    shard = tp.annotate(kernels, cfg, t)
    kernels, tp_notes = tp.whole_model(kernels, cfg, t)
    return ModelPass(ops=kernels, counts=c, dropped_recompute=rec_runs, dropped_optimizer=int(is_opt.sum()),
                     notes=notes + tp_notes, tensor_parallel=t, shard_split_params=tp.split_weight_params(shard, cfg, t))


# IPU ops a GPU framework does not launch as kernels of their own (see gpu_lowering)
WINDOW_GATHER_TYPES = ("im2col",)
# the plan text of the emulator's window ops (emulator/ops/norm_pool.py im2col / pool): R windows of k rows of C
_WINDOWS = re.compile(r"^\s*(\d+) windows of (\d+) rows of (\d+)")
# one attention head's forward and backward as the emulator's transformer writes them (models/transformer.py)
ATTENTION_FWD = ("qk_matmul", "scale", "causal_mask", "softmax", "pv_matmul")
ATTENTION_BWD = ("pv_matmul_dp", "pv_matmul_dv", "softmax_bwd", "scale_bwd", "qk_matmul_dq", "qk_matmul_dk")
# precisions a fused attention kernel serves (FlashAttention-2 and PyTorch's flash SDPA backend: fp16 / bf16;
# an FP8 run keeps attention in 16-bit)
FUSED_ATTENTION_PRECISIONS = ("fp16", "bf16", "fp8")


def _plan_windows(plan) -> tuple[int, int, int] | None:
    """(R, k, C) of a window op's plan text ("R windows of k rows of C"), None when it is not one."""
    m = _WINDOWS.match(str(plan or ""))
    return None if m is None else tuple(int(v) for v in m.groups())


def _elem_bytes(precision) -> int:
    return 4 if str(precision).lower() in ("fp32", "float32") else 2


def _implicit_gemm(out: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Convolution bytes as cuDNN's implicit GEMMs move them (the input read once, no window rows in memory):
    (new ``min_bytes``, rows to drop, notes).

    * ``<conv>/im2col`` reads X and writes the R x k x C window rows Wn (min_bytes X + Wn); ``<conv>/matmul``
      and the backward ``<head>/bwd/<rest>/dw_matmul`` (weight gradient) read Wn: on the GPU they read X.
    * ``<conv>/dx_im2col`` + ``<conv>/dx_matmul`` (stride 1 data gradient) likewise read dY once.
    * a strided convolution's ``<conv>/col2im`` (a ``sum_pool`` of R dX rows of C: the IPU's scatter-add of
      ``dx_matmul``'s window rows dcols into dX, min_bytes dcols + dX) is part of cuDNN's dgrad kernel:
      ``dx_matmul`` writes dX instead of dcols, and col2im is no kernel of its own."""
    name = out["name"].astype(str)
    typ = out["type"].astype(str).str.lower()
    plans = out["plan"] if "plan" in out.columns else pd.Series([None] * len(out), index=out.index)
    nbytes = out["min_bytes"].to_numpy(dtype=float).copy()
    drop = np.zeros(len(out), dtype=bool)
    delta: dict[str, float] = {}          # GEMM name -> bytes to add
    for i in np.flatnonzero(typ.isin(WINDOW_GATHER_TYPES).to_numpy()):
        w = _plan_windows(plans.iat[i])
        n = name.iat[i]
        if w is None:
            continue
        wn = float(np.prod(w)) * _elem_bytes(out["precision"].iat[i])
        if wn > nbytes[i]:
            continue
        d = (nbytes[i] - wn) - wn            # X instead of Wn
        if n.endswith("/dx_im2col"):
            delta[n[:-len("dx_im2col")] + "dx_matmul"] = d
        elif n.endswith("/im2col"):
            conv = n[:-len("/im2col")]
            delta[conv + "/matmul"] = d
            head, sep, rest = conv.partition("/")
            if sep:
                delta[f"{head}/bwd/{rest}/dw_matmul"] = d
    for i in np.flatnonzero(((typ == "sum_pool") & name.str.endswith("/col2im")).to_numpy()):
        w = _plan_windows(plans.iat[i])
        mm = name.iat[i][:-len("col2im")] + "dx_matmul"
        if w is None or not (name == mm).any():
            continue
        dx = float(w[0] * w[2]) * _elem_bytes(out["precision"].iat[i])
        if dx > nbytes[i]:
            continue
        delta[mm] = delta.get(mm, 0.0) + dx - (nbytes[i] - dx)   # dX instead of dcols
        drop[i] = True
    changed = 0
    for mm, d in delta.items():
        sel = (name == mm).to_numpy()
        changed += int(sel.any())
        nbytes[sel] = np.maximum(nbytes[sel] + d, 0.0)
    notes = []
    if changed:
        notes.append(f"{changed} convolution GEMMs costed as cuDNN's implicit GEMMs (cuDNN Developer Guide, "
                     "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM): input and dY read once, not the IPU's window rows"
                     + (f"; {int(drop.sum())} col2im kernels part of their dgrad GEMMs" if drop.any() else ""))
    return nbytes, drop, notes


def _mean(out: pd.DataFrame, mask, col: str) -> float:
    """Mean of ``col`` over the rows ``mask`` selects (0 when none)."""
    if mask is None or not np.any(mask):
        return 0.0
    return float(out.loc[mask, col].to_numpy(dtype=float).mean())


def _fuse_attention(out: pd.DataFrame, kernel: str = "flash") -> tuple[pd.DataFrame, list[str]]:
    """Each attention's score-matrix kernels as one fused kernel forward and one backward.

    ``kernel="flash"``: as FlashAttention runs them (Dao et al., NeurIPS 2022, "FlashAttention: fast and
    memory-efficient exact attention with IO-awareness", Algorithms 1 and 4; FlashAttention-2, Dao 2023; PyTorch's
    ``scaled_dot_product_attention`` flash backend): the scores and probabilities stay in the SM's shared memory
    and registers.

    * forward (``qk_matmul``, ``scale``, ``causal_mask``, ``softmax``, ``pv_matmul`` of one prefix): HBM traffic
      Q, K, V and O only = the two products' bytes less the score matrix S each of them moves (S = half the
      softmax's read + write); FLOPs those of the rows it replaces (the scale and softmax arithmetic runs in
      the kernel, costed with the products at the tensor rate: a few per cent of them).
    * backward (``pv_matmul_dp``, ``pv_matmul_dv``, ``softmax_bwd``, ``scale_bwd``, ``qk_matmul_dq``,
      ``qk_matmul_dk``): reads Q, K, V, O, dO and writes dQ, dK, dV = the four products' bytes less the four
      score-sized operands; FLOPs the rows' plus Q.K^T once more (the kernel recomputes S from Q and K
      and the saved softmax statistics instead of reading P: Algorithm 4).

    ``kernel="fmha"``: as apex's fused multi-head attention runs them (``apex/contrib/fmha``, the ``--unpad_fmha``
    / ``--pad_fmha`` kernels of NVIDIA's MLPerf BERT): the forward also writes the probabilities P (``S_dmask``,
    saved for the backward: one score-sized write); the backward reads P, writes dS over it and reads dS back
    (``compute_dv_1xN`` then ``compute_dq_dk_1xN``: three score-sized transfers) and recomputes nothing.

    The kernels keep the IPU's rows' counts (one fused row per run of the prefix's ``qk_matmul`` /
    ``qk_matmul_dq``), type ``attention`` (``gpu_estimate.op_kind``), 16-bit; a prefix whose rows do not all
    have the same count is left as it is."""
    name = out["name"].astype(str)
    parts = name.str.rpartition("attention/")
    prefix, leaf = parts[0] + parts[1], parts[2]
    is_att = parts[1] != ""
    drop = np.zeros(len(out), dtype=bool)
    new_rows = []
    fused = {"fwd": 0, "bwd": 0}
    for pre in pd.unique(prefix[is_att]):
        here = (prefix == pre).to_numpy() & is_att.to_numpy()
        for direction, leaves, first in (("fwd", ATTENTION_FWD, "qk_matmul"), ("bwd", ATTENTION_BWD, "qk_matmul_dq")):
            sel = {lf: here & (leaf == lf).to_numpy() for lf in leaves}
            counts = {lf: int(v.sum()) for lf, v in sel.items() if v.any()}
            need = (("qk_matmul", "softmax", "pv_matmul") if direction == "fwd"
                    else ("pv_matmul_dp", "pv_matmul_dv", "softmax_bwd", "qk_matmul_dq", "qk_matmul_dk"))
            if not all(lf in counts for lf in need) or len(set(counts.values())) != 1:
                continue
            prec = str(out.loc[sel[first], "precision"].iloc[0]).lower()
            if prec not in FUSED_ATTENTION_PRECISIONS:
                continue
            runs = counts[first]

            def per_run(lf, col, sel=sel):
                return _mean(out, sel.get(lf), col)

            s_bytes = per_run("softmax" if direction == "fwd" else "softmax_bwd", "min_bytes") / \
                (2.0 if direction == "fwd" else 3.0)   # softmax: read S, write P; softmax_bwd: read P, dP, write dS
            # the heads' shape from the forward rows: S = BH x L^2, Q.K^T = 2 BH L^2 d, Q and K = BH x L x d each
            eb = _elem_bytes(prec)
            s_el = s_bytes / eb
            qk_fwd = here & (leaf == "qk_matmul").to_numpy()
            qk_f = _mean(out, qk_fwd, "flops")
            q_el = (_mean(out, qk_fwd, "min_bytes") - s_bytes) / (2 * eb) if qk_fwd.any() else 0.0
            d = qk_f / (2 * s_el) if s_el > 0 else 0.0
            seq = s_el * d / q_el if q_el > 0 else 0.0
            bh = s_el / seq ** 2 if seq > 0 else 0.0
            kept = 0.0 if kernel == "flash" else (1.0 if direction == "fwd" else 3.0)  # score-sized HBM transfers
            if direction == "fwd":
                flops = sum(per_run(lf, "flops") for lf in ATTENTION_FWD)
                nbytes = per_run("qk_matmul", "min_bytes") + per_run("pv_matmul", "min_bytes") - (2 - kept) * s_bytes
            else:
                mats = ("pv_matmul_dp", "pv_matmul_dv", "qk_matmul_dq", "qk_matmul_dk")
                recompute = 0.0 if kernel != "flash" else qk_f if qk_fwd.any() else per_run("qk_matmul_dq", "flops")
                flops = sum(per_run(lf, "flops") for lf in ATTENTION_BWD) + recompute
                nbytes = sum(per_run(m, "min_bytes") for m in mats) - (4 - kept) * s_bytes
            if nbytes <= 0:
                continue
            for lf in sel.values():
                drop |= lf
            row = out.loc[sel[first]].iloc[0].copy()
            row["name"] = pre + ("fused_attention" if direction == "fwd" else "fused_attention_bwd")
            row["type"] = "attention"
            row["flops"], row["min_bytes"], row["kernels"] = flops, nbytes, 1.0
            row["precision"] = "bf16" if prec == "bf16" else "fp16"
            # output tiles of L query rows x d per head, reducing over L keys (FlashAttention's parallelism:
            # batch x heads x query blocks); without a consistent shape the estimate solves an equivalent one
            ok = d > 0 and seq > 0 and bh > 0
            row["m"], row["n"], row["k"], row["batch"] = (seq, d, seq, bh) if ok else (np.nan,) * 4
            new_rows += [row] * runs
            fused[direction] += runs
    if not new_rows:
        return out, []
    res = pd.concat([out[~drop], pd.DataFrame(new_rows)], ignore_index=True)
    how = (f"as FlashAttention runs it (Dao et al. 2022): {fused['fwd']} forward and {fused['bwd']} backward "
           "kernels, scores kept on chip (HBM traffic Q, K, V, O, dO and their gradients only; the backward "
           "recomputes Q.K^T)") if kernel == "flash" else \
        (f"as apex's fused multi-head attention runs it (NVIDIA's MLPerf BERT): {fused['fwd']} forward and "
         f"{fused['bwd']} backward kernels; the probabilities written once for the backward, which reads them and "
         "writes and re-reads their gradient")
    return res, [f"attention fused on the GPU {how}"]


ATTENTION_KERNELS = ("flash", "fmha")


def _fuse_epilogues(out: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """A transformer layer's elementwise kernels that a GPU framework runs inside its GEMMs (Transformer Engine's
    ``LayerNormMLP`` / Megatron-LM's bias-GELU fusion and cuBLASLt GELU epilogues; NVIDIA's MLPerf BERT
    ``--fused_gemm_gelu``; one fused Q, K, V weight in Megatron-LM and NVIDIA's BERT):

    * the FFN's GELU forward runs in ``matmul1``'s epilogue, which also writes the pre-activation the backward
      needs (the GEMM's bytes + one activation); its kernel goes;
    * the GELU backward runs in ``matmul2_dx``'s epilogue, which reads that pre-activation (+ one activation);
    * the three Q, K, V data gradients are one GEMM over the fused weight, accumulating in its output: the two
      adds that summed them (``dx_add_q`` / ``_k`` / ``_v``, the emulator's names) are no kernels."""
    name = out["name"].astype(str)
    parts = name.str.rpartition("/")
    scope, leaf = parts[0], parts[2]
    drop = np.zeros(len(out), dtype=bool)
    nbytes = out["min_bytes"].to_numpy(dtype=float).copy()
    fused = {"gelu": 0, "gelu_bwd": 0, "add": 0}
    for i in np.flatnonzero((leaf == "gelu").to_numpy() & scope.str.endswith("/ffn").to_numpy()):
        mm = ((scope == scope.iat[i]) & (leaf == "matmul1")).to_numpy()
        if mm.any():
            nbytes[mm] += nbytes[i] / 2.0 / mm.sum()     # gelu reads the pre-activation, writes the output
            drop[i] = True
            fused["gelu"] += 1
    for i in np.flatnonzero((leaf == "gelu_bwd").to_numpy() & scope.str.endswith("/ffn").to_numpy()):
        mm = ((scope == scope.iat[i]) & (leaf == "matmul2_dx")).to_numpy()
        if mm.any():
            nbytes[mm] += nbytes[i] / 3.0 / mm.sum()     # gelu_bwd reads x and dy, writes dx
            drop[i] = True
            fused["gelu_bwd"] += 1
    adds = (leaf.str.match(r"^dx_add_[qkv]$") & scope.str.endswith("/attention")).to_numpy()
    drop |= adds
    fused["add"] = int(adds.sum())
    if not drop.any():
        return out, []
    res = out.assign(min_bytes=nbytes)[~drop].reset_index(drop=True)
    return res, [f"GEMM epilogues fused on the GPU (Transformer Engine / Megatron-LM bias-GELU, NVIDIA's MLPerf BERT "
                 f"--fused_gemm_gelu, one fused Q/K/V weight): {fused['gelu']} GELU and {fused['gelu_bwd']} GELU-"
                 f"gradient kernels run inside their FFN GEMMs, {fused['add']} Q/K/V gradient adds are none"]


def gpu_lowering(kernels: pd.DataFrame, fused_attention: str | None = None,
                 fused_epilogues: bool = False) -> tuple[pd.DataFrame, list[str]]:
    """The IPU's kernel list as a GPU framework runs it, for the GPU estimate (the IPU's own views keep the
    IPU's list):

    * **window gathers** (``im2col``: the IPU materialises each convolution's windows by exchange) are not
      kernels on a GPU: cuDNN's implicit-GEMM convolutions read the windows from the input inside the GEMM
      (cuDNN Developer Guide, ``CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM``), and the convolution GEMMs move the
      input once instead of the window rows (:func:`_implicit_gemm`; a strided convolution's ``col2im`` joins
      its dgrad GEMM).
    * **batch norm + ReLU** run as one fused kernel (cuDNN's fused NHWC batch norm with activation, as NVIDIA's
      MXNet ResNet-50 runs it): a ``relu`` named ``<bn>_relu`` after the batch norm ``<bn>`` is folded into it
      (its read and write saved); a ``relu_bwd`` named ``<bn>_relu_bwd`` beside ``<bn>_bwd`` becomes part of that
      kernel, keeping a third of its bytes (the saved activation it reads) and no launch of its own.  The
      residual's ReLU (``<block>/relu`` after the add ``<block>/residual``, and its ``<block>/bwd/relu_bwd``)
      likewise joins the add (cuDNN's batch norm + add + ReLU kernel).
    * ``fused_attention`` (``"flash"`` or ``"fmha"``): each attention's score kernels run as one fused kernel
      forward and one backward (:func:`_fuse_attention`): ``"flash"`` as PyTorch's ``scaled_dot_product_attention``
      runs 16-bit attention (FlashAttention), ``"fmha"`` as NVIDIA's MLPerf BERT runs it (apex's fused MHA).
    * ``fused_epilogues``: a transformer's GELU and Q/K/V gradient adds inside its GEMMs (:func:`_fuse_epilogues`),
      as Transformer Engine / Megatron-LM and NVIDIA's MLPerf BERT run them.

    Returns the lowered list (with a ``kernels`` column: launches per row) and the notes saying what changed."""
    if not len(kernels):
        return kernels, []
    out = kernels.reset_index(drop=True).copy()
    conv_bytes, col2im, notes = _implicit_gemm(out)
    out["min_bytes"] = conv_bytes
    out = out[~col2im].reset_index(drop=True)
    name = out["name"].astype(str)
    typ = out["type"].astype(str).str.lower()
    bn = set(name[typ == "batch_norm"])
    bn_bwd = set(name[typ == "batch_norm_bwd"])
    gather = typ.isin(WINDOW_GATHER_TYPES).to_numpy()
    residual = {n[:-len("/residual")] for n in name[typ == "add"] if n.endswith("/residual")}
    fwd = ((typ == "relu") & name.map(
        lambda n: (n.endswith("_relu") and n[:-len("_relu")] in bn)
        or (n.endswith("/relu") and n[:-len("/relu")] in residual))).to_numpy()
    bwd = ((typ == "relu_bwd") & name.map(
        lambda n: (n.endswith("_relu_bwd") and n[:-len("_relu_bwd")] + "_bwd" in bn_bwd)
        or (n.endswith("/bwd/relu_bwd") and n[:-len("/bwd/relu_bwd")] in residual))).to_numpy()
    if gather.any():
        notes.append(f"{int(gather.sum())} window-gather kernels ({', '.join(WINDOW_GATHER_TYPES)}) left out of the "
                     "GPU pass: cuDNN's implicit-GEMM convolutions gather windows inside the GEMM")
    if fwd.any() or bwd.any():
        notes.append(f"batch norm (+ add) + ReLU fused on the GPU (cuDNN fused batch norm with activation): "
                     f"{int(fwd.sum())} forward and {int(bwd.sum())} backward ReLU kernels folded into their "
                     "batch-norm or residual-add kernels")
    kern = out["kernels"].to_numpy(dtype=float) if "kernels" in out.columns else np.ones(len(out))
    out["kernels"] = np.where(bwd, 0.0, kern)
    out["min_bytes"] = np.where(bwd, out["min_bytes"].to_numpy(dtype=float) / 3.0, out["min_bytes"])
    out = out[~(gather | fwd)].reset_index(drop=True)
    if fused_attention is not None:
        if fused_attention not in ATTENTION_KERNELS:
            raise ConfigError(f"fused attention kernel {fused_attention!r}: choose {' or '.join(ATTENTION_KERNELS)}")
        out, att_notes = _fuse_attention(out, fused_attention)
        notes += att_notes
    if fused_epilogues:
        out, epi_notes = _fuse_epilogues(out)
        notes += epi_notes
    return out, notes


def chips(profile) -> tuple[int, str]:
    """(IPUs the run uses, how that was counted): replicas x IPUs of one replica (the target: one per pipeline
    stage) x the tensor-parallel group each stage's IPU stands for (run_totals.RunTotals.num_ipus counts the same)."""
    rec = record_of(profile)
    per = int(profile.target.num_ipus)
    r = rec.replicas_of_run
    t = rec.schedule.tensor_parallel
    group = f" x {t} tensor-parallel IPUs" if t > 1 else ""
    if r == 1 and t == 1:
        return per, f"{per} IPU(s) of one replica"
    return r * per * t, f"{r} replica(s) x {per} IPU(s) per replica{group}"


def params(profile, mp: ModelPass | None = None) -> tuple[float, str]:
    """(trained parameters of one replica's WHOLE model, source): ``run["training_state"]`` (params per IPU of one
    replica, written by runs with a training schedule) when present, else the optimizer-update ops.  A
    tensor-parallel run's IPUs hold one shard each: the split weights of the shard (``mp``, its model pass) count
    t times, the replicated ones (norms, biases of the row-parallel GEMMs, position embedding) once."""
    from popvision_lite.analysis.gpu_estimate import params_from_ops

    p, src = _shard_params(profile, params_from_ops)
    t = record_of(profile).schedule.tensor_parallel
    if t <= 1:
        return p, src
    mp = mp if mp is not None else model_pass(profile)
    split = mp.shard_split_params
    return p + (t - 1) * split, (f"{src}: one tensor-parallel shard, its split weights ({split / 1e6:,.1f} M) x {t}, "
                                 "the rest once")


def _shard_params(profile, params_from_ops) -> tuple[float, str]:
    """(parameters the profile's IPUs of one replica hold, source)."""
    ts = record_of(profile).training_state
    if ts:
        total = float(sum(t.params for t in ts))
        if total > 0:
            return total, f"run training_state ({len(ts)} IPU(s) of one replica)"
    return params_from_ops(stored_table(profile, "ops")), "optimizer-update ops of the graph"
