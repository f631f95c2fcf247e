"""A tour of one profile from Python: where the time goes, which ops cost most, which tiles are fullest.

    python examples/tour_of_a_profile.py [PROFILE.pvl]     # default: the bundled BERT-tiny sample

Every table is a pandas DataFrame indexed by its id (``step``, ``op_id``, ``tile`` ...); a stored step carries
its kind's name (categorical), its length in cycles and seconds, and how many times it runs per training step
(``runs``; ``ipu_seconds`` = the IPU time it stands for).  ``p.totals`` adds up to the Summary.
"""

from __future__ import annotations

import sys
from pathlib import Path

import popvision_lite as pvl
from popvision_lite.units import format_bytes, format_seconds

SAMPLE = Path(__file__).resolve().parent.parent / "sample_profiles" / "bert_tiny_mk2.pvl"


def main(path=SAMPLE) -> None:
    with pvl.open(path) as p:
        t = p.target
        print(f"{Path(path).name}: {p.run.get('model')} on {t.num_ipus} x {t.name}, {len(p.steps):,} BSP steps")

        # where the IPU time of one step goes: per step kind (categorical, so every kind is listed, in schema
        # order), weighted by how often each part of the step runs: the Summary's shares
        by_kind = p.totals.groupby("kind_name", observed=False)["ipu_seconds"].sum()
        total = by_kind.sum()
        for kind, s in by_kind.items():
            print(f"  {kind:18s} {format_seconds(s):>10s}  {100 * s / total:5.1f} %")

        # the five most expensive ops, with their share of the step's IPU time
        ops = p.ops.nlargest(5, "cycles")[["name", "type", "cycles", "flops"]]
        ops["share"] = ops["cycles"] / p.totals["ipu_cycles"].sum()
        print(ops.to_string(index=False, formatters={"share": "{:.1%}".format}))

        # the fullest tiles and what fills them
        mem = p.memory.by_tile()
        top = mem.nlargest(3, "total_bytes")
        for tile, row in top.iterrows():
            biggest = mem.loc[tile, list(p.memory.category_columns)].astype(int).idxmax()
            print(f"  tile {tile}: {format_bytes(row.total_bytes)} of {format_bytes(row.capacity_bytes)}, "
                  f"mostly {biggest.removesuffix('_bytes')}")


if __name__ == "__main__":
    main(*sys.argv[1:2])
