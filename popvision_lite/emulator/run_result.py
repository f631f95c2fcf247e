"""The one result type of an emulation, whatever produced it: ``Engine.run`` (one compiled graph),
``models.emulated.run_model`` (a bundled model, on the whole-graph or the composed path) and
``onnx_import.emulate_onnx`` (an imported ONNX model).  The command line's summary, the sweep, the validation
report, the GUI's emulate dialog and bench/ read the same fields of every run (docs/decisions/0125)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from popvision_lite.profile.run_record import Schedule
from popvision_lite.profile.schema import ProfileData


@dataclass
class RunResult:
    """One emulation's numbers and profile.  The profile (``profile_data``) is the record: these fields are the
    numbers a caller reads without opening it."""

    fits: bool
    total_cycles: int              # cycles of the run: one training step on a composed path
    seconds: float                 # its time (a training step's with its host terms on a composed path)
    profile_data: ProfileData
    numeric_checks: dict = field(default_factory=dict)   # output name -> check record (full numerics)
    oom_report: list = field(default_factory=list)       # (tile, ipu, bytes needed, capacity), worst first
    wall: dict = field(default_factory=dict)             # host seconds per stage (build, compile, ...)
    num_vertices: int = 0
    num_ops: int = 0
    samples_per_second: float = 0.0  # whole system (all replicas); BERT: sequences (packs x packing)
    # the training step's composition (docs/emulator.md), typed: built once, here, from what the composition
    # computed (Schedule.build: the declarations a reader checks a file by), and stored as the profile's
    # run["schedule"]; a run with none (one compiled graph) has an empty one
    schedule: Schedule = field(default_factory=Schedule)
    outputs: Mapping[str, Any] = field(default_factory=dict)  # emulated graph outputs (full numerics)
    profile_path: str | None = None  # where the profile was written, if it was
    config: dict = field(default_factory=dict)  # the run's configuration, as run["config"] stores it
    # a bundled model: its models.config.ModelConfig (untyped here: the models package is built on this module)
    cfg: Any = None
    # an imported ONNX model: its file, the dims fixed, dtype casts, lowering notes, ONNX Runtime's outputs on
    # the same inputs and the ONNX weight bytes read by the nodes on each IPU
    path: str = ""
    dims: dict = field(default_factory=dict)
    casts: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    reference: dict = field(default_factory=dict)
    weight_bytes_per_ipu: list = field(default_factory=list)

    def __post_init__(self):
        if not isinstance(self.schedule, Schedule):
            self.schedule = Schedule.build(self.schedule or {})
            if self.schedule and self.profile_data is not None and self.profile_data.run is not None:
                self.profile_data.run["schedule"] = self.schedule.to_dict()
