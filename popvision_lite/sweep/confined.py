"""Files inside a sweep folder, opened without ever leaving it (decision 0210).

A sweep folder is a trust boundary: it may come from someone else (copied, shared, on a shared file system), and
a file planted in it must not make a sweep read, write, create or delete anything outside it.  The folder itself
is the one the user named (``-o``); everything *inside* it goes through here:

* every name is opened relative to a descriptor of its folder (``dir_fd``), with ``O_NOFOLLOW`` (a symbolic link
  is refused, never followed) and ``O_NONBLOCK`` (a FIFO never blocks), and checked with ``fstat`` on the open
  descriptor: it must be a regular file (a FIFO, device, socket or folder is refused);
* the sub-folders ``profiles`` and ``rows`` are opened with ``O_DIRECTORY | O_NOFOLLOW``: a link to another
  folder is refused, so nothing is written into or deleted from it;
* a file the sweep creates is created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (a name planted meanwhile makes the
  create fail instead of being followed); an atomic write renames the temp file within the same folder
  descriptor (a rename replaces the directory entry, never a link's target);
* lock files are opened for writing only when they are regular files with one link.

Every refusal is a :class:`FolderError` (a ``ConfigError``: exit 2) naming the folder, the file and the problem.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path

from popvision_lite.errors import ConfigError
from popvision_lite.terminal import terminal_text

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


class FolderError(ConfigError):
    """A file inside a sweep folder that the sweep may not use (a link, a FIFO, a device, a folder ...)."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"),
                       (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISREG, "a regular file")):
        if test(mode):
            return name
    return "not a regular file"


def error(folder, name: str, problem: str) -> FolderError:
    what = f"sweep folder file '{folder}/{name}'" if name else f"sweep folder '{folder}'"
    return FolderError(f"argument -o/--output: {terminal_text(what)}: {problem}")


def _refuse(folder, name: str, mode: int, want: str) -> FolderError:
    return error(folder, name, f"it is {_kind(mode)}, not {want}; a sweep opens only its own files inside its "
                               "folder and never follows a link out of it: remove it and run the command again")


def open_folder(folder) -> int:
    """A descriptor of the sweep folder the user named (the one path that may be a link: it is the user's)."""
    try:
        return os.open(os.fspath(folder), os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    except OSError as e:
        raise error(folder, "", f"cannot open it as a folder: {e.strerror or e}") from None


def open_subfolder(dir_fd: int, name: str, folder, create: bool = True) -> int:
    """A descriptor of the sub-folder ``name`` of the folder open as ``dir_fd`` (created when missing); a link, a
    file or anything but a real folder there is a FolderError."""
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o777, dir_fd=dir_fd)
    try:
        return os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=dir_fd)
    except OSError as e:
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            raise error(folder, name, f"cannot open it: {e.strerror or e}") from None
        raise _refuse(folder, name, st.st_mode, "a folder") from None


@contextlib.contextmanager
def folder_fd(folder, sub: str | None = None, create: bool = True):
    """``with folder_fd(out, "rows") as fd:`` - the folder's (or its sub-folder's) descriptor, closed after."""
    top = open_folder(folder)
    try:
        if sub is None:
            yield top
            return
        fd = open_subfolder(top, sub, folder, create)
        try:
            yield fd
        finally:
            os.close(fd)
    finally:
        os.close(top)


def check_entries(folder, files: tuple[str, ...], folders: tuple[str, ...]) -> None:
    """Before a sweep uses ``folder``: each of ``files`` is absent or a regular file, each of ``folders`` absent or
    a real folder (``lstat``: a link is reported as a link).  The opens below check again on the descriptor."""
    with folder_fd(folder) as fd:
        for names, want, ok in ((files, "a regular file", stat.S_ISREG), (folders, "a folder", stat.S_ISDIR)):
            for name in names:
                try:
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                except OSError as e:
                    raise error(folder, name, f"cannot read it: {e.strerror or e}") from None
                if not ok(st.st_mode):
                    raise _refuse(folder, name, st.st_mode, want)


