"""Why does this model not fit, and would a GPU do better?  The insights of the bundled out-of-memory sample
(BERT-large layers on one Mk2 IPU) and its IPU-or-GPU verdict.

    python examples/out_of_memory.py [PROFILE.pvl]
"""

from __future__ import annotations

import sys
from pathlib import Path

import popvision_lite as pvl

SAMPLE = Path(__file__).resolve().parent.parent / "sample_profiles" / "bert_large_1ipu_oom.pvl"


def main(path=SAMPLE) -> None:
    findings = pvl.insights(path)
    for f in findings[:3]:
        print(f"[{f.severity}] {f.title}")
        print("   " + f.text.splitlines()[0])
    with pvl.open(path) as p:
        over = p.memory.by_tile()["over_capacity"]
        print(f"{int(over.sum()):,} of {len(over):,} tiles are over capacity")
        print(pvl.verdict(p).text().splitlines()[0])


if __name__ == "__main__":
    main(*sys.argv[1:2])
