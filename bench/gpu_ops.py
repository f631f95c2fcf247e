"""GPU estimate per op against measured A100 kernels (``python -m bench.gpu_ops [--build]``).

The measured set is ``resources/validation/gpu_ops_a100.csv`` (provenance in
``resources/validation/PROVENANCE_gpu.md``): the A100 measurements published with LLMCompass (Zhang et al.,
ISCA 2024, github PrincetonUniversity/LLMCompass, ``ae/figure5/*/real_hardware/*_A100.csv``): GEMM sweeps,
softmax, LayerNorm and GELU sweeps, and one GPT-3 175B layer (batch 8, sequence 2048, tensor parallel over 4
GPUs) broken down by op.  ``--build`` rewrites the CSV from a git copy of that repository (``--mirror GIT_DIR``,
default ``bench/mirrors/PrincetonUniversity+LLMCompass/repo``, ignored by git: ``git clone --bare
https://github.com/PrincetonUniversity/LLMCompass bench/mirrors/PrincetonUniversity+LLMCompass/repo``).

**Harness overhead, modelled apart from the kernel.**  Every sweep row was timed on the host: ``time.time()``
around one PyTorch call and ``torch.cuda.synchronize()``, median of the iterations.  That adds Python dispatch,
the launch and the synchronisation to each row: tens of microseconds, not the ~3 us launch cost the estimate
already holds.  It is a property of that harness, not of the GPU, so it is not in the device TOML: per op
class it is fitted here on the smallest row of the class's sweep (``role = fit-harness``, where the kernel's
own time is a few microseconds) as measured - estimated kernel, and added to every other host-timed row of
the class.  The GPT-3 layer's LayerNorm rows had the harness overhead subtracted by their authors (a 1x1x1
LayerNorm call timed the same way), so none is added to them; its all-reduce rows were not timed by the
published harness (the figure is in the CSV, its method is not stated) and are compared with the estimate's
ring all-reduce.

Rows with ``role = fit-*`` fitted a constant and are shown but not judged; every other row is judged against
+-15 %.  The calibrated constants of the device TOML name their fit rows; ``--fit`` recomputes them.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from popvision_lite.analysis import gpu_estimate as ge  # noqa: E402

CSV = ROOT / "resources" / "validation" / "gpu_ops_a100.csv"
MIRROR = Path(__file__).resolve().parent / "mirrors" / "PrincetonUniversity+LLMCompass" / "repo"  # --mirror
REPO = "PrincetonUniversity/LLMCompass"
TARGET = 0.15
COLUMNS = ("id", "op_class", "sweep", "op", "type", "m", "n", "k", "batch", "calls", "precision", "measured_s",
           "timing", "harness", "role", "source_file", "commit", "derivation")
HOST_TIMED = ("host-timed: time.time() around one call + torch.cuda.synchronize(), median of the iterations "
              "(software_model/*.py run_on_gpu)")
# the 12 rows of transformer_A100.csv, in order (ae/figure5/ijkl/plot_transformer.py 'categories'); GPT-3 175B,
# d_model 12288, 96 heads, batch 8, sequence 2048, tensor parallel over 4 GPUs: per GPU 24 heads of 128
_B, _S, _D, _TP = 8, 2048, 12288, 4
_BH = _B * 96 // _TP
GPT3_LAYER = (
    ("Q_K_V", "gemm", "matmul", _B * _S, _D // _TP, _D, 1, 3, "three 16384x12288 . 12288x3072 matmuls: one timed, x 3"),
    ("Q_mul_K", "gemm_qk", "bmm", _S, _S, _D // 96, _BH, 1, "bmm of 192 = 8 x 24 heads, 2048x128 . 128x2048"),
    ("A_mul_V", "gemm", "bmm", _S, _D // 96, _S, _BH, 1, "bmm of 192 heads, 2048x2048 . 2048x128"),
    ("Wo_proj", "gemm", "matmul", _B * _S, _D, _D // _TP, 1, 1, "16384x3072 . 3072x12288"),
    ("W1_proj", "gemm", "matmul", _B * _S, 4 * _D // _TP, _D, 1, 1, "16384x12288 . 12288x12288"),
    ("W2_proj", "gemm", "matmul", _B * _S, _D, 4 * _D // _TP, 1, 1, "16384x12288 . 12288x12288"),
    ("Softmax", "softmax", "softmax", _BH * _S, _S, math.nan, 1, 1, "393216 rows of 2048"),
    ("LayerNorm_MHA", "layernorm", "layer_norm", _B * _S, _D, math.nan, 1, 1, "16384 rows of 12288"),
    ("LayerNorm_FFN", "layernorm", "layer_norm", _B * _S, _D, math.nan, 1, 1, "16384 rows of 12288"),
    ("GeLU", "gelu", "gelu", _B * _S * 4 * _D // _TP, 1, math.nan, 1, 1, "16384 x 12288 elements, tanh GELU"),
    ("AllReduce_MHA", "allreduce", "allreduce", _B * _S, _D, math.nan, 1, 1, "16384 x 12288 fp16 over 4 GPUs"),
    ("AllReduce_FFN", "allreduce", "allreduce", _B * _S, _D, math.nan, 1, 1, "16384 x 12288 fp16 over 4 GPUs"),
)


# ------------------------------------------------------------------------------------------ building the set
def _git_show(path: str, mirror: Path = MIRROR) -> str:
    return subprocess.run(["git", "--git-dir", str(mirror), "show", f"HEAD:{path}"], check=True,
                          capture_output=True, text=True).stdout


def _rows(text: str) -> list[list[str]]:
    return [[x.strip() for x in r] for r in csv.reader(text.splitlines()) if r and r[0].strip()]


def build(mirror: Path = MIRROR) -> list[dict]:
    commit = subprocess.run(["git", "--git-dir", str(mirror), "rev-parse", "HEAD"], check=True,
                            capture_output=True, text=True).stdout.strip()
    out: list[dict] = []

    def add(**kw):
        row = {c: "" for c in COLUMNS}
        if "measured_s" in kw:
            kw["measured_s"] = float(f"{kw['measured_s']:.9g}")
        row.update({"commit": commit, "precision": "fp16", "batch": 1, "calls": 1, "timing": HOST_TIMED,
                    "harness": "yes", **kw})
        out.append(row)

    f = "ae/figure5/ab/real_hardware/matmul_A100.csv"
    for i, (m, n, k, ms, _tf) in enumerate(_rows(_git_show(f, mirror))):
        m, n, k = int(m), int(n), int(k)
        sweep = "gemm K=N=12288" if (n, k) == (12288, 12288) and not (m == 8192 and i >= 10) else "gemm M=8192 N=K"
        cls = "gemm_small" if (sweep.startswith("gemm M") and n <= 512) else "gemm"
        add(id=f"matmul_{m}x{n}x{k}", op_class=cls, sweep=sweep, op="torch.matmul (bf16, 2-D)", type="matmul",
            m=m, n=n, k=k, precision="bf16", measured_s=float(ms.replace("ms", "")) * 1e-3,
            role="fit-harness" if (m, n, k) == (8192, 64, 64) else "judge", source_file=f,
            derivation="columns M, N, K, time in ms (test_matmul.py: Tensor([M, K]) . Tensor([K, N]))")
    for name, f, cls_of in (("softmax", "ae/figure5/cf/real_hardware/softmax_A100.csv", "softmax"),
                            ("layernorm", "ae/figure5/de/real_hardware/layernorm_A100.csv", "layernorm")):
        for i, (m, n, thr) in enumerate(_rows(_git_show(f, mirror))):
            m, n = int(m), int(n)
            sweep = f"{name} M=4096" if i < 11 else f"{name} N=4096"
            role = "judge"
            if (m, n) == (4096, 32) and i < 11:
                role = "fit-harness"
            elif name == "softmax" and (m, n) == (4096, 4096) and i < 11:
                role = "fit-softmax_hbm_reads"
            elif name == "layernorm" and (m, n) == (4096, 4096) and i < 11:
                role = "fit-harness-before"
            elif name == "layernorm" and (m, n) in ((4096, 8192), (4096, 16384)):
                role = "fit-row_onchip_bytes+wide_row_hbm_fraction" if n == 16384 else "fit-row_onchip_bytes"
            op = "torch.softmax(x, dim=-1)" if name == "softmax" else "torch.layer_norm(x, [N]) (no affine)"
            add(id=f"{name}_{m}x{n}" + ("" if i < 11 else "_b"), op_class=cls_of, sweep=sweep, op=op,
                type="softmax" if name == "softmax" else "layer_norm", m=m, n=n,
                measured_s=m * n / float(thr) / 1e9, role=role, source_file=f,
                derivation="columns M, N, throughput = M*N / latency / 1e9 (elements per ns); latency = M*N / (thr*1e9)")
    f = "ae/figure5/g/real_hardware/gelu_A100.csv"
    for m, thr in _rows(_git_show(f, mirror)):
        m = int(m)
        add(id=f"gelu_{m}", op_class="gelu", sweep="gelu", op="F.gelu(x, approximate='tanh') on a 1-D tensor",
            type="gelu", m=m, n=1, measured_s=m / float(thr) / 1e9, role={1024: "fit-harness", 16777216: "fit-harness-before"}.get(m, "judge"),
            source_file=f, derivation="columns M, throughput = M / latency / 1e9; latency = M / (thr*1e9)")
    f = "ae/figure5/ijkl/real_hardware/transformer_A100.csv"
    vals = [float(r[0]) for r in _rows(_git_show(f, mirror))]
    for (name, cls, typ, m, n, k, b, calls, what), v in zip(GPT3_LAYER, vals, strict=True):
        timing, harness = HOST_TIMED, "yes"
        if name.startswith("LayerNorm"):
            timing = HOST_TIMED + "; minus a 1x1x1 layer_norm timed the same way (software_model/transformer.py)"
            harness = "subtracted"
        if name.startswith("AllReduce"):
            timing, harness = "not timed by the published harness (run_on_gpu sets all-reduce to 0); figure as published", "no"
        add(id=f"gpt3_{name}", op_class=cls, sweep="GPT-3 175B layer (TP 4, b 8, s 2048)", op=what, type=typ,
            m=m, n=n, k=k, batch=b, calls=calls, measured_s=v, timing=timing, harness=harness, role="judge",
            source_file=f, derivation="seconds per op, row order of plot_transformer.py 'categories'")
    return out


def write(rows: list[dict]) -> None:
    from popvision_lite.atomic_io import atomic_text
    with atomic_text(CSV, newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)


# ------------------------------------------------------------------------------------------ the check
def load() -> pd.DataFrame:
    df = pd.read_csv(CSV)
    for c in ("m", "n", "k", "batch", "calls", "measured_s"):
        df[c] = pd.to_numeric(df[c])
    return df


def op_frame(df: pd.DataFrame) -> pd.DataFrame:
    """The validation rows as an ops table for ``gpu_estimate.estimate_ops`` (one row = one call)."""
    e = df["precision"].map(ge.BYTES_PER_ELEMENT).astype(float)
    m, n, k, b = df["m"], df["n"], df["k"], df["batch"]
    gemm = df["type"].isin(("matmul", "bmm"))
    flops = np.where(gemm, 2 * b * m * n * k, m * n)
    nbytes = np.where(gemm, e * b * (m * k + k * n + m * n), 2 * e * m * n)
    return pd.DataFrame({"type": df["type"], "precision": df["precision"], "flops": flops, "min_bytes": nbytes,
                         "m": np.where(gemm | df["type"].isin(("softmax", "layer_norm")), m, np.nan),
                         "n": np.where(gemm | df["type"].isin(("softmax", "layer_norm")), n, np.nan),
                         "k": np.where(gemm, k, np.nan), "batch": np.where(gemm, b, np.nan)}, index=df.index)


def kernel_estimates(df: pd.DataFrame, gpu="a100-80gb") -> pd.Series:
    """Estimated seconds of each row's kernels on the GPU (calls x one call; all-reduce rows: ring all-reduce)."""
    g = ge.gpu_model(gpu)
    ops = op_frame(df)
    ar = df["type"] == "allreduce"
    est = pd.Series(np.nan, index=df.index)
    if (~ar).any():
        est[~ar] = ge.estimate_ops(ops[~ar], g)["est_time_s"] * df.loc[~ar, "calls"]
    for i in df.index[ar]:
        est[i] = ge.allreduce_seconds(2 * df.at[i, "m"] * df.at[i, "n"], _TP, g)[0]
    return est


