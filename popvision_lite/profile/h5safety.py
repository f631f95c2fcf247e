"""Safe opening of an untrusted HDF5 file: what HDF5 would follow or decode on a reader's behalf.

A ``.pvl`` file is shared between people, so HDF5 features that read *outside* the file or hand
attacker-controlled bytes to a C decoder must be refused before any data is read:

* :func:`check_regular_file` - only a regular file is opened (a FIFO, device or socket would block or
  stream for ever); checked with ``os.stat`` before anything opens it.
* :func:`check_links` - one walk over every link at open: external, soft and user-defined links are
  refused anywhere in the file, and so is a file with more objects than a profile has.
* :class:`DatasetGuard` - each dataset is checked once, before its first use (its shape, its data):
  virtual datasets, external raw storage and any filter but Blosc (the only one the writer uses, id
  32001) are refused, and its claimed size must be bounded by what it stores (a 134 KB file claiming
  10^8 steps is refused instead of allocating gigabytes when a table is read).  Variable-length
  strings count their 16-byte heap references, so a 209 KB file claiming 10^9 of them is refused from
  the metadata alone; before one is read, the string bytes its references claim are summed
  (:meth:`DatasetGuard.check_vlen_heap`).  The stored bytes of every dataset checked so far may not
  exceed the file (chunks shared between datasets).  Opening checks the datasets it needs; tables are
  checked when first read, so an open costs the same whatever the file holds.
* :class:`ChunkGuard` - before HDF5's Blosc filter sees a chunk, its raw bytes are read
  (``read_direct_chunk``) and the Blosc header is checked against the dataset's declared chunk size and
  the stored chunk length.  A header claiming more bytes than the chunk holds would make the filter
  copy past its buffer and crash the process (exit 139).

Every refusal is a :class:`ProfileError` naming the file and the dataset.
"""

from __future__ import annotations

import itertools
import math
import os
import stat
import struct

import numpy as np

from popvision_lite.errors import ProfileError

BLOSC_FILTER = 32001  # hdf5plugin.Blosc; docs/profile-format.md ("Compression")
ALLOWED_FILTERS = {BLOSC_FILTER: "blosc"}
MAX_OBJECTS = 20_000  # links in a profile (today ~150); a file with millions only costs time to walk
# a variable-length element in the file: sequence length (4 bytes) + global heap id (8-byte collection
# address + 4-byte index); HDF5 file format spec, "Variable-length" datatype / global heap ID
VLEN_RECORD_BYTES = 16
MAX_CHUNK_BYTES = 64 << 20  # one decompressed chunk (the writer's largest is ~6 MB for 16 IPUs' memory)
# Blosc(LZ4, byte shuffle) compresses an all-zero array ~236:1 (measured, bench notes in docs/performance.md);
# a dataset claiming more than this many times its stored bytes is not data the writer produced.
MAX_RATIO = 300
SLACK_BYTES = 1 << 20  # small datasets: fixed overheads dominate the ratio
BLOSC_HEADER = 16
_BLOSC_MEMCPYED = 0x02


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


def check_regular_file(path, what: str = "file", err=None) -> os.stat_result:
    """``os.stat`` of ``path`` (links followed); an error naming it unless it is a regular file.

    Never opens the path, so a FIFO or device cannot block the caller.  ``err(problem)`` builds the
    exception (default ProfileError(path, problem))."""
    def fail(problem):
        return err(problem) if err else ProfileError(path, problem)

    try:
        st = os.stat(path)
    except FileNotFoundError as e:
        raise fail("no such file") from e
    except OSError as e:
        raise fail(f"cannot read {what}: {e.strerror or e}") from e
    if not stat.S_ISREG(st.st_mode):
        raise fail(f"is {_kind(st.st_mode)}, not a regular {what}; refusing to read it")
    return st


