"""Who may write into a sweep folder, and when: one sweep at a time, and no point commits after a cancel.

* ``FolderLock``: the client of a sweep holds an exclusive lock on ``<folder>/.sweep.lock`` while it runs;
  a second sweep into the same folder is refused, naming the first (pid, host).  The kernel releases the
  lock when its holder dies (kill -9 included), so a crashed sweep never blocks the next one.
* The *run file* ``<folder>/.sweep-run`` names the sweep run that may commit results.  A point commits
  (renames its profile into place, writes its row) only while the run file names its run, and holds a
  shared lock on ``<folder>/.commit.lock`` from that check until its row is written; cancelling takes the
  same lock exclusively to rewrite the run file.  So every row is either committed before the cancel
  (and found by the client's last look at ``rows/``) or never: a point still running when the sweep was
  cancelled - inside a worker of a remote cluster that cannot be stopped from here - discards its results.

Locks are ``fcntl.flock`` locks (on NFS, Linux maps them to byte-range locks that the server enforces).
Where there is no ``fcntl`` (Windows) the locks are no-ops and only the run file is checked.

Every one of these files is opened through ``confined`` (decision 0210): relative to the folder's descriptor,
never through a link, a regular file or refused (a planted ``.sweep.lock`` link to someone's file is refused
with exit 2 and the file is left as it was; a FIFO never blocks), and the holder text read from a lock file
is made safe to print (``terminal_text``).
"""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from pathlib import Path

from popvision_lite.errors import ConfigError
from popvision_lite.sweep import confined
from popvision_lite.terminal import terminal_text

LOCK = ".sweep.lock"
RUN = ".sweep-run"
COMMIT_LOCK = ".commit.lock"
CANCELLED = "cancelled "
RUN_MAX_BYTES = 256  # the run file holds a run id (32 hex digits), maybe after "cancelled "
HOLDER_MAX_BYTES = 200  # what is shown of a lock's holder ("pid N on HOST")

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None


class FolderLock:
    """The exclusive right to run a sweep into ``folder``; ConfigError naming the holder when taken."""

    def __init__(self, folder):
        self.folder = Path(folder)
        self.path = self.folder / LOCK
        self._fd: int | None = None

    def acquire(self) -> FolderLock:
        with confined.folder_fd(self.folder) as dfd:
            fd = confined.open_lock(dfd, LOCK, self.folder, write=True)
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                try:
                    raw = os.pread(fd, HOLDER_MAX_BYTES, 0).decode("utf-8", "replace").strip()
                finally:
                    os.close(fd)
                holder = terminal_text(raw) or "unknown process"
                raise ConfigError(f"argument -o/--output: another sweep is running into "
                                  f"{terminal_text(self.path.parent)} ({holder}); wait for it to finish or cancel "
                                  "it, then run this command again (finished points are resumed)") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing the descriptor releases the lock
            self._fd = None

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


@contextlib.contextmanager
def _commit_lock(folder, exclusive: bool):
    with confined.folder_fd(folder) as dfd:
        fd = confined.open_lock(dfd, COMMIT_LOCK, folder)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def _write_run(folder, text: str) -> None:
    with confined.folder_fd(folder) as dfd:
        confined.write_atomic(dfd, RUN, text.encode("utf-8"), folder)


def start_run(folder) -> str:
    """A new run id, written to the run file: points of this run may commit, those of earlier runs not."""
    run_id = uuid.uuid4().hex
    with _commit_lock(folder, exclusive=True):
        _write_run(folder, run_id)
    return run_id


def cancel_run(folder, run_id: str) -> None:
    """From now on no point of ``run_id`` commits; returns once every commit under way has finished."""
    with _commit_lock(folder, exclusive=True):
        _write_run(folder, CANCELLED + run_id)


def is_current(folder, run_id: str | None) -> bool:
    """Whether points of ``run_id`` may still commit (``None``: a point run outside a sweep, always)."""
    if run_id is None:
        return True
    try:
        with confined.folder_fd(folder) as dfd:
            data = confined.read_small(dfd, RUN, "sweep_row", folder, max_bytes=RUN_MAX_BYTES)
    except ConfigError:  # a FIFO, a link, a device or a long file there: no run of ours is current
        return False
    return data is not None and data == run_id.encode("utf-8")


@contextlib.contextmanager
def commit(folder, run_id: str | None):
    """``with commit(folder, run_id) as ok:`` - while the block runs, ``ok`` stays true (a cancel waits for
    the block to end); when false, the point must not write anything."""
    if run_id is None:
        yield True
        return
    with _commit_lock(folder, exclusive=False):
        yield is_current(folder, run_id)
