"""A tour of one profile from Python: where the time goes, which ops cost most, which tiles are fullest.

    python examples/tour_of_a_profile.py [PROFILE.pvl]     # default: the bundled BERT-tiny sample

Every table is a pandas DataFrame with a RangeIndex equal to its id column; steps carry their kind's name
(categorical) and their length in cycles and seconds.
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

        # where the time goes: seconds per step kind (categorical, so every kind is listed, in schema order)
        by_kind = p.steps.groupby("kind_name", observed=False)["seconds"].sum()
        total = by_kind.sum()
        for kind, s in by_kind.items():
            print(f"  {kind:18s} {format_seconds(s):>10s}  {100 * s / total:5.1f} %")

        # the five most expensive ops, with their share of the run
        ops = p.ops.nlargest(5, "cycles")[["name", "type", "cycles", "flops"]]
        ops["share"] = ops["cycles"] / p.ops["cycles"].sum()
        print(ops.to_string(index=False, formatters={"share": "{:.1%}".format}))

        # the fullest tiles and what fills them
        mem = p.memory.by_tile()
        top = mem.nlargest(3, "total")
        for row in top.itertuples():
            biggest = mem.loc[row.tile, list(p.memory.categories)].astype(int).idxmax()
            print(f"  tile {row.tile}: {format_bytes(row.total)} of {format_bytes(row.capacity)}, "
                  f"mostly {biggest}")


if __name__ == "__main__":
    main(*sys.argv[1:2])