def read_head(path, n: int, err) -> bytes:
    """First ``n`` bytes of a regular file, opened non-blocking (a FIFO swapped in after the stat
    check still cannot block) and re-checked with ``fstat``."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise err(f"cannot read file: {e.strerror or e}") from e
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise err("is not a regular file; refusing to read it")
        return os.read(fd, n)
    except OSError as e:
        raise err(f"cannot read file: {e.strerror or e}") from e
    finally:
        os.close(fd)


def _chunk_bytes(ds, chunks=None) -> int:
    return math.prod(chunks or ds.chunks) * ds.dtype.itemsize


def check_dataset(ds, name: str, err) -> int:
    """Refuse a dataset whose data HDF5 would fetch from elsewhere or decode with another filter; returns
    its stored bytes."""
    import h5py

    dsid = ds.id  # low-level calls: this runs for every dataset a reader touches
    plist = ds.plist if isinstance(ds, Stored) else dsid.get_create_plist()
    layout = plist.get_layout()
    if layout == h5py.h5d.VIRTUAL:
        raise err(f"dataset '{name}' is a virtual dataset (data mapped from other files); "
                  f"not part of the format, refusing to read it")
    if plist.get_external_count() > 0:
        raise err(f"dataset '{name}' keeps its data in external files; not part of the format, "
                  f"refusing to read it")
    for i in range(plist.get_nfilters()):
        code, _flags, _values, fname = plist.get_filter(i)[:4]
        if code not in ALLOWED_FILTERS:
            label = fname.decode("ascii", "replace") if isinstance(fname, bytes) else str(fname)
            raise err(f"dataset '{name}' uses compression filter {code} ({label!r}); profiles use only "
                      f"Blosc ({BLOSC_FILTER}); refusing to decode it")
    dtype = dsid.dtype
    if layout == h5py.h5d.CHUNKED:
        cb = _chunk_bytes(ds, plist.get_chunk())
        if cb > MAX_CHUNK_BYTES:
            raise err(f"dataset '{name}' declares chunks of {cb} bytes (> {MAX_CHUNK_BYTES}); the file is "
                      f"corrupt or hostile")
    stored = int(dsid.get_storage_size())
    space = dsid.get_space()
    if space.get_simple_extent_type() == h5py.h5s.NULL:
        # a null dataspace holds nothing; readers refuse it where an array is expected
        return stored
    # the bytes the dataset's elements take in the file; a variable-length string is a heap reference
    itemsize = VLEN_RECORD_BYTES if dtype.kind == "O" else dtype.itemsize
    logical = int(space.get_simple_extent_npoints()) * itemsize
    if layout == h5py.h5d.CONTIGUOUS and logical and stored < logical:
        raise err(f"dataset '{name}' claims {logical} bytes but stores {stored}; the file is corrupt")
    if layout == h5py.h5d.CHUNKED and logical > MAX_RATIO * stored + SLACK_BYTES:
        raise err(f"dataset '{name}' claims {logical} bytes but stores only {stored} "
                  f"(more than {MAX_RATIO}:1); the file is corrupt or hostile")
    if layout == h5py.h5d.COMPACT and logical > stored:
        raise err(f"dataset '{name}' claims {logical} bytes but stores {stored}; the file is corrupt")
    return stored


def check_links(f, err) -> set[str]:
    """One walk over every link of the open h5py file ``f``; refuses links that lead outside it or are
    not part of the format.  Returns the paths of its (hard-linked) objects."""
    import h5py

    links: list = []

    def collect(name, info):  # raising inside h5py's visitor breaks its lock: collect, check after
        links.append((name, info.type))
        return True if len(links) > MAX_OBJECTS else None

    f.id.links.visit(collect, info=True)
    if len(links) > MAX_OBJECTS:
        raise err(f"the file holds more than {MAX_OBJECTS} objects; not a profile")
    names = set()
    for raw, kind in links:
        name = _text(raw)
        if kind == h5py.h5l.TYPE_HARD:
            names.add(name)
            continue
        if kind == h5py.h5l.TYPE_EXTERNAL:
            filename, path = f.id.links.get_val(raw)
            raise err(f"'{name}' is an external link to {_text(filename)!r}:{_text(path)!r}; profiles never "
                      f"refer to other files, refusing to follow it")
        if kind == h5py.h5l.TYPE_SOFT:
            raise err(f"'{name}' is a soft link to {_text(f.id.links.get_val(raw))!r}; not part of the format, "
                      f"refusing to follow it")
        raise err(f"'{name}' is a link of an unknown class; refusing to follow it")
    return names


def _text(v) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


class Stored:
    """A dataset opened with HDF5's low-level API (``h5py.h5d``): the attributes of h5py's ``Dataset`` that
    :func:`check_dataset`, :class:`ChunkGuard` and :func:`read_all` use (``id``, ``shape``, ``dtype``, ``chunks``,
    ``size``, with h5py's meanings), without building h5py's high-level object, its property caches and its
    registry entry for each of a table's columns (most of a table read's CPU before decision 0455)."""

    __slots__ = ("id", "shape", "dtype", "chunks", "size", "plist")

    def __init__(self, dsid):
        import h5py

        self.id = dsid
        plist = self.plist = dsid.get_create_plist()  # read once for the checks too
        self.chunks = plist.get_chunk() if plist.get_layout() == h5py.h5d.CHUNKED else None
        space = dsid.get_space()
        null = space.get_simple_extent_type() == h5py.h5s.NULL
        self.shape = None if null else space.shape
        self.dtype = dsid.dtype
        self.size = None if null else math.prod(self.shape)


def read_all(ds):
    """All of dataset ``ds`` (a :class:`Stored` or an h5py ``Dataset``) as h5py's ``ds[()]`` returns it.  A 1-D
    dataset of numbers or fixed-length bytes is read by one low-level ``read`` into a fresh array (what h5py's
    fast reader does for it); anything else goes through h5py's ``Dataset`` as before."""
    import h5py

    dt = ds.dtype
    if isinstance(ds, Stored) and ds.shape is not None and len(ds.shape) == 1 and dt.kind in "iufbS":
        arr = np.empty(ds.shape, dtype=dt)
        if arr.size:
            ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, arr)
        return arr
    return _high(ds)[()]


