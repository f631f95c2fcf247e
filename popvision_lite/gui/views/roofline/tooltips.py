"""The hover read-out of every Roofline point: an emulated IPU op, a GPU's roofline bound or estimate of it,
its what-if DDR spill, or a measured GPU kernel (keys as :class:`~.drawing.OpPoints` names its scatters)."""

from __future__ import annotations

import numpy as np

from popvision_lite.analysis import roofline as rl
from popvision_lite.units import format_flops, format_seconds


def measured_tooltip(measured, op_id: int) -> str:
    """A measured kernel (``op_id`` = -1 - its row in ``measured``)."""
    # by key, never attribute access: ``o.cat`` is pandas' categorical accessor, not the column
    o = measured.loc[-1 - int(op_id)]
    inten = "unknown" if not np.isfinite(o["intensity"]) else f"{o['intensity']:.3g} FLOP/B"
    op = o.get("op", "") if hasattr(o, "get") else ""
    op_line = f"\nlaunched by {op}" if isinstance(op, str) and op else ""
    return (f"{o['name']}\nmeasured GPU kernel ({o['cat']}), {format_seconds(o['dur_s'])}{op_line}\n"
            f"{format_flops(o['achieved_flops'])}, intensity {inten}\nFLOPs from {o['flops_from']}")


def point_tooltip(a: rl.RooflineAnalysis, measured, key: str, op_id: int) -> str:
    """The read-out of point ``op_id`` of the scatter ``key`` ("ipu", "whatif", a GPU id, "<gpu>:est",
    "measured...")."""
    if key.startswith("measured"):
        return measured_tooltip(measured, op_id)
    o = a.ops.loc[int(op_id)]
    lines = [f"{o['name']}  ({o.type}, {o.precision})", f"FLOPs {o.flops:,.0f}"]
    if key == "ipu":
        lines += [f"IPU (emulated): {format_seconds(o.ipu_time_s)}, {100 * o.share:.1f}% of run",
                  f"achieved {format_flops(o.achieved_flops)} = {100 * o.efficiency:.0f}% of roof",
                  f"bound by {o.bound}: its own time is {100 * o.compute_share:.0f}% compute"
                  + ("" if o.bound == "compute" else f", mostly {o.bound}"),
                  f"intensity {o.intensity:.3g} FLOP/B vs {o.level}; under the {o.roof_bound} roof "
                  "(ideal times, roofline model)"]
    elif key == "whatif":
        lines += [f"what-if: {o.working_set_bytes:,.0f} B do not fit; streamed from DDR",
                  f"time {format_seconds(o.whatif_time_s)} (emulated {format_seconds(o.ipu_time_s)})"]
    else:
        key = key.split(":")[0]  # "a100-80gb:est" -> the estimate points of that GPU
        g = next(g for g in a.gpus if g.device_id == key)
        lines += [f"{g.name} roofline BOUND (not a measurement)",
                  f"time >= {format_seconds(o[f'{key}_time_s'])}, {o[f'{key}_bound']}-bound",
                  f"estimate {format_seconds(o[f'{key}_est_time_s'])} ({o[f'{key}_est_bound']}-bound, "
                  f"IPU/GPU {o[f'{key}_est_speedup']:.2f}x)",
                  f"intensity {o[f'{key}_intensity']:.3g} FLOP/B (min bytes {o.min_bytes:,.0f})",
                  f"IPU / GPU time = {o[f'{key}_speedup']:.2f}x"]
    return "\n".join(lines)
