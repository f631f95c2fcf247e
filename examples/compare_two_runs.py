"""Compare two runs: recomputation on and off (the bundled BERT-tiny pair).

    python examples/compare_two_runs.py [A.pvl B.pvl]

``pvl.compare(a, b)`` returns the headline (numeric a, b, delta = B - A, ratio = B / A, plus the values as
people read them), sentences that explain the differences, and ops matched by name.
"""

from __future__ import annotations

import sys
from pathlib import Path

import popvision_lite as pvl

SAMPLES = Path(__file__).resolve().parent.parent / "sample_profiles"


def main(a=SAMPLES / "bert_tiny_mk2.pvl", b=SAMPLES / "bert_tiny_mk2_recompute.pvl") -> None:
    c = pvl.compare(a, b)
    try:
        h = c.headline.set_index("metric")
        for metric in ("total cycles", "peak not-always-live on a tile", "compute cycles"):
            r = h.loc[metric]
            print(f"{metric:32s} A {r.a_text:>12s}  B {r.b_text:>12s}  B/A {r.ratio:.3f}")
        print("\n".join(f"- {n}" for n in c.notes))
        ops = c.op_table()
        print(ops.sort_values("cycles_delta", ascending=False).head(3)[["name", "cycles_a", "cycles_b"]]
              .to_string(index=False))
    finally:
        c.a.close()
        c.b.close()


if __name__ == "__main__":
    main(*sys.argv[1:3])
