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

import ast
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from popvision_lite.errors import ConfigError

# ops-table columns that a pipelined profile holds as per-step totals (min_bytes stays per run)
TOTAL_COLUMNS = ("flops", "bytes_sram", "bytes_exchange", "bytes_ipu_link", "bytes_ddr", "cycles",
                 "compute_cycles", "exchange_cycles", "sync_cycles", "stream_cycles")
COUNT_KEYS = ("runs_per_step", "calls_per_microbatch", "runs_per_call")
MAX_COUNT = 10 ** 9  # a count above this is not a real schedule (grad_accum x layers x 2 is far below)


def _as_dict(v) -> dict:
    if isinstance(v, str):
        try:
            v = ast.literal_eval(v)
        except (ValueError, SyntaxError):
            return {}
    return v if isinstance(v, dict) else {}


def schedule_of(run: dict) -> dict:
    return _as_dict(run.get("schedule"))


def config_of(run: dict) -> dict:
    return _as_dict(run.get("config"))


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


def _int_list(values, n: int, key: str, where: str) -> np.ndarray:
    if not isinstance(values, list | tuple) or len(values) != n:
        got = len(values) if isinstance(values, list | tuple) else type(values).__name__
        raise ConfigError(f"{where}: run['op_counts']['{key}'] must list one count per op ({n}), got {got}")
    out = np.zeros(n, np.int64)
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, int | float) or v != int(v) or not 0 <= v <= MAX_COUNT:
            raise ConfigError(f"{where}: run['op_counts']['{key}'][{i}] = {v!r}: must be a whole number "
                              f"0..{MAX_COUNT:,}")
        out[i] = int(v)
    return out