def harness_overheads(df: pd.DataFrame, est: pd.Series) -> dict:
    """Per op class, the host-timed harness's time per call as (before, overlapped): ``before`` = host work
    before the kernel starts (dispatch, launch), ``overlapped`` = host work after the launch (return to Python,
    the synchronise call), which runs while the kernel does.  A row measures ``before + max(overlapped,
    kernel)``.  ``before + overlapped`` is fitted on the class's smallest row (``fit-harness``: kernel of a few
    us); ``before`` alone on its ``fit-harness-before`` row (a kernel several times the overlapped part), where
    the class has one; classes without one have no overlapped part (``before`` = the whole)."""
    out, smallest = {}, {}
    for i, r in df[df["role"] == "fit-harness"].iterrows():
        out[_family(r.op_class)] = (r.measured_s - est[i], 0.0)
        smallest[_family(r.op_class)] = r.measured_s
    for i, r in df[df["role"] == "fit-harness-before"].iterrows():
        fam = _family(r.op_class)
        before = r.measured_s - est[i]
        out[fam] = (before, max(smallest[fam] - before, 0.0))   # smallest row: before + overlapped
    return out


def _family(op_class: str) -> str:
    return str(op_class).split("_")[0]


def predict(df: pd.DataFrame, gpu="a100-80gb") -> pd.DataFrame:
    est = kernel_estimates(df, gpu)
    over = harness_overheads(df, est)
    fam = df["op_class"].map(_family)
    before = fam.map(lambda f: over.get(f, (0.0, 0.0))[0])
    overlapped = fam.map(lambda f: over.get(f, (0.0, 0.0))[1])
    timed = df["harness"] == "yes"
    per_call = est / df["calls"]
    predicted = np.where(timed, df["calls"] * (before + np.maximum(overlapped, per_call)), est)
    out = df.copy()
    out["kernel_est_s"] = est
    out["harness_s"] = predicted - est
    out["predicted_s"] = predicted
    out["ratio"] = out["predicted_s"] / out["measured_s"]
    return out


