"""Every user file the program reads goes through here: a regular file, within the size stated for its
kind, gzip with a bound on what it expands to, JSON with a bound on nesting.

A FIFO, a device (``/dev/zero``), a socket or a folder given where a file belongs is refused before
anything blocks or streams: the file is opened with ``O_NONBLOCK`` and checked with ``fstat`` on the
open descriptor (no race between a check and the open), then read up to its kind's limit + 1 byte.

Limits (bytes; what each kind really is, with room):

=============  ================  =========================================================================
kind           limit             why
=============  ================  =========================================================================
config         1 MiB             a TOML run config is a few hundred bytes
onnx           2 GiB             protobuf's own message limit; larger models keep weights in external data
inputs         4 GiB             an .npz of a model's inputs (members bounded the same, uncompressed)
torch_trace    512 MiB           a PyTorch profiler trace of a training step is tens of MB; JSON parsing
                                 takes ~10x the text in memory.  Gzip: 512 MiB decompressed
csv            256 MiB           sweep.csv and validation data: thousands of rows of ~30 fields
sweep_meta     16 MiB            sweep.json: the grid and base config of a sweep
sweep_row      256 KiB           rows/<key>.json of a sweep point: ~2 KB (config fields and metrics); a resume reads
                                 one per point (10,000 at most without --yes: 2.5 GiB of planted rows at worst)
=============  ================  =========================================================================

Inside a folder that is the trust boundary (a sweep folder), files are read with ``dir_fd`` (the folder's
descriptor, opened by the caller without following links) and ``follow_links=False``: a symbolic link is
refused like a FIFO, so nothing outside the folder is ever opened.
"""

from __future__ import annotations

import json
import os
import stat
import zlib
from collections.abc import Callable

from popvision_lite.errors import ConfigError

MiB = 1 << 20
LIMITS = {
    "config": 1 * MiB,
    "onnx": 2048 * MiB,
    "inputs": 4096 * MiB,
    "torch_trace": 512 * MiB,
    "csv": 256 * MiB,
    "sweep_meta": 16 * MiB,
    "sweep_row": MiB // 4,
}
MAX_JSON_DEPTH = 64   # a Chrome trace nests 3-4 levels (traceEvents -> event -> args -> shapes)

ErrorFactory = Callable[[str], Exception]


def _default_error(path) -> ErrorFactory:
    return lambda problem: ConfigError(f"{os.fspath(path)}: {problem}")


def check_regular(path, what: str, error: ErrorFactory | None = None, *, dir_fd: int | None = None,
                  follow_links: bool = True) -> os.stat_result:
    """``os.stat`` of ``path``, refusing anything but a regular file (without opening it).  ``dir_fd``: ``path``
    is relative to that folder descriptor; ``follow_links=False``: a symbolic link is refused, not followed."""
    err = error or _default_error(path)
    try:
        st = os.stat(os.fspath(path), dir_fd=dir_fd, follow_symlinks=follow_links)
    except FileNotFoundError:
        raise err(f"cannot read {what}: not found (no such file)") from None
    except OSError as e:
        raise err(f"cannot read {what}: {e.strerror or e}") from None
    _refuse_special(st, what, err)
    return st


