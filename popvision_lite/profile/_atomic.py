"""Atomic file writing shared by the exports: temp file in the same folder + os.replace."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path

from popvision_lite.errors import ProfileError


def _read_umask() -> int:
    umask = os.umask(0o022)  # os.umask only reads by setting: done once, at import, not per write
    os.umask(umask)
    return umask


_UMASK = _read_umask()


def publish_mode(fd: int) -> None:
    """Give a ``mkstemp`` file (always 0600) the mode a plain ``open`` would have had: 0666 less the
    umask, so profiles and exports are readable by others as usual."""
    if hasattr(os, "fchmod"):  # POSIX; Windows has no such modes
        with contextlib.suppress(OSError):  # e.g. a file system without modes: keep what it has
            os.fchmod(fd, 0o666 & ~_UMASK)


def check_destination(path, example: str = "") -> tuple[Path, Path]:
    """(path, folder) for a file about to be written; ProfileError naming ``path`` when it is a
    directory or its folder does not exist.  ``example`` is a file name to suggest."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise ProfileError(path, "is a directory; give a file name" + (f" such as {example}" if example else ""))
    if not folder.is_dir():
        raise ProfileError(path, f"folder '{folder}' does not exist")
    return path, folder


@contextlib.contextmanager
def atomic_file(path, mode: str = "w", newline: str | None = None):
    """Yield a file handle (text mode "w" or binary "wb"); on success the file appears at ``path``
    in one step.

    Errors (missing folder, permission, disk full) raise ProfileError naming ``path``;
    on any error the temporary file is removed and ``path`` is left untouched.
    """
    path, folder = check_destination(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as e:
        raise ProfileError(path, f"cannot create a file in folder '{folder}': {e.strerror or e}") from e
    ok = False
    publish_mode(fd)
    try:
        if "b" in mode:
            fh = os.fdopen(fd, mode)
        else:
            fh = os.fdopen(fd, mode, encoding="utf-8", newline=newline)
        with fh:
            yield fh
        os.replace(tmp, path)
        ok = True
    except OSError as e:
        if e.errno == errno.ENOSPC:
            raise ProfileError(path, "disk full while writing") from e
        raise ProfileError(path, f"cannot write: {e.strerror or e}") from e
    finally:
        if not ok:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def atomic_text(path, newline: str | None = None):
    """:func:`atomic_file` in text mode (UTF-8)."""
    return atomic_file(path, "w", newline=newline)


def write_bytes_atomic(path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; returns the path."""
    with atomic_file(path, "wb") as fh:
        fh.write(data)
    return Path(path)