def fit_constants(df: pd.DataFrame) -> dict:
    """Recompute the calibrated constants of the A100 TOML from their named fit rows (never judged rows)."""
    g = ge.gpu_model("a100-80gb")
    est = kernel_estimates(df)
    over = harness_overheads(df, est)
    res = {"harness_s": over}
    # softmax_hbm_reads: of 1..3 reads, the one nearest the fit row (4096 x 4096)
    r = df[df["role"] == "fit-softmax_hbm_reads"].iloc[0]
    best = None
    for reads in (1, 2, 3):
        gg = dataclasses.replace(g, softmax_hbm_reads=reads)
        t = float(ge.estimate_ops(op_frame(df.loc[[r.name]]), gg)["est_time_s"].iloc[0]) + sum(over["softmax"])
        err = abs(math.log(t / r.measured_s))
        if best is None or err < best[1]:
            best = (reads, err)
    res["softmax_hbm_reads"] = best[0]
    # wide_row_hbm_fraction: LayerNorm 4096 x 16384, whose normalise pass re-reads the part of each 32 KB row
    # past row_onchip_bytes from HBM
    r = df[df["role"] == "fit-row_onchip_bytes+wide_row_hbm_fraction"].iloc[0]
    kernel = r.measured_s - over["layernorm"][0] - g.launch_s
    miss = 1 - g.row_onchip_bytes / (2 * r.n)
    res["wide_row_hbm_fraction"] = (1 + miss / 2) * 2 * 2 * r.m * r.n / kernel / g.hbm_bytes_per_s
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", action="store_true", help=f"rewrite {CSV.name} from the LLMCompass mirror")
    ap.add_argument("--mirror", type=Path, default=MIRROR, metavar="GIT_DIR",
                    help="git directory of PrincetonUniversity/LLMCompass for --build (default: bench/mirrors/...)")
    ap.add_argument("--fit", action="store_true", help="recompute the calibrated constants from their fit rows")
    args = ap.parse_args(argv)
    if args.build:
        rows = build(args.mirror)
        write(rows)
        print(f"wrote {len(rows)} rows to {CSV}")
    df = load()
    if args.fit:
        print("calibrated constants from their fit rows:", fit_constants(df))
    p = predict(df)
    over = harness_overheads(df, p["kernel_est_s"])
    print("harness overhead per call, before the kernel + overlapped with it (fitted on named rows; not the "
          "GPU's launch cost): " + ", ".join(f"{c} {b * 1e6:.1f} + {o * 1e6:.1f} us" for c, (b, o) in over.items()))
    print(f"\n{'row':34s} {'role':12s} {'measured':>11s} {'kernel est':>11s} {'+harness':>9s} {'pred/meas':>9s}")
    for _, r in p.iterrows():
        mark = "" if r.role != "judge" else ("" if abs(r.ratio - 1) <= TARGET else "  OUTSIDE")
        print(f"{r.id:34s} {r.role[:12]:12s} {r.measured_s * 1e6:9.1f}us {r.kernel_est_s * 1e6:9.1f}us "
              f"{r.harness_s * 1e6:7.1f}us {r.ratio:9.3f}{mark}")
    print("\nper sweep (judged rows): min - max of predicted / measured")
    j = p[p["role"] == "judge"]
    ok = True
    for (sweep, cls), grp in j.groupby(["sweep", "op_class"], sort=False):
        lo, hi = grp["ratio"].min(), grp["ratio"].max()
        inside = lo >= 1 - TARGET and hi <= 1 + TARGET
        ok &= inside
        print(f"  {sweep:40s} {cls:10s} {lo:.3f} - {hi:.3f}  ({len(grp)} rows){'' if inside else '  OUTSIDE +-15 %'}")
    layer = p[p["sweep"].str.startswith("GPT-3")]
    tot_p, tot_m = layer["predicted_s"].sum(), layer["measured_s"].sum()
    print(f"\nGPT-3 175B layer total: predicted {tot_p * 1e3:.2f} ms, measured {tot_m * 1e3:.2f} ms, "
          f"{tot_p / tot_m:.3f}")
    print("all judged rows within +-15 %" if ok else "some judged rows outside +-15 %")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