def read_text(ds, encoding: str = "utf-8"):
    """``ds.asstr(encoding)[()]`` of h5py for dataset ``ds`` (a :class:`Stored` or an h5py ``Dataset``): a
    1-D dataset of fixed-length strings is read by :func:`read_all` and decoded as h5py does (strict)."""
    import h5py

    if (isinstance(ds, Stored) and ds.shape is not None and len(ds.shape) == 1 and ds.dtype.kind == "S"
            and h5py.check_string_dtype(ds.dtype) is not None):
        raw = read_all(ds)
        return np.array([b.decode(encoding) for b in raw.tolist()], dtype=object).reshape(raw.shape)
    return _high(ds).asstr(encoding)[()]


def attr(ds, name: str):
    """Attribute ``name`` of dataset ``ds`` (a :class:`Stored` or an h5py ``Dataset``) as h5py's
    ``ds.attrs.get(name)`` returns it; None when it has none (asked of HDF5 alone, without h5py's objects)."""
    import h5py

    if isinstance(ds, Stored):
        key = name.encode()
        if not h5py.h5a.exists(ds.id, key):
            return None
        a = h5py.h5a.open(ds.id, key)
        dt = a.dtype
        if a.shape == () and dt.kind == "S":  # one fixed-length string (the writer's): read as h5py reads it
            value = np.zeros((), dtype=dt)
            a.read(value, mtype=h5py.h5t.py_create(dt))
            return value[()]
    return _high(ds).attrs.get(name)


def _high(ds):
    import h5py

    return h5py.Dataset(ds.id) if isinstance(ds, Stored) else ds


