"""Programs: the control flow the Engine runs (Poplar's program classes, simplified).

Each program has ``name`` (debug name) and ``op`` (the model op it belongs to; children without
their own op inherit it).
"""

from __future__ import annotations

from popvision_lite.errors import EmulatorError


class Program:
    kind = "Program"

    def __init__(self, name: str | None = None, op: str | None = None):
        self.name = name or self.kind
        self.op = op

    def children(self) -> list[Program]:
        return []

    def __repr__(self) -> str:
        return f"{self.kind}({self.name!r})"


class Sequence(Program):
    kind = "Sequence"

    def __init__(self, programs=(), name: str | None = None, op: str | None = None, call_args=()):
        super().__init__(name, op)
        self.programs = list(programs)
        # a call of an outlined body: the tensors that take this call's arguments, written as the call
        # starts (the values the previous call left in them are dead once last read)
        self.call_args = tuple(call_args)
        for p in self.programs:
            if not isinstance(p, Program):
                raise EmulatorError(f"Sequence '{self.name}': element {p!r} is not a program")

    def add(self, p: Program) -> Sequence:
        if not isinstance(p, Program):
            raise EmulatorError(f"Sequence '{self.name}': {p!r} is not a program")
        self.programs.append(p)
        return self

    def children(self):
        return self.programs


class Execute(Program):
    kind = "Execute"

    def __init__(self, cs, name: str | None = None, op: str | None = None):
        from popvision_lite.emulator.graph import ComputeSet

        if not isinstance(cs, ComputeSet):
            raise EmulatorError(f"Execute '{name}': {cs!r} is not a compute set")
        super().__init__(name or cs.name, op if op is not None else cs.op)
        self.cs = cs


class Copy(Program):
    kind = "Copy"

    def __init__(self, src, dst, name: str | None = None, op: str | None = None, broadcast: bool = False):
        from popvision_lite.emulator.graph import as_view

        super().__init__(name, op)
        # ``broadcast``: the op says src's vertices repeat a few source blocks, each sent to several destination
        # tiles (the matmul's B blocks); the compile may then cost the copy per distinct block (decision 0440).
        # The data moved is src -> dst either way.
        self.broadcast = bool(broadcast)
        # Set by the op that made the copy, where it knows the copy's pattern (hints to the compile, which checks
        # them or takes the expanded path; the data moved is the same): ``units``, a broadcast's destination
        # units and their blocks (ops/conv.py, decision 0479); ``gather``, a partials gather's blocks and their
        # shapes (ops/matmul_partials.BlockGather, decision 0480); ``transpose``, an on-tile transpose of a kernel's
        # blocks (ops/conv.KernelTranspose, decision 0490).
        self.units = None
        self.gather = None
        self.transpose = None
        self.src = as_view(src, f"Copy '{self.name}' src")
        self.dst = as_view(dst, f"Copy '{self.name}' dst")
        if name is None:
            self.name = f"Copy {self.src.name}->{self.dst.name}"
        if self.src.size != self.dst.size:
            raise EmulatorError(
                f"Copy '{self.name}': src '{self.src.name}' has {self.src.size} elements but dst "
                f"'{self.dst.name}' has {self.dst.size}; fix: copy views of equal size"
            )
        if self.dst.tensor.kind == "constant":
            raise EmulatorError(f"Copy '{self.name}': dst '{self.dst.name}' is a constant; fix: copy into a variable")


class Repeat(Program):
    kind = "Repeat"

    def __init__(self, count: int, body: Program, name: str | None = None, op: str | None = None):
        super().__init__(name, op)
        if not isinstance(body, Program):
            raise EmulatorError(f"Repeat '{self.name}': body {body!r} is not a program")
        if int(count) < 0 or int(count) != count:
            raise EmulatorError(f"Repeat '{self.name}': count must be a non-negative int, got {count!r}")
        self.count = int(count)
        self.body = body

    def children(self):
        return [self.body]


class Sync(Program):
    kind = "Sync"

    def __init__(self, kind: str = "internal", name: str | None = None, op: str | None = None):
        if kind not in ("internal", "global"):
            raise EmulatorError(f"Sync '{name}': kind must be 'internal' or 'global', got {kind!r}")
        super().__init__(name or f"Sync({kind})", op)
        self.sync_kind = kind


class StreamCopy(Program):
    """Copy between a host/streaming-memory buffer and a tensor; direction = argument order."""

    kind = "StreamCopy"

    def __init__(self, src, dst, name: str | None = None, op: str | None = None):
        from popvision_lite.emulator.graph import HostBuffer, as_view

        super().__init__(name, op)
        if isinstance(src, HostBuffer) and not isinstance(dst, HostBuffer):
            self.to_device = True
            self.buffer = src
            self.view = as_view(dst, f"StreamCopy '{self.name}' dst")
        elif isinstance(dst, HostBuffer) and not isinstance(src, HostBuffer):
            self.to_device = False
            self.buffer = dst
            self.view = as_view(src, f"StreamCopy '{self.name}' src")
        else:
            raise EmulatorError(
                f"StreamCopy '{self.name}': exactly one side must be a host buffer (g.add_host_buffer); "
                f"got {src!r} -> {dst!r}"
            )
        if name is None:
            self.name = (f"StreamCopy {self.buffer.name}->{self.view.name}" if self.to_device
                         else f"StreamCopy {self.view.name}->{self.buffer.name}")
        if self.buffer.size != self.view.size:
            raise EmulatorError(
                f"StreamCopy '{self.name}': buffer '{self.buffer.name}' has {self.buffer.size} elements but "
                f"tensor '{self.view.name}' side has {self.view.size}; fix: equal sizes"
            )
        if self.to_device and self.view.tensor.kind == "constant":
            raise EmulatorError(f"StreamCopy '{self.name}': cannot write constant '{self.view.name}'")
