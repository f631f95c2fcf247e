"""Detect any open or read of files in a folder, from any code (Python, Qt's C++, a child process).

Linux inotify (through ctypes, no extra package): the kernel reports ``IN_OPEN`` / ``IN_ACCESS`` of
every file in a watched folder, whoever opens it, so a test can plant files that hostile text points
at (``<img src="file:///.../bait.png">``) and assert nothing ever touched them.  Python's audit hooks
see only Python's own ``open``; Qt reads resources with C++ QFile, which only the kernel sees.
Access times are no substitute: relatime mounts update them at most once a day.
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys

IN_ACCESS = 0x001
IN_OPEN = 0x020
_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000
_EVENT = struct.Struct("iIII")


def available() -> bool:
    return sys.platform.startswith("linux")


class OpenWatch:
    """Watch ``folders`` (not recursive); :meth:`events` returns ``[(file name, 'open'|'read'), ...]``
    seen since the last call.  Use as a context manager, or call :meth:`close`."""

    def __init__(self, *folders):
        if not available():
            raise OSError("open watching needs Linux inotify")
        self._libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self._libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        self._names = {}
        for folder in folders:
            wd = self._libc.inotify_add_watch(self.fd, os.fsencode(str(folder)), IN_OPEN | IN_ACCESS)
            if wd < 0:
                raise OSError(ctypes.get_errno(), f"cannot watch {folder}")
            self._names[wd] = str(folder)

    def events(self) -> list[tuple[str, str]]:
        out = []
        while True:
            try:
                buf = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return out
            i = 0
            while i < len(buf):
                wd, mask, _cookie, n = _EVENT.unpack_from(buf, i)
                name = buf[i + _EVENT.size:i + _EVENT.size + n].rstrip(b"\0").decode(errors="replace")
                out.append((os.path.join(self._names.get(wd, "?"), name), "open" if mask & IN_OPEN else "read"))
                i += _EVENT.size + n

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
