"""Validation report: the emulator against the measured MLPerf IPU-POD16 runs (issue 14).

    python -m bench.validate            # every IPU row + the untuned configurations; updates the doc
    python -m bench.validate --quick    # the ResNet-50 row only, doc untouched

Same code as ``popvision-lite validate`` (``popvision_lite/validation.py``); prints one
``BENCH-RESULT`` JSON line per configuration and writes the generated section of
``docs/emulator-fidelity.md`` (full runs only).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys

from popvision_lite import validation as V
from popvision_lite.errors import ConfigError


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.validate", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="the measured ResNet-50 row only; doc untouched")
    p.add_argument("--data", default=None, help="folder with mlperf_training.csv")
    p.add_argument("--no-doc", action="store_true", help="do not update docs/emulator-fidelity.md")
    args = p.parse_args(argv)
    try:
        cases = V.build_cases(V.load_rows(V.data_dir(args.data)), untuned=not args.quick)
    except ConfigError as e:
        print(f"bench.validate: error: {e}", file=sys.stderr)
        return 2
    if args.quick:
        cases = [c for c in cases if c.model == "resnet50"]
    results = []
    for c in cases:
        print(f"emulating {c.id}: {c.label} on {c.device}", flush=True)
        r = V.predict(c)
        results.append(r)
        print("BENCH-RESULT " + json.dumps(dict(
            name=f"validate/{c.id}", measured_sps=c.measured_sps, predicted_sps=r.predicted_sps, ratio=r.ratio,
            fits=r.fits, cycles=r.cycles, emulation_wall_s=round(r.wall_s, 2), basis=r.basis, error=r.error)),
            flush=True)
    print()
    print(V.format_table(results))
    if not args.quick and not args.no_doc:
        meta = f"Last run: {_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC (`python -m bench validate`)."
        V.write_doc(V.render_section(results, meta))
        print(f"\nwrote the generated section of {V.DOC_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
