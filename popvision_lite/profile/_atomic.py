"""Atomic file writing shared by the exports: temp file in the same folder + os.replace."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path

from popvision_lite.errors import ProfileError


@contextlib.contextmanager
def atomic_text(path, newline: str | None = None):
    """Yield a text file handle; on success the file appears at ``path`` in one step.

    Errors (missing folder, permission, disk full) raise ProfileError naming ``path``;
    on any error the temporary file is removed and ``path`` is left untouched.
    """
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise ProfileError(path, "is a directory; give a file name")
    if not folder.is_dir():
        raise ProfileError(path, f"folder '{folder}' does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as e:
        raise ProfileError(path, f"cannot create a file in folder '{folder}': {e.strerror or e}") from e
    ok = False
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline=newline) as fh:
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