def open_lock(dir_fd: int, name: str, folder, write: bool = False) -> int:
    """The lock file ``name`` of the folder open as ``dir_fd``, created when missing; open for reading and
    writing with ``write`` (else read only: a ``flock`` needs no more).  A link, FIFO, device or folder there, or
    a file with more than one link (a hard link to someone's file), is a FolderError: never opened for writing."""
    flags = (os.O_RDWR if write else os.O_RDONLY) | _NOFOLLOW | _NONBLOCK | _CLOEXEC
    for _ in range(8):  # created and removed by someone else between our two opens: try again
        try:
            fd = os.open(name, flags, dir_fd=dir_fd)
        except FileNotFoundError:
            try:
                fd = os.open(name, flags | os.O_CREAT | os.O_EXCL, 0o666, dir_fd=dir_fd)
            except FileExistsError:
                continue
            except OSError as e:
                raise error(folder, name, f"cannot create it: {e.strerror or e}") from None
        except OSError as e:
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:
                raise error(folder, name, f"cannot open it: {e.strerror or e}") from None
            raise _refuse(folder, name, st.st_mode, "a regular file") from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            os.close(fd)
            if stat.S_ISREG(st.st_mode):
                raise error(folder, name, f"it has {st.st_nlink} hard links; a lock file of the sweep is its own file, "
                                          "never another's: remove it and run the command again")
            raise _refuse(folder, name, st.st_mode, "a regular file")
        return fd
    raise error(folder, name, "it keeps being created and removed by another process; cannot lock it")


def read_small(dir_fd: int, name: str, kind: str, folder, max_bytes: int | None = None) -> bytes | None:
    """The bytes of the regular file ``name`` in the folder open as ``dir_fd``, through the ``input_files`` door
    (``kind``'s size bound, no link followed, a FIFO never blocks); None when it is absent.  A link, FIFO,
    device or an over-long file is a FolderError naming it."""
    from popvision_lite import input_files

    try:
        return input_files.read_bytes(name, kind, "it", error=lambda problem: error(folder, name, problem),
                                      max_bytes=max_bytes, dir_fd=dir_fd, follow_links=False)
    except FolderError:
        try:
            os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        raise


def write_atomic(dir_fd: int, name: str, data: bytes, folder) -> None:
    """``data`` as the file ``name`` of the folder open as ``dir_fd``, all or nothing: written to a new temp file
    ``.<name>.<random>.tmp`` (``O_CREAT | O_EXCL | O_NOFOLLOW``), then renamed onto ``name`` within the folder."""
    from popvision_lite.atomic_io import publish_mode

    tmp = f".{name}.{secrets.token_hex(4)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600, dir_fd=dir_fd)
    except OSError as e:
        raise error(folder, name, f"cannot write it: {e.strerror or e}") from None
    try:
        publish_mode(fd)
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.close(fd)
        fd = -1
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        tmp = ""
    except OSError as e:
        what = "disk full while writing it" if e.errno == errno.ENOSPC else f"cannot write it: {e.strerror or e}"
        raise error(folder, name, what) from None
    finally:
        if fd >= 0:
            os.close(fd)
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)


def is_regular(dir_fd: int, name: str) -> bool:
    """Whether ``name`` in the folder open as ``dir_fd`` is a regular file (a link is not followed)."""
    try:
        return stat.S_ISREG(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def remove_temps(dir_fd: int) -> int:
    """Remove the regular files named ``.*.tmp`` (temp files a killed writer left) in the folder open as
    ``dir_fd``; links, FIFOs and folders of such names are left alone.  Returns how many were removed."""
    n = 0
    try:
        names = os.listdir(dir_fd)
    except OSError:
        return 0
    for name in names:
        if name.startswith(".") and name.endswith(".tmp") and is_regular(dir_fd, name):
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=dir_fd)
                n += 1
    return n


def exists_inside(folder, rel: str) -> bool:
    """Whether ``rel`` (a path relative to ``folder``, e.g. ``profiles/KEY.pvl``) is a regular file reached
    without following any link (each component opened with ``O_NOFOLLOW``)."""
    parts = Path(rel).parts
    if not parts or Path(rel).is_absolute() or any(p in ("..", ".", "") for p in parts):
        return False
    try:
        fd = open_folder(folder)
    except FolderError:
        return False
    try:
        for part in parts[:-1]:
            try:
                nfd = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
            except OSError:
                return False
            os.close(fd)
            fd = nfd
        return is_regular(fd, parts[-1])
    finally:
        os.close(fd)