def _refuse_special(st, what: str, err: ErrorFactory) -> None:
    if stat.S_ISREG(st.st_mode):
        return
    kind = ("a folder" if stat.S_ISDIR(st.st_mode) else "a symbolic link" if stat.S_ISLNK(st.st_mode)
            else "a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode)
            else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
            else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
    raise err(f"cannot read {what}: it is {kind}, not a regular file; refusing to read it")


def read_bytes(path, kind: str, what: str | None = None, error: ErrorFactory | None = None,
               max_bytes: int | None = None, *, dir_fd: int | None = None, follow_links: bool = True) -> bytes:
    """The bytes of the regular file ``path`` of ``kind`` (a key of :data:`LIMITS`); ``dir_fd`` and
    ``follow_links`` as for :func:`check_regular` (``O_NOFOLLOW`` on the open too)."""
    what = what or kind.replace("_", " ") + " file"
    err = error or _default_error(path)
    limit = LIMITS[kind] if max_bytes is None else max_bytes
    check_regular(path, what, err, dir_fd=dir_fd, follow_links=follow_links)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(os.fspath(path), flags, dir_fd=dir_fd)
    except OSError as e:
        raise err(f"cannot read {what}: {e.strerror or e}") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        _refuse_special(st, what, err)  # the file opened is the one checked
        if st.st_size > limit:
            raise err(f"{what} is {st.st_size:,} bytes, more than the {limit:,} allowed for a {kind} file")
        try:
            data = fh.read(limit + 1)
        except OSError as e:
            raise err(f"cannot read {what}: {e.strerror or e}") from None
    if len(data) > limit:
        raise err(f"{what} is more than the {limit:,} bytes allowed for a {kind} file")
    return data


def gunzip_bounded(data: bytes, max_bytes: int, what: str, error: ErrorFactory) -> bytes:
    """``data`` decompressed (every gzip member), refusing to expand past ``max_bytes``."""
    out = []
    total = 0
    rest = data
    try:
        while rest:
            d = zlib.decompressobj(wbits=31)
            while rest:
                chunk = d.decompress(rest, max_bytes + 1 - total)
                total += len(chunk)
                out.append(chunk)
                if total > max_bytes:
                    raise error(f"{what} expands to more than {max_bytes:,} bytes when decompressed "
                                "(a gzip bomb, or a trace too large to read)")
                rest = d.unconsumed_tail
                if d.eof:
                    break
            if not d.eof:
                raise error(f"corrupt gzip file: {what} ends before its compressed stream does")
            rest = d.unused_data.lstrip(b"\0")
    except zlib.error as e:
        raise error(f"corrupt gzip file: {e}") from None
    return b"".join(out)


def read_maybe_gzip(path, kind: str, what: str | None = None, error: ErrorFactory | None = None) -> bytes:
    """The file's bytes; a gzip file (magic 1f 8b) is decompressed within the same limit."""
    what = what or kind.replace("_", " ") + " file"
    err = error or _default_error(path)
    data = read_bytes(path, kind, what, err)
    if data[:2] == b"\x1f\x8b":
        data = gunzip_bounded(data, LIMITS[kind], what, err)
    return data


def check_depth(obj, what: str, max_depth: int, error: ErrorFactory) -> None:
    """``error`` when dicts/lists in ``obj`` nest deeper than ``max_depth`` (iterative: no recursion)."""
    stack = [(obj, 0)]
    while stack:
        o, d = stack.pop()
        if d > max_depth:
            raise error(f"{what}: nested more than {max_depth} levels deep")
        if isinstance(o, dict):
            stack.extend((v, d + 1) for v in o.values())
        elif isinstance(o, list | tuple):
            stack.extend((v, d + 1) for v in o)


def parse_json(data: bytes, what: str, error: ErrorFactory, max_depth: int = MAX_JSON_DEPTH, allow_nan: bool = False):
    """JSON from bytes; malformed text, non-UTF-8, numbers Python cannot hold and nesting past
    ``max_depth`` (or past the parser's own recursion limit) are ``error``\\ s naming the problem.
    ``allow_nan``: the ``NaN`` literal Python's own ``json.dump`` writes for a missing number is read as NaN
    (``Infinity`` never is)."""
    try:
        obj = json.loads(data, parse_constant=_nan_only if allow_nan else _no_constant)
    except RecursionError:
        raise error(f"{what}: nested more than {max_depth} levels deep") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise error(f"not a JSON file: {e}") from None
    except ValueError as e:  # a number of thousands of digits (int parsing limit), NaN/Infinity literal
        raise error(f"not a JSON file: {str(e).splitlines()[0]}") from None
    check_depth(obj, what, max_depth, error)
    return obj


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _nan_only(name: str):
    if name == "NaN":
        return float("nan")
    return _no_constant(name)


def read_json(path, kind: str, what: str | None = None, error: ErrorFactory | None = None,
              max_depth: int = MAX_JSON_DEPTH):
    """A JSON (or gzipped JSON) file of ``kind``, every bound above applied."""
    what = what or kind.replace("_", " ") + " file"
    err = error or _default_error(path)
    return parse_json(read_maybe_gzip(path, kind, what, err), what, err, max_depth)


def read_text(path, kind: str, what: str | None = None, error: ErrorFactory | None = None,
              max_bytes: int | None = None) -> str:
    """UTF-8 text of the regular file ``path`` of ``kind``."""
    what = what or kind.replace("_", " ") + " file"
    err = error or _default_error(path)
    data = read_bytes(path, kind, what, err, max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise err(f"cannot read {what}: not UTF-8 text ({e})") from None


def read_npz(path, what: str = "inputs file", error: ErrorFactory | None = None) -> dict:
    """Arrays of an .npz file (``kind`` inputs): the file bounded like any other, and the sum of its
    members' uncompressed sizes bounded the same before numpy inflates them (a zip bomb stops here).
    Pickled objects are refused (numpy's ``allow_pickle=False``)."""
    import io
    import zipfile

    import numpy as np

    err = error or _default_error(path)
    data = read_bytes(path, "inputs", what, err)
    limit = LIMITS["inputs"]
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            total = sum(i.file_size for i in zf.infolist())
        if total > limit:
            raise err(f"{what} expands to {total:,} bytes, more than the {limit:,} allowed")
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError) as e:
        raise err(f"cannot read {what} ({str(e)[:200]}); expected an .npz of arrays") from None
