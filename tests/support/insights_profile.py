"""A small hand-built profile whose every number is known, for the selection / program tree /
operations / insights tests.  Written with the real writer and read back with the real reader.

1 IPU, 8 tiles of 1000 bytes.  Program tree::

    0 Sequence main
      1 Repeat loop (x2)
        2 Sequence body
          3 Execute fwd/matmul      op 0   (tiles 0-3 compute)
          4 Copy    fwd/matmul/xchg op 0   (tiles 0-3 send, tile 4 receives)
          5 Execute fwd/relu        op 1   (tiles 2-5)
      6 Sync    sync
      7 Execute bwd/grad          op 2   (tiles 4-7)
      8 StreamCopy weights_out    op 3   (tile 7 sends)

Steps (Repeat unrolled): 0..2 first iteration, 3..5 second, 6 sync, 7 grad, 8 stream copy.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from popvision_lite.profile.schema import (
    CATEGORY_CODE,
    MEMORY_CATEGORIES,
    STEP_KIND_CODE,
    ProfileData,
    TargetInfo,
)
from popvision_lite.profile.writer import write_profile

N_TILES = 8
CAP = 1000

# (step kind, op, prog, {tile: cycles}, {tile: bytes_in}, {tile: bytes_out}, start, end)
_STEPS = []
_t = 0


def _add(kind, op, prog, cyc, bin_=None, bout=None, dur=100):
    global _t
    _STEPS.append((kind, op, prog, cyc, bin_ or {}, bout or {}, _t, _t + dur))
    _t += dur


for _ in range(2):
    _add("compute", 0, 3, {0: 90, 1: 80, 2: 100, 3: 70})
    _add("exchange_internal", 0, 4, {}, {4: 64}, {0: 16, 1: 16, 2: 16, 3: 16}, dur=400)
    _add("compute", 1, 5, {2: 10, 3: 20, 4: 30, 5: 40}, dur=50)
_add("sync", -1, 6, {}, dur=30)
_add("compute", 2, 7, {4: 200, 5: 10, 6: 10, 7: 10}, dur=200)
_add("stream_copy", 3, 8, {}, {}, {7: 128}, dur=500)

PROGRAMS = [  # prog_id, parent, kind, name, op, repeat, cs, first, last, code_bytes, lstep
    (0, -1, "Sequence", "main", -1, 1, -1, 0, 8, 40, -1),
    (1, 0, "Repeat", "loop", -1, 2, -1, 0, 5, 30, -1),
    (2, 1, "Sequence", "body", -1, 1, -1, 0, 5, 20, -1),
    (3, 2, "Execute", "fwd/matmul", 0, 1, 0, 0, 3, 12, 0),
    (4, 2, "Copy", "fwd/matmul/xchg", 0, 1, -1, 1, 4, 64, 1),
    (5, 2, "Execute", "fwd/relu", 1, 1, 1, 2, 5, 8, 2),
    (6, 0, "Sync", "sync", -1, 1, -1, 6, 6, 4, 3),
    (7, 0, "Execute", "bwd/grad", 2, 1, 2, 7, 7, 16, 4),
    (8, 0, "StreamCopy", "weights_out", 3, 1, -1, 8, 8, 24, 5),
]

# variables: var_id, name, kind, bytes per tile {tile: b}, always_live, first, last, op
VARIABLES = [
    (0, "w0", "variable", {t: 250 for t in range(8)}, True, -1, -1, -1),
    (1, "adam/w0/momentum", "variable", {t: 100 for t in range(8)}, True, -1, -1, -1),
    # forward activations kept for a later use (lstep 5), i.e. held across bwd/grad at lstep 4
    (2, "fwd/matmul/out", "variable", {0: 400, 1: 400, 2: 400, 3: 500}, False, 0, 5, 0),
    (3, "fwd/relu/out", "variable", {2: 300, 3: 300, 4: 300, 5: 300}, False, 2, 5, 1),
    (4, "bwd/grad/out", "variable", {4: 100, 5: 100, 6: 100, 7: 100}, False, 4, 4, 2),
    (5, "c", "constant", {0: 8}, True, -1, -1, -1),
]
N_LSTEPS = 6


def make_data(recompute: bool = False, num_ipus: int = 1, cap: int = CAP) -> ProfileData:
    """The profile above; ``recompute=True`` halves the activations kept (fwd/matmul/out dies at lstep 1)."""
    n_steps = len(_STEPS)
    tiles_per_ipu = N_TILES // num_ipus
    cyc = np.zeros((n_steps, N_TILES), np.uint32)
    bin_ = np.zeros_like(cyc)
    bout = np.zeros_like(cyc)
    rows = []
    for s, (kind, op, prog, c, bi, bo, t0, t1) in enumerate(_STEPS):
        for t, v in c.items():
            cyc[s, t] = v
        for t, v in bi.items():
            bin_[s, t] = v
        for t, v in bo.items():
            bout[s, t] = v
        rows.append(dict(step=s, kind=STEP_KIND_CODE[kind], op_id=op, prog_id=prog, ipu=-1,
                         start_cycle=t0, end_cycle=t1, busy_max=int(cyc[s].max()),
                         busy_mean=float(cyc[s].mean()), tiles_active=int((cyc[s] > 0).sum()),
                         bytes_in=int(bin_[s].sum()), bytes_out=int(bout[s].sum())))
    steps = pd.DataFrame(rows)

    ops = []
    names = {0: ("fwd/matmul", "matmul", "M=2 N=2 split"), 1: ("fwd/relu", "relu", ""),
             2: ("bwd/grad", "matmul", "M=4"), 3: ("weights_out", "stream", "")}
    for op, (name, typ, plan) in names.items():
        mine = steps[steps["op_id"] == op]
        dur = mine["end_cycle"] - mine["start_cycle"]
        k = mine["kind"]
        ops.append(dict(op_id=op, name=name, type=typ, ipu=0, precision="fp16",
                        flops=[2_000_000, 5_000, 900_000, 0][op], bytes_sram=[4096, 512, 2048, 0][op],
                        bytes_exchange=[128, 0, 0, 0][op], bytes_ipu_link=0, bytes_ddr=[0, 0, 0, 128][op],
                        min_bytes=100, cycles=int(dur.sum()),
                        compute_cycles=int(dur[k == STEP_KIND_CODE["compute"]].sum()),
                        exchange_cycles=int(dur[k == STEP_KIND_CODE["exchange_internal"]].sum()),
                        sync_cycles=0, stream_cycles=int(dur[k == STEP_KIND_CODE["stream_copy"]].sum()),
                        tiles_used=[5, 4, 4, 1][op], plan=plan))
    ops = pd.DataFrame(ops)

    prog_cycles = {}
    for p in PROGRAMS[::-1]:
        own = int((steps["end_cycle"] - steps["start_cycle"])[steps["prog_id"] == p[0]].sum())
        prog_cycles[p[0]] = own + sum(prog_cycles[c[0]] for c in PROGRAMS if c[1] == p[0])
    programs = pd.DataFrame([dict(prog_id=p[0], parent_id=p[1], kind=p[2], name=p[3], op_id=p[4], repeat=p[5],
                                  cs_id=p[6], first_step=p[7], last_step=p[8], code_bytes=p[9],
                                  cycles=prog_cycles[p[0]], lstep=p[10]) for p in PROGRAMS])
    compute_sets = pd.DataFrame([dict(cs_id=0, name="fwd/matmul/cs", op_id=0, num_vertices=8, num_tiles=4),
                                 dict(cs_id=1, name="fwd/relu/cs", op_id=1, num_vertices=4, num_tiles=4),
                                 dict(cs_id=2, name="bwd/grad/cs", op_id=2, num_vertices=4, num_tiles=4)])
    vrows = []
    for t in range(4):
        vrows.append(dict(cs_id=0, codelet="MatMulPartial", tile=t, count=2, cycles=80, state_bytes=40, code_bytes=60))
    for t in range(2, 6):
        vrows.append(dict(cs_id=1, codelet="Relu", tile=t, count=1, cycles=20, state_bytes=8, code_bytes=20))
    for t in range(4, 8):
        vrows.append(dict(cs_id=2, codelet="MatMulGrad", tile=t, count=1, cycles=50, state_bytes=30, code_bytes=60))
    vertices = pd.DataFrame(vrows)

    variables = []
    vt = []
    for vid, name, kind, per_tile, al, first, last, op in VARIABLES:
        if recompute and vid == 2:
            last = 1  # recomputed in the backward pass instead of being kept
        variables.append(dict(var_id=vid, name=name, kind=kind, dtype="float16", shape=f"({sum(per_tile.values()) // 2},)",
                              bytes=sum(per_tile.values()), always_live=al, first_lstep=first, last_lstep=last,
                              op_id=op))
        vt += [dict(var_id=vid, tile=t, bytes=b) for t, b in per_tile.items()]
    variables = pd.DataFrame(variables)
    variable_tiles = pd.DataFrame(vt)

    # liveness straight from the variables
    live = np.zeros((N_LSTEPS, N_TILES), np.uint32)
    for _, v in variables.iterrows():
        if v["always_live"]:
            continue
        for t, b in VARIABLES[v["var_id"]][3].items():
            live[v["first_lstep"]:v["last_lstep"] + 1, t] += b
    lrows = []
    leaves = [p for p in PROGRAMS if p[10] >= 0]
    for p in leaves:
        ls = p[10]
        lrows.append(dict(lstep=ls, prog_id=p[0], name=p[3], total_bytes=int(live[ls].sum()),
                          max_tile_bytes=int(live[ls].max()), max_tile=int(live[ls].argmax())))
    liveness_steps = pd.DataFrame(lrows)

    mem = np.zeros((N_TILES, len(MEMORY_CATEGORIES), 2), np.int64)
    for _, v in variables.iterrows():
        if v["always_live"]:
            cat = CATEGORY_CODE["constant" if v["kind"] == "constant" else "variable"]
            for t, b in VARIABLES[v["var_id"]][3].items():
                mem[t, cat, 0] += b
    mem[:, CATEGORY_CODE["variable"], 1] = live.max(axis=0)
    mem[:, CATEGORY_CODE["vertexCode"], 0] = 60
    mem[:, CATEGORY_CODE["internalExchangeCode"], 0] = 16

    target = TargetInfo(device="ipu-mk2", name="test IPU", num_ipus=num_ipus, tiles_per_ipu=tiles_per_ipu,
                        sram_bytes_per_tile=cap, clock_hz=1.325e9, threads_per_tile=6)
    run = dict(model="tiny", config={"recompute": recompute}, emulator_version="test", fits=False,
               timing_only=False, numeric_checks={})
    return ProfileData(target=target, run=run, memory=mem, steps=steps, step_tile_cycles=cyc,
                       step_tile_bytes_in=bin_, step_tile_bytes_out=bout, ops=ops, programs=programs,
                       compute_sets=compute_sets, vertices=vertices, variables=variables,
                       variable_tiles=variable_tiles, liveness_steps=liveness_steps, liveness_tile_bytes=live)


def write_small(path, **kw):
    write_profile(path, make_data(**kw))
    return path
