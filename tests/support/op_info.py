"""A build whose first op lacks one recorded field: the GPU estimate's build-only op list must then decline
(``engine.op_tables`` returns None) and the caller emulate the run (tests/test_gpu_op_profile*.py)."""

from __future__ import annotations


def drop_first_ops_field(monkeypatch, key: str) -> None:
    """``engine.op_tables`` sees its graph's first op without ``key`` in its recorded info."""
    from popvision_lite.emulator import engine

    real = engine.op_tables

    def drop_one(graph, program):
        name = next(iter(graph.op_info))
        graph.op_info[name] = {k: v for k, v in graph.op_info[name].items() if k != key}
        return real(graph, program)

    monkeypatch.setattr(engine, "op_tables", drop_one)
