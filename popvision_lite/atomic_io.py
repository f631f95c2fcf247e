"""Atomic file writing, shared by every layer that writes a file (profiles, exports, sweep rows, the CLI's
output checks): temp file in the same folder, then ``os.replace``, so a reader never sees half a file."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import tempfile
import time
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


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def check_destination(path, example: str = "") -> tuple[Path, Path]:
    """(path, folder) for a file about to be written; ProfileError naming ``path`` when it is a
    directory, names a folder (trailing slash), exists as something other than a regular file (a device
    such as /dev/null, a FIFO, a socket: replacing it would destroy it) or its folder does not exist.
    ``example`` is a file name to suggest."""
    text = os.fspath(path)
    path = Path(text)
    folder = path.parent if str(path.parent) else Path(".")
    hint = f"; give a file name such as {example}" if example else "; give a file name"
    if text.endswith(("/", os.sep)):
        what = "is a folder" if path.is_dir() else "names a folder (trailing slash) that does not exist"
        raise ProfileError(text, f"{what}{hint}")
    if path.is_dir():
        raise ProfileError(path, "is a directory" + hint)
    with contextlib.suppress(OSError):
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise ProfileError(path, f"exists and is {_kind(st.st_mode)}, not a regular file; refusing to "
                                     f"replace it{hint}")
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise ProfileError(path, f"folder '{folder}' {what}")
    return path, folder


def check_writable(path, example: str = "", need_bytes: int = 0) -> Path:
    """Everything :func:`check_destination` checks, plus: a file can really be created in the folder,
    and (when ``need_bytes`` is known) the disk has that much room.  Called before long work."""
    path, folder = check_destination(path, example)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as e:
        raise ProfileError(path, f"cannot create a file in folder '{folder}': {e.strerror or e}") from e
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(tmp)
    if need_bytes:
        with contextlib.suppress(OSError):
            import shutil

            free = shutil.disk_usage(folder).free
            if free < need_bytes:
                raise ProfileError(path, f"folder '{folder}' has {free:,} bytes free, the file needs about "
                                         f"{need_bytes:,}")
    return path


# our temp files: ".<target name>.<8 mkstemp characters>.tmp"
_TMP_TAIL = re.compile(r"^[a-z0-9_]{8}\.tmp$")
STALE_SECONDS = 24 * 3600  # where no lock can tell (no fcntl): a temp file this old is a dead writer's


def lock_temp(fd: int) -> None:
    """Mark a temp file as being written (an exclusive lock, released when its writer closes or dies)."""
    with contextlib.suppress(ImportError, OSError):
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def clean_stale_temps(path: Path, folder: Path) -> list[str]:
    """Remove temp files of our own naming for ``path`` left by a killed writer (kill -9 skips the
    clean-up).  A temp file whose writer is alive holds a lock and is kept."""
    removed = []
    prefix = f".{path.name}."
    try:
        names = [n for n in os.listdir(folder) if n.startswith(prefix) and _TMP_TAIL.match(n[len(prefix):])]
    except OSError:
        return removed
    for n in names:
        p = folder / n
        try:
            fd = os.open(p, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            continue
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            try:
                import fcntl

                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # fails while its writer holds the lock
            except ImportError:
                if time.time() - os.fstat(fd).st_mtime < STALE_SECONDS:
                    continue
            except OSError:
                continue
            os.unlink(p)
            removed.append(n)
        except OSError:
            continue
        finally:
            os.close(fd)
    return removed


def make_temp(path: Path, folder: Path) -> tuple[int, str]:
    """A locked temp file beside ``path`` (stale ones of ours removed first); ProfileError if impossible.

    The file is created under a name :func:`clean_stale_temps` does not take (``....new``), locked, and only then
    given its temp name: created under the temp name, it was unlocked for a moment, and a concurrent writer of
    the same path cleaning up took it for a dead writer's and removed it, so this writer's rename failed
    (tests/test_concurrent_writers.py, seen on a loaded machine, 2026-12-07).  The temp name is taken with a
    hard link, which fails where the name exists (another writer's live temp file), never replacing it."""
    clean_stale_temps(path, folder)
    for _ in range(100):
        try:
            fd, new = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".new", dir=folder)
        except OSError as e:
            raise ProfileError(path, f"cannot create a file in folder '{folder}': {e.strerror or e}") from e
        lock_temp(fd)
        tmp = new[: -len(".new")] + ".tmp"
        try:
            os.link(new, tmp)
        except FileExistsError:
            _discard(fd, new)
            continue
        except OSError:  # no hard links on this file system: a rename (its name is mkstemp's, as before)
            try:
                os.rename(new, tmp)
            except OSError as e:
                _discard(fd, new)
                raise ProfileError(path, f"cannot create a file in folder '{folder}': {e.strerror or e}") from e
            return fd, tmp
        with contextlib.suppress(OSError):
            os.unlink(new)
        return fd, tmp
    raise ProfileError(path, f"cannot create a temp file in folder '{folder}': every name tried exists")


def _discard(fd: int, name: str) -> None:
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(name)


def replace_locked(fd: int, tmp, path) -> None:
    """Rename the temp file ``tmp`` (open as ``fd``, locked by :func:`make_temp`) to ``path``, then close ``fd``.

    The lock must outlive the rename: a temp file closed first is, until renamed, unlocked - a concurrent
    writer of the same path takes it for a dead writer's and removes it (:func:`clean_stale_temps`), and the
    rename fails.  Windows cannot rename an open file, and has no such locks: there, close first."""
    if os.name == "nt":
        os.close(fd)
        os.replace(tmp, path)
        return
    try:
        os.replace(tmp, path)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_file(path, mode: str = "w", newline: str | None = None, gzip: bool = False):
    """Yield a file handle (text mode "w" or binary "wb"); on success the file appears at ``path``
    in one step.  ``gzip``: what is written is gzip-compressed on its way to the file (``.json.gz``).

    Errors (missing folder, permission, disk full) raise ProfileError naming ``path``;
    on any error the temporary file is removed and ``path`` is left untouched.
    """
    path, folder = check_destination(path)
    fd, tmp = make_temp(path, folder)
    ok = False
    publish_mode(fd)
    hold = os.dup(fd)  # the lock lives on while the file handle is closed, until the rename (replace_locked)
    try:
        if gzip:
            import gzip as _gzip
            import io

            raw = os.fdopen(fd, "wb")
            # mtime 0: the same content gives the same bytes (no time stamp in the header)
            z = _gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0)
            fh = z if "b" in mode else io.TextIOWrapper(z, encoding="utf-8", newline=newline)
            with raw, z, fh:
                yield fh
        elif "b" in mode:
            with os.fdopen(fd, mode) as fh:
                yield fh
        else:
            with os.fdopen(fd, mode, encoding="utf-8", newline=newline) as fh:
                yield fh
        hold, locked = -1, hold
        replace_locked(locked, tmp, path)  # closes it, renamed or not
        ok = True
    except OSError as e:
        if e.errno == errno.ENOSPC:
            raise ProfileError(path, "disk full while writing") from e
        raise ProfileError(path, f"cannot write: {e.strerror or e}") from e
    finally:
        if hold >= 0:
            with contextlib.suppress(OSError):
                os.close(hold)
        if not ok:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def atomic_text(path, newline: str | None = None, gzip: bool = False):
    """:func:`atomic_file` in text mode (UTF-8)."""
    return atomic_file(path, "w", newline=newline, gzip=gzip)


def write_bytes_atomic(path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; returns the path."""
    with atomic_file(path, "wb") as fh:
        fh.write(data)
    return Path(path)
