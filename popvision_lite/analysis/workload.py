"""What a profile's ops table counts, and one model pass of it (pure: pandas / numpy, no Qt).

Two kinds of ops table exist:

* **whole-graph runs** (mlp, conv, gnn, resnet, one-graph BERT): every row is one op of ONE micro-batch of one
  replica, as the graph runs it.  Recomputation has its own rows (``.../recompute/...``) and the graph's
  optimizer-update ops are rows too.  ``table_runs`` = 1.
* **pipelined runs** (``emulator/pipeline.py``: BERT / GPT stage programs): a row is one op of one stage
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
    calls_per_microbatch: np.ndarray  # model instances of the op per micro-batch (layers on its IPU, else 1)
    runs_per_call: np.ndarray         # IPU runs per call (2: forward + recomputation)
    recompute_rows: np.ndarray        # bool: whole-graph rows that are recomputation (.../recompute/...)
    pipelined: bool
    grad_accum: int
    basis: str                        # where the counts came from
    notes: list = field(default_factory=list)


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


def _recomputed_op_ids(profile) -> set[int]:
    """op ids of the programs under a ``layer_recompute`` phase (2.0 pipelined files: the replayed forward)."""
    try:
        pr = profile.programs
    except Exception:  # noqa: BLE001 - a profile object without a programs table
        return set()
    if pr is None or not len(pr) or "layer_recompute" not in set(pr["name"]):
        return set()
    parent = dict(zip(pr["prog_id"].to_numpy().tolist(), pr["parent_id"].to_numpy().tolist(), strict=True))
    roots = set(pr.loc[pr["name"] == "layer_recompute", "prog_id"].tolist())
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
    ones = np.ones(n, np.int64)
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
        return OpCounts(table_runs=np.maximum(per_step, 1), calls_per_microbatch=calls, runs_per_call=rpc,
                        recompute_rows=np.zeros(n, bool), pipelined=True, grad_accum=G,
                        basis="run['op_counts'] (written with the pipelined profile)")
    split = sched.get("layer_split")
    if isinstance(split, list) and split and n and names.str.match(r"ipu\d+/").all():
        # a pipelined profile of format 2.0: the rule its writer applied (emulator/pipeline.py::_profile)
        calls = ones.copy()
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
        return OpCounts(table_runs=calls * rpc * G, calls_per_microbatch=calls, runs_per_call=rpc,
                        recompute_rows=np.zeros(n, bool), pipelined=True, grad_accum=G,
                        basis="reconstructed (pipelined profile of format 2.0: layer-body ops x layers x "
                              "grad_accum, recomputation from the programs table)", notes=notes)
    rec_rows = names.str.contains("/recompute/", regex=False).to_numpy() if n else np.zeros(0, bool)
    return OpCounts(table_runs=ones, calls_per_microbatch=ones.copy(), runs_per_call=ones.copy(),
                    recompute_rows=rec_rows, pipelined=False, grad_accum=G,
                    basis="whole-graph profile: the ops table is one micro-batch of one replica")


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
    rec_runs = 0
    if not keep_recompute:
        rec_runs = int((c.calls_per_microbatch * (c.runs_per_call - 1))[keep].sum())
        rec_runs += int((c.recompute_rows & keep).sum())
        keep &= ~c.recompute_rows
    reps = c.calls_per_microbatch * (c.runs_per_call if keep_recompute else 1)
    one = one[keep]
    reps = reps[keep]
    kernels = one.loc[one.index.repeat(reps)].reset_index(drop=True)
    notes = list(c.notes)
    notes.append(f"ops table: {c.basis}")
    if rec_runs:
        notes.append(f"the IPU's recomputation ({rec_runs} op runs per micro-batch) is not carried to the GPU "
                     "(forward once, activations kept; the memory fit counts them)")
    return ModelPass(ops=kernels, counts=c, dropped_recompute=rec_runs, dropped_optimizer=int(is_opt.sum()),
                     notes=notes)


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
