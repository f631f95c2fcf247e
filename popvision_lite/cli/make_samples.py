"""``popvision-lite make-samples [-o sample_profiles]``: regenerate the bundled sample profiles.

Every sample is a bundled workload with fixed seeds, so regenerating gives the same tables and
arrays (only ``run["created"]`` differs).  See sample_profiles/README.md for what each shows.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from popvision_lite.emulator.models.config import make_config
from popvision_lite.terminal import terminal_text


@dataclass(frozen=True)
class Sample:
    file: str
    model: str
    device: str = "ipu-mk2"
    timing_only: bool = False
    args: dict = field(default_factory=dict)
    shows: str = ""


_BERT_TINY = dict(batch=4, seq=64)

SAMPLES: tuple[Sample, ...] = (
    Sample("bert_tiny_mk2.pvl", "bert-tiny", args=_BERT_TINY,
           shows="BERT-tiny training step (2 layers, hidden 128) on one Mk2; numerics checked"),
    Sample("bert_tiny_mk2_recompute.pvl", "bert-tiny", args=_BERT_TINY | {"recompute": True},
           shows="the same with recomputation: lower peak not-always-live memory, more compute cycles"),
    Sample("mlp_mk2.pvl", "mlp", shows="3-layer MLP training step on Mk2"),
    Sample("mlp_bow.pvl", "mlp", device="ipu-bow", shows="the same MLP on Bow (same cycles, higher clock)"),
    Sample("bert_mini_4ipu_pipeline.pvl", "bert-mini", args=dict(batch=4, seq=64, ipus=4),
           shows="BERT-mini (4 layers) pipelined over 4 IPUs, 7 micro-batches: per-IPU lanes overlapping in time"),
    Sample("conv_block_mk2.pvl", "conv", shows="ResNet-style basic block (two 3x3 convs as implicit GEMM) training"),
    Sample("gnn_mk2.pvl", "gnn", shows="2-layer GNN message passing on a seeded random graph"),
    Sample("bert_large_1ipu_oom.pvl", "bert-large", timing_only=True, args=dict(layers=4, batch=8, seq=128),
           shows="4 BERT-large layers (hidden 1024) on ONE IPU, timing-only: out of memory on every tile"),
)


def make_sample(sample: Sample, out_dir, progress=None):
    """Emulate ``sample`` and write it into ``out_dir``; returns the ``RunResult``."""
    from popvision_lite.emulator.models.emulated import run_model, write_run

    cfg = make_config(sample.model, **sample.args)
    run = run_model(cfg, device=sample.device, timing_only=sample.timing_only, progress=progress)
    write_run(run, Path(out_dir) / sample.file)
    return run


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", default="sample_profiles", help="folder to write into (default sample_profiles)")
    p.add_argument("--only", nargs="*", metavar="FILE", help="regenerate only these sample files")
    p.add_argument("--list", action="store_true", help="list the samples and exit")


def run(args) -> int:
    if args.list:
        for s in SAMPLES:
            print(terminal_text(f"{s.file:32s} {s.shows}"))
        return 0
    chosen = SAMPLES
    if args.only:
        names = {s.file for s in SAMPLES}
        bad = [n for n in args.only if n not in names]
        if bad:
            print(terminal_text(f"popvision-lite make-samples: error: argument --only: unknown sample(s) {', '.join(bad)}; "
                  f"known: {', '.join(sorted(names))}"), file=sys.stderr)
            return 2
        chosen = tuple(s for s in SAMPLES if s.file in args.only)
    out = Path(args.output)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        print(terminal_text(f"popvision-lite make-samples: error: argument -o: cannot create {out}: {e}"), file=sys.stderr)
        return 2
    for i, s in enumerate(chosen):
        t0 = time.perf_counter()
        r = make_sample(s, out)
        size = (out / s.file).stat().st_size
        status = "fits" if r.fits else "OUT OF MEMORY (expected)" if "oom" in s.file else "OUT OF MEMORY"
        print(terminal_text(f"[{i + 1}/{len(chosen)}] {out / s.file}: {status}, {r.total_cycles:,} cycles, "
              f"{size / 1e6:.2f} MB, {time.perf_counter() - t0:.1f} s"), file=sys.stderr)
    return 0
