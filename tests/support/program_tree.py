"""Walks of an emulator program tree for tests."""

from popvision_lite.emulator import programs as P


def copies(prog):
    """Every Copy program in the tree under ``prog``, in program order (sequences' programs, loops' bodies)."""
    if isinstance(prog, P.Copy):
        yield prog
    for p in getattr(prog, "programs", ()) or ():
        yield from copies(p)
    body = getattr(prog, "body", None)
    if body is not None:
        yield from copies(body)