def _programs(profile):
    try:
        pr = profile.programs
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
    named ``<phase>/replay`` holding the same programs) lists the op's programs once more, and a Repeat runs its
    body ``repeat`` times.  A replay of a forward phase (``...fwd.../replay``) after the loss is recomputation."""
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
    ops = profile.ops
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
            replay_root[i] = i if is_replay[i] else replay_root[p]
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
        fwd_after_loss = np.array([("fwd" in names[r].lower()) and r > bwd_start for r in roots])
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
    run = dict(getattr(profile, "run", None) or {})
    ops = profile.ops
    n = len(ops)
    where = str(getattr(profile, "path", "profile"))
    sched = schedule_of(run)
    G = sched.get("grad_accum", 1)
    G = int(G) if isinstance(G, int | float) and not isinstance(G, bool) and 1 <= G <= MAX_COUNT else 1
    names = ops["name"].astype(str) if n else pd.Series([], dtype=object)
    oc = run.get("op_counts")
    if oc is not None:
        oc = _as_dict(oc)
        missing = [k for k in COUNT_KEYS if k not in oc]
        if missing:
            raise ConfigError(f"{where}: run['op_counts'] lacks {', '.join(missing)}")
        per_step, calls, rpc = (_int_list(oc[k], n, k, where) for k in COUNT_KEYS)
        bad = np.nonzero(per_step != calls * rpc * G)[0]
        if len(bad):
            i = int(bad[0])
            raise ConfigError(f"{where}: run['op_counts'] row {i}: runs_per_step {per_step[i]} is not "
                              f"calls_per_microbatch {calls[i]} x runs_per_call {rpc[i]} x grad_accum {G}")
        return OpCounts(table_runs=np.maximum(per_step, 1), model_calls=calls,
                        recompute_runs=calls * np.maximum(rpc - 1, 0), pipelined=True, grad_accum=G,
                        basis="run['op_counts'] (written with the pipelined profile)")
    split = sched.get("layer_split")
    if isinstance(split, list) and split and n and names.str.match(r"ipu\d+/").all():
        # a pipelined profile of format 2.0: the rule its writer applied (emulator/models/pipeline_profile.py::_ipu_parts):
        # attention / FFN blocks per IPU when the schedule lists them, else whole layers per IPU
        calls = np.ones(n, np.int64)
        per_ipu = sched.get("blocks_per_ipu")
        if isinstance(per_ipu, list) and per_ipu:
            for s, blk in enumerate(per_ipu):
                ok = isinstance(blk, list | tuple) and len(blk) == 2 and all(
                    isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_COUNT for v in blk)
                if not ok:
                    raise ConfigError(f"{where}: schedule blocks_per_ipu[{s}] = {blk!r} is not (attention, FFN) "
                                      "block counts")
                att = names.str.startswith(f"ipu{s}/layer/attention/").to_numpy()
                ffn = names.str.startswith(f"ipu{s}/layer/").to_numpy() & ~att
                calls[att], calls[ffn] = blk[0], blk[1]
        else:
            for s, k in enumerate(split):
                if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k <= MAX_COUNT:
                    raise ConfigError(f"{where}: schedule layer_split[{s}] = {k!r} is not a layer count")
                calls[names.str.startswith(f"ipu{s}/layer/").to_numpy()] = max(k, 1)
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
    """The kernels of one forward + backward pass of one micro-batch of the whole model (one replica)."""

    ops: pd.DataFrame            # one row per kernel launch; per-run flops / min_bytes
    counts: OpCounts
    dropped_recompute: int       # IPU recomputation runs not carried over
    dropped_optimizer: int       # optimizer-update rows left out (the estimate adds one update per step)
    notes: list = field(default_factory=list)


def model_pass(profile, keep_recompute: bool = False) -> ModelPass:
    """One forward + backward pass of one micro-batch of the model in ``profile`` as a kernel list."""
    from popvision_lite.analysis.gpu_estimate import op_class

    ops = profile.ops.reset_index(drop=True)
    c = op_counts(profile)
    one = per_run(ops, c)
    is_opt = np.array([op_class(t) == "optimizer" for t in ops["type"]], dtype=bool) if len(ops) else \
        np.zeros(0, bool)
    keep = ~is_opt
    reps = c.model_calls + (c.recompute_runs if keep_recompute else 0)
    rec_runs = 0 if keep_recompute else int(c.recompute_runs[keep].sum())
    one = one[keep]
    reps = np.asarray(reps)[keep]
    kernels = one.loc[one.index.repeat(reps)].reset_index(drop=True)
    notes = list(c.notes)
    notes.append(f"ops table: {c.basis}")
    if rec_runs:
        notes.append(f"the IPU's recomputation ({rec_runs} op runs per micro-batch) is not carried to the GPU "
                     "(forward once, activations kept; the memory fit counts them)")
    return ModelPass(ops=kernels, counts=c, dropped_recompute=rec_runs, dropped_optimizer=int(is_opt.sum()),
                     notes=notes)


# IPU ops a GPU framework does not launch as kernels of their own (see gpu_lowering)
WINDOW_GATHER_TYPES = ("im2col",)


def gpu_lowering(kernels: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The IPU's kernel list as a GPU framework runs it, for the GPU estimate (the IPU's own views keep the
    IPU's list):

    * **window gathers** (``im2col``: the IPU materialises each convolution's windows by exchange) are not
      kernels on a GPU: cuDNN's implicit-GEMM convolutions read the windows from the input inside the GEMM
      (cuDNN Developer Guide, ``CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM``); the convolution's own bytes keep
      counting the windows (conservative).
    * **batch norm + ReLU** run as one fused kernel (cuDNN's fused NHWC batch norm with activation, as NVIDIA's
      MXNet ResNet-50 runs it): a ``relu`` named ``<bn>_relu`` after the batch norm ``<bn>`` is folded into it
      (its read and write saved); a ``relu_bwd`` named ``<bn>_relu_bwd`` beside ``<bn>_bwd`` becomes part of that
      kernel, keeping a third of its bytes (the saved activation it reads) and no launch of its own.  The
      residual's ReLU (``<block>/relu`` after the add ``<block>/residual``, and its ``<block>/bwd/relu_bwd``)
      likewise joins the add (cuDNN's batch norm + add + ReLU kernel).

    Returns the lowered list (with a ``kernels`` column: launches per row) and the notes saying what changed."""
    if not len(kernels):
        return kernels, []
    out = kernels.reset_index(drop=True).copy()
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
    notes = []
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
    return out[~(gather | fwd)].reset_index(drop=True), notes


def replicas(run: dict) -> int:
    r = schedule_of(run).get("replicas", config_of(run).get("replicas", 1))
    return int(r) if isinstance(r, int | float) and not isinstance(r, bool) and 1 <= r <= MAX_COUNT else 1


def chips(profile) -> tuple[int, str]:
    """(IPUs the run uses, how that was counted): replicas x IPUs of one replica (the target)."""
    run = dict(profile.run)
    per = int(profile.target.num_ipus)
    r = replicas(run)
    if r == 1:
        return per, f"{per} IPU(s) of one replica"
    return r * per, f"{r} replicas x {per} IPU(s) per replica"


def params(profile) -> tuple[float, str]:
    """(trained parameters of one replica's model, source): ``run["training_state"]`` (params per IPU of one
    replica, written by runs with a training schedule) when present, else the optimizer-update ops."""
    from popvision_lite.analysis.gpu_estimate import params_from_ops

    ts = dict(profile.run).get("training_state")
    if isinstance(ts, str):
        try:
            ts = ast.literal_eval(ts)
        except (ValueError, SyntaxError):
            ts = None
    if isinstance(ts, list) and ts and all(isinstance(x, dict) for x in ts):
        vals = [x.get("params") for x in ts]
        if all(isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v < 1e15 for v in vals):
            total = float(sum(vals))
            if total > 0:
                return total, f"run training_state ({len(vals)} IPU(s) of one replica)"
    return params_from_ops(profile.ops), "optimizer-update ops of the graph"