class DatasetGuard:
    """Datasets of one open file, each checked (:func:`check_dataset`) once before it is first used."""

    def __init__(self, f, file_size: int, err, path=None):
        self._f = f
        self._size = int(file_size)
        self._err = err
        self._path = path
        self._ok: dict = {}  # name -> h5py Dataset, checked
        self._low: dict = {}  # name -> Stored, checked
        self._opened: dict = {}  # name -> DatasetID whose shape was read (shape), not yet checked
        self._stored = 0
        self._heap_ok: set[str] = set()

    def _count(self, ds, name: str) -> None:
        self._stored += check_dataset(ds, name, self._err)
        if self._stored > self._size:
            raise self._err(f"datasets claim {self._stored} stored bytes but the file has {self._size}; "
                            f"chunks are shared or the file is corrupt")

    def get(self, name: str):
        """The h5py dataset at ``name`` (e.g. 'tables/ops/name'), checked; an error naming it when it is
        missing or not a dataset."""
        import h5py

        ds = self._ok.get(name)
        if ds is not None:
            return ds
        low = self._low.get(name)
        if low is not None:  # checked already (stored)
            ds = self._ok[name] = h5py.Dataset(low.id)
            return ds
        obj = self._f.get(name)
        if obj is None:
            raise self._err(f"missing dataset '{name}'")
        if not isinstance(obj, h5py.Dataset):
            raise self._err(f"'{name}' is not a dataset")
        self._count(obj, name)
        self._ok[name] = obj
        return obj

    def stored(self, name: str) -> Stored:
        """The dataset at ``name`` as a :class:`Stored`, checked as :meth:`get` checks it (once per name,
        whichever of the two asks first); an error naming it when it is missing or not a dataset."""
        low = self._low.get(name)
        if low is not None:
            return low
        ds = self._ok.get(name)
        if ds is not None:
            low = Stored(ds.id)
        else:
            oid = self._opened.pop(name, None)
            low = Stored(self._open(name) if oid is None else oid)
            self._count(low, name)
        self._low[name] = low
        return low

    def _open(self, name: str):
        import h5py

        try:
            oid = h5py.h5o.open(self._f.id, name.encode())
        except KeyError:
            raise self._err(f"missing dataset '{name}'") from None
        if not isinstance(oid, h5py.h5d.DatasetID):
            raise self._err(f"'{name}' is not a dataset")
        return oid

    def shape(self, name: str):
        """The shape of the dataset at ``name`` (None for a null dataspace), read from its dataspace alone:
        nothing of its data is read, so :meth:`get`'s checks wait for its first read; an error naming it
        when it is missing or not a dataset."""
        import h5py

        ds = self._ok.get(name)
        if ds is None:
            ds = self._low.get(name)
        if ds is not None:
            return ds.shape
        oid = self._opened.get(name)
        if oid is None:
            oid = self._opened[name] = self._open(name)  # kept for stored(), which checks it
        space = oid.get_space()
        return None if space.get_simple_extent_type() == h5py.h5s.NULL else space.shape

    def check_vlen_heap(self, ds, name: str) -> None:
        """Before a variable-length string dataset is read: the string bytes its heap references claim,
        summed from the references themselves (read raw from the file), are at most the file's size.
        Without this, a few thousand references to one large heap object decode to gigabytes."""
        import h5py

        if ds.dtype.kind != "O" or name in self._heap_ok or not ds.size:
            return
        layout = ds.id.get_create_plist().get_layout()
        offset = ds.id.get_offset() if layout == h5py.h5d.CONTIGUOUS else None
        if offset is None or self._path is None:
            # chunked or compact variable-length strings: no writer of the format stores them
            where = "unallocated" if layout == h5py.h5d.CONTIGUOUS else "in chunks or compact"
            raise self._err(f"dataset '{name}' holds variable-length strings stored {where}; their size "
                            f"cannot be bounded before reading, refusing to read it")
        n = int(ds.size) * VLEN_RECORD_BYTES
        fd = os.open(self._path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        try:
            raw = os.pread(fd, n, int(offset))
        finally:
            os.close(fd)
        if len(raw) < n:
            raise self._err(f"dataset '{name}': its {ds.size} string references run past the end of the file")
        claimed = int(np.frombuffer(raw, dtype="<u4").reshape(-1, 4)[:, 0].sum(dtype=np.int64))
        if claimed > self._size:
            raise self._err(f"dataset '{name}' references {claimed} bytes of strings but the file has "
                            f"{self._size}; the file is corrupt or hostile")
        self._heap_ok.add(name)


# bytes read from the start of a Blosc chunk to check it: the header and up to 60 block offsets (the
# writer's chunks have a few blocks), so one read covers both; more blocks take a second read
_HEAD_READ = 256
# ChunkGuard.check decides for this many chunks or more at once (_batch_ok)
_BATCH_MIN = 8


class ChunkGuard:
    """Checks each Blosc chunk of a dataset once, before HDF5's filter decodes it.

    The chunk index of a dataset is read once (``H5Dchunk_iter``: offset, address, stored size of every
    chunk in one pass); a chunk's header and block offsets (16 + 4 x blocks bytes) are then read with
    ``os.pread`` from the file itself: reading whole raw chunks with ``read_direct_chunk`` (a chunk-index
    lookup and a full read per chunk) tripled the first read of a 100-step window on 16 IPUs."""

    def __init__(self, err, path=None, fd: int | None = None):
        """``fd``: a descriptor of the file HDF5 has open, which the guard then owns (closes); without it the
        guard opens ``path`` at its first read."""
        self._err = err
        self._path = path
        self._fd: int | None = fd
        self._done: dict[str, set] = {}
        self._info: dict[str, tuple] = {}
        self._index: dict[str, dict] = {}
        self._layout: dict[str, tuple] = {}  # chunk shape, dataset shape

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _pread(self, n: int, offset: int) -> bytes:
        if self._fd is None:
            self._fd = os.open(self._path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        return os.pread(self._fd, n, offset)

    def _dataset_info(self, ds, name: str):
        info = self._info.get(name)
        if info is None:
            blosc = False
            if ds.chunks is not None:
                plist = ds.plist if isinstance(ds, Stored) else ds.id.get_create_plist()
                blosc = any(plist.get_filter(i)[0] == BLOSC_FILTER for i in range(plist.get_nfilters()))
            info = self._info[name] = (blosc, _chunk_bytes(ds) if ds.chunks is not None else 0)
        return info

    def _chunk_index(self, ds, name: str) -> dict:
        idx = self._index.get(name)
        if idx is None:
            idx = {}
            if self._path is not None and hasattr(ds.id, "chunk_iter"):
                ds.id.chunk_iter(lambda c: idx.__setitem__(tuple(c.chunk_offset),
                                                            (c.byte_offset, c.size, c.filter_mask)))
            self._index[name] = idx
        return idx

    def _raw_header(self, ds, name: str, offset: tuple):
        """(filter_mask, head bytes, stored size) of one chunk, or None when it is not allocated."""
        if self._path is not None and hasattr(ds.id, "chunk_iter"):
            hit = self._chunk_index(ds, name).get(offset)
            if hit is None:
                return None
            addr, size, mask = hit
            return mask, self._pread(min(size, _HEAD_READ), addr), size, addr
        try:
            mask, raw = ds.id.read_direct_chunk(offset)
        except RuntimeError:  # not allocated: HDF5 returns the fill value, no decoding
            return None
        return mask, bytes(raw), len(raw), raw

    def seen(self, name: str, ranges) -> bool:
        """Whether a chunk of ``name`` overlapping ``ranges`` ([(lo, hi)] per axis) was checked, so read,
        before."""
        done = self._done.get(name)
        if not done:
            return False
        return any(idx in done for idx in itertools.product(*self._grid(name, ranges)))

    def _grid(self, name: str, ranges) -> list[range]:
        """Chunk indices per axis of the chunks overlapping ``ranges``."""
        chunks, shape = self._layout[name]
        grid = []
        for (lo, hi), c, s in zip(ranges, chunks, shape, strict=True):
            lo, hi = max(0, int(lo)), min(int(hi), s)
            grid.append(range(lo // c, -(-hi // c)) if hi > lo else range(0))
        return grid

    def check(self, ds, name: str, ranges=None) -> None:
        """Check every chunk of ``ds`` overlapping ``ranges`` ([(lo, hi)] per axis; None = all)."""
        blosc, chunk_bytes = self._dataset_info(ds, name)
        if not blosc or not ds.size:
            return
        chunks = ds.chunks
        shape = ds.shape
        ranges = ranges or [(0, s) for s in shape]
        self._layout[name] = (chunks, shape)
        grid = self._grid(name, ranges)
        done = self._done.setdefault(name, set())
        todo = [idx for idx in itertools.product(*grid) if idx not in done]
        if len(todo) >= _BATCH_MIN and self._batch_ok(ds, name, todo, chunks, chunk_bytes):
            done.update(todo)
            return
        for idx in todo:
            offset = tuple(i * c for i, c in zip(idx, chunks, strict=True))
            got = self._raw_header(ds, name, offset)
            if got is not None:
                mask, head, stored, where = got
                if not mask & 1:  # the Blosc filter (first and only) applies to this chunk
                    problem = blosc_header_problem(head, chunk_bytes, stored)
                    if problem is None and not (head[2] & _BLOSC_MEMCPYED):
                        problem = self._starts_problem(head, stored, where)
                    if problem:
                        raise self._err(f"dataset '{name}' chunk at {offset}: {problem}; the file is corrupt")
                elif stored != chunk_bytes:
                    raise self._err(f"dataset '{name}' chunk at {offset}: stored unfiltered with {stored} bytes, "
                                    f"expected {chunk_bytes}; the file is corrupt")
            done.add(idx)

    def _batch_ok(self, ds, name: str, todo: list, chunks: tuple, chunk_bytes: int) -> bool:
        """Whether every chunk of ``todo`` (chunk grid indices) passes the checks of the per-chunk loop of
        :meth:`check`, decided for all of them at once: their headers and block offsets are read as in that
        loop and checked as arrays.  False whenever that cannot
        decide (no chunk index, an unallocated or unfiltered chunk, a header with more block offsets than
        ``_HEAD_READ`` bytes hold, any problem): the per-chunk loop then checks them
        and names the first bad chunk."""
        if self._path is None or not hasattr(ds.id, "chunk_iter"):
            return False
        index = self._chunk_index(ds, name)
        hits = [index.get(tuple(i * c for i, c in zip(idx, chunks, strict=True))) for idx in todo]
        if None in hits:
            return False
        info = np.array(hits, dtype=np.int64)  # byte offset, stored size, filter mask
        addr, stored = info[:, 0], info[:, 1]
        head_len = np.minimum(stored, _HEAD_READ)  # what the per-chunk loop reads of each chunk
        if (info[:, 2] & 1).any() or stored.min() < BLOSC_HEADER:
            return False
        # each chunk's first bytes, zero-padded to _HEAD_READ (the padding is never looked at: see `end` below)
        pread = self._pread
        raw = b"".join([pread(_HEAD_READ, a).ljust(_HEAD_READ, b"\0") for a in addr.tolist()])
        heads = np.frombuffer(raw, dtype=np.uint8).reshape(len(todo), _HEAD_READ)
        words = heads.view("<u4")
        nbytes, blocksize, cbytes = words[:, 1].astype(np.int64), words[:, 2].astype(np.int64), words[:, 3]
        ok = (np.isin(heads[:, 0], (1, 2)) & (heads[:, 3] != 0) & (nbytes == chunk_bytes) & (cbytes == stored)
              & ((heads[:, 2] & _BLOSC_MEMCPYED) == 0) & (blocksize > 0) & (blocksize <= nbytes))
        if not ok.all() or chunk_bytes == 0:
            return False
        nblocks = -(-nbytes // blocksize)
        end = BLOSC_HEADER + 4 * nblocks
        if (end > head_len).any():  # offsets beyond the bytes read (or beyond the chunk: a problem)
            return False
        starts = words[:, BLOSC_HEADER // 4:]
        valid = np.arange(starts.shape[1])[None, :] < nblocks[:, None]
        low = np.where(valid, starts, np.iinfo(np.uint32).max).min(axis=1)
        high = np.where(valid, starts, 0).max(axis=1)
        return bool(((low >= end) & (high < stored)).all())

    def _starts_problem(self, head: bytes, stored: int, where) -> str | None:
        nbytes, blocksize = struct.unpack_from("<II", head, 4)
        if nbytes == 0:
            return None
        nblocks = -(-nbytes // blocksize)
        end = BLOSC_HEADER + 4 * nblocks
        if end > stored:
            return f"Blosc frame of {stored} bytes cannot hold its {nblocks} block offsets"
        if isinstance(where, bytes | bytearray | memoryview):
            raw = where[BLOSC_HEADER:end]
        elif len(head) >= end:  # the offsets came with the header
            raw = head[BLOSC_HEADER:end]
        else:
            raw = self._pread(4 * nblocks, where + BLOSC_HEADER)
        starts = np.frombuffer(raw, dtype="<u4", count=nblocks)
        if starts.size and (int(starts.min()) < end or int(starts.max()) >= stored):
            return "Blosc block offsets point outside the frame"
        return None


def blosc_header_problem(head: bytes, chunk_bytes: int, stored: int | None = None) -> str | None:
    """What is wrong with the header of a Blosc(1) frame of ``stored`` bytes (default: ``len(head)``) that
    should decode to ``chunk_bytes`` bytes, or None.  (Block offsets: ``ChunkGuard._starts_problem``.)

    Header (c-blosc 1.x): version, versionlz, flags, typesize (1 byte each), then uint32 nbytes,
    blocksize, cbytes; then (unless memcpyed) one uint32 start offset per block."""
    n = len(head) if stored is None else stored
    if n < BLOSC_HEADER or len(head) < BLOSC_HEADER:
        return f"Blosc frame of {n} bytes is shorter than its {BLOSC_HEADER}-byte header"
    version, _vlz, flags, typesize = head[0], head[1], head[2], head[3]
    nbytes, blocksize, cbytes = struct.unpack_from("<III", head, 4)
    if version not in (1, 2):
        return f"Blosc format version {version} is unknown"
    if typesize == 0:
        return "Blosc typesize is 0"
    if nbytes != chunk_bytes:
        return f"Blosc header claims {nbytes} decompressed bytes, the dataset's chunks hold {chunk_bytes}"
    if cbytes != n:
        return f"Blosc header claims {cbytes} compressed bytes, the chunk stores {n}"
    if flags & _BLOSC_MEMCPYED:
        if cbytes != nbytes + BLOSC_HEADER:
            return "Blosc header says 'stored uncompressed' but its sizes disagree"
        return None
    if nbytes and (blocksize == 0 or blocksize > nbytes):
        return f"Blosc block size {blocksize} is outside 1..{nbytes}"
    return None
