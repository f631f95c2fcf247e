"""``popvision-lite verdict run.pvl [--gpu a100-80gb] [--gpus 8] [--precision fp8] [--gpu-tp N] [--gpu-pp N]
[--gpu-vp N] [--gpu-micro-batch N] [--samples N] [--json]``.

Prints the IPU-or-GPU verdict of :mod:`popvision_lite.analysis.verdict`: the emulated IPU run next to the
estimated GPU run (samples/s, time and USD for N samples, chips, fits, bounds, same chips / same dollars).
Exit codes: 0 ok, 2 bad arguments or an unreadable / invalid profile.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from popvision_lite.cli.args import whole_number
from popvision_lite.errors import PopvisionError
from popvision_lite.terminal import terminal_text

_count = whole_number(1, exponent=True)  # --samples 1e6


def add_arguments(parser) -> None:
    from popvision_lite import devices

    gpus = devices.list_devices("gpu")
    parser.add_argument("profile", help="profile file (.pvl)")
    parser.add_argument("--gpu", default="a100-80gb", choices=gpus, help="GPU to estimate (default a100-80gb)")
    parser.add_argument("--gpus", type=_count, default=None,
                        help="number of GPUs (default: as many as the run uses IPUs, all replicas and "
                             "tensor-parallel groups)")
    parser.add_argument("--precision", choices=("fp32", "fp16", "bf16", "fp8"), default=None,
                        help="precision the GPUs train in (default: the IPU run's); fp8 runs the GEMMs at the GPU's "
                             "FP8 rate (Transformer Engine), where its spec has one")
    parser.add_argument("--gpu-tp", type=_count, default=None, metavar="N",
                        help="GPU tensor-parallel degree (transformers; default: searched)")
    parser.add_argument("--gpu-pp", type=_count, default=None, metavar="N",
                        help="GPU pipeline-parallel stages (transformers; default: searched)")
    parser.add_argument("--gpu-vp", type=_count, default=None, metavar="N",
                        help="virtual stages per GPU pipeline stage, interleaved (default: searched)")
    parser.add_argument("--gpu-micro-batch", type=_count, default=None, metavar="SAMPLES",
                        help="samples per GPU pass, a whole number (default: searched with the placement: the "
                             "fastest that keeps the global batch and fits in GPU memory)")
    parser.add_argument("--samples", type=_count, default=1_000_000,
                        help="samples for the time/cost line (default 1,000,000; 1e6 works)")
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")


def _clean(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_clean(x) for x in v]
    return v


def run(args) -> int:
    from popvision_lite.analysis.verdict import verdict
    from popvision_lite.profile.reader import open_profile

    if not Path(args.profile).exists():
        print(terminal_text(f"popvision-lite verdict: error: {args.profile}: no such profile file"), file=sys.stderr)
        return 2
    try:
        with open_profile(args.profile) as p:
            v = verdict(p, gpu=args.gpu, gpus=args.gpus, samples=args.samples, gpu_micro_batch=args.gpu_micro_batch,
                        precision=args.precision, gpu_tp=args.gpu_tp, gpu_pp=args.gpu_pp, gpu_vp=args.gpu_vp)
    except PopvisionError as e:
        print(terminal_text(f"popvision-lite verdict: error: {e}"), file=sys.stderr)
        return 2
    try:
        if args.json:
            print(json.dumps(_clean(v.to_dict()), indent=2, default=str))
        else:
            print(terminal_text(v.text()))
        sys.stdout.flush()
    except BrokenPipeError:  # `popvision-lite verdict run.pvl | head`: the reader left; not an error
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0
