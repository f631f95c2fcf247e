"""Hostile-but-valid HDF5 profiles (issue 19): nothing outside the file is read, no damaged Blosc chunk
reaches the decoder, special files are refused without blocking.  The builders are the structural
fuzzer's (bench/fuzz_hostile.py); each test pins one kind with a fixed seed."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the bench package lives at the repo root
from bench import fuzz_hostile as fh  # noqa: E402
from bench import fuzz_profiles as fz  # noqa: E402
from popvision_lite.errors import ProfileError  # noqa: E402
from popvision_lite.profile.reader import open_profile  # noqa: E402


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return fz.make_base(tmp_path_factory.mktemp("hostile"))


def _build(kind, base, tmp_path, seed=0, **force):
    dst = tmp_path / f"{kind}.pvl"
    rng = random.Random(seed)
    fh.HOSTILE[kind][0](rng, base, dst)
    return dst


def _refused(path, *words):
    with pytest.raises(ProfileError) as ei:
        fz.read_everything(path)
    msg = str(ei.value)
    assert msg.startswith(str(path) + ": "), msg
    for w in words:
        assert w.lower() in msg.lower(), (w, msg)
    assert "PVL_SECRET_MARKER" not in msg
    return msg


@pytest.mark.parametrize("seed", range(3))
def test_external_storage_is_refused(base, tmp_path, seed):
    _refused(_build("external_storage", base, tmp_path, seed), "external files")


def test_external_storage_of_a_string_table_never_shows_the_secret(base, tmp_path):
    """The campaign's case: tables/ops/name.categories stored in another local file."""
    import h5py
    import numpy as np

    f = tmp_path / "leak.pvl"
    f.write_bytes(base.read_bytes())
    secret = fh.secret_file(tmp_path)
    with fz._h5(f) as h:
        d = h["tables/ops/name.categories"]
        n = d.size * d.dtype.itemsize
        fh._replace(h, "tables/ops/name.categories", shape=d.shape, dtype=d.dtype, external=[(str(secret), 0, n)])
        assert isinstance(h["tables/ops/name.categories"], h5py.Dataset)
        assert np.asarray(h["tables/ops/name.categories"][()]).size
    _refused(f, "tables/ops/name.categories", "external")


@pytest.mark.parametrize("kind,word", [("external_link", "external link"), ("soft_link", "soft link"),
                                       ("virtual", "virtual dataset")])
def test_links_and_virtual_datasets_are_refused(base, tmp_path, kind, word):
    _refused(_build(kind, base, tmp_path), word)


@pytest.mark.parametrize("seed", range(4))
def test_undocumented_filters_are_refused(base, tmp_path, seed):
    _refused(_build("filter", base, tmp_path, seed), "filter")


def _memcpyed_header(base, tmp_path, size):
    import struct

    f = tmp_path / "blosc.pvl"
    f.write_bytes(base.read_bytes())
    with fz._h5(f) as h:
        off = h["arrays/memory"].id.get_chunk_info(0).byte_offset
    with open(f, "r+b") as fh_:
        fh_.seek(off + 2)
        fh_.write(bytes([0x02]))  # "stored uncompressed"
        fh_.seek(off + 4)
        fh_.write(struct.pack("<I", size))
        fh_.seek(off + 12)
        fh_.write(struct.pack("<I", size + 16))
    return f


def test_damaged_blosc_header_is_an_error_not_a_segfault(base, tmp_path):
    """A Blosc header claiming 64 MiB 'stored uncompressed' in a small chunk crashed the process inside
    the filter (exit -11) before the header was checked; now the read raises ProfileError."""
    f = _memcpyed_header(base, tmp_path, 64 << 20)
    code = ("import sys\nfrom popvision_lite.profile.reader import open_profile\n"
            "from popvision_lite.errors import ProfileError\n"
            f"p = open_profile({str(f)!r})\n"
            "try:\n    p.memory.array()\nexcept ProfileError as e:\n    print('ERR', e)\n")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, (r.returncode, r.stderr[-500:])
    assert "ERR" in r.stdout and "arrays/memory" in r.stdout and "Blosc" in r.stdout, r.stdout


@pytest.mark.parametrize("seed", range(6))
def test_other_blosc_header_damage_is_refused_when_read(base, tmp_path, seed):
    f = _build("blosc_header", base, tmp_path, seed)
    outcome, detail = fz.classify(f)
    assert outcome in ("ok", "profile_error"), detail  # ok: the damaged chunk is not among those read


def test_a_file_claiming_far_more_than_it_stores_is_refused_at_open(base, tmp_path):
    f = tmp_path / "claims.pvl"
    for seed in range(20):  # the seed whose table is 'steps' (also resizes the step x tile arrays)
        f.unlink(missing_ok=True)
        what = fh.h_claim_rows(random.Random(seed), base, f)
        if "steps" in what and "10000000" in what:
            break
    t0 = time.process_time()  # CPU time of this process: not stretched by other processes on a busy machine
    with pytest.raises(ProfileError, match="claims .* bytes but stores"):
        open_profile(f)
    assert time.process_time() - t0 < 5  # reading the claimed 10 M rows would take far longer


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_fifo_as_profile_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.pvl"
    os.mkfifo(fifo)
    link = tmp_path / "link.pvl"
    link.symlink_to(fifo)
    for p in (fifo, link):
        with pytest.raises(ProfileError, match="FIFO"):
            open_profile(p)  # used to block for ever in open()


@pytest.mark.parametrize("dev", ["/dev/zero", "/dev/null"])
def test_devices_as_profile_are_refused(dev):
    if not Path(dev).exists():
        pytest.skip(dev)
    with pytest.raises(ProfileError, match="character device"):
        open_profile(dev)


def test_sample_profiles_pass_the_safe_opener():
    root = Path(__file__).resolve().parents[2] / "sample_profiles"
    for p in sorted(root.glob("*.pvl")):
        assert fz.classify(p) == ("ok", ""), p


def _with_device(base, tmp_path, device):
    import json

    import numpy as np

    f = tmp_path / "device.pvl"
    f.write_bytes(base.read_bytes())
    with fz._h5(f) as h:
        t = json.loads(h.attrs["target"])
        t["device"] = device
        h.attrs["target"] = np.bytes_(json.dumps(t).encode())
    return f


def test_target_device_is_never_used_as_a_path(base, tmp_path):
    """A profile whose target.device names a spec file made Roofline and Insights open and parse it."""
    from popvision_lite import devices
    from popvision_lite.analysis import floor_plan, insights, roofline

    evil = tmp_path / "evil.toml"
    evil.write_text((devices.devices_dir() / "ipu-mk2.toml").read_text().replace('name = "', 'name = "EVIL '))
    opened = []
    real = devices._parse

    def spy(path, expected_id):
        opened.append(str(path))
        return real(path, expected_id)

    devices._load_cached.cache_clear()
    mp = pytest.MonkeyPatch()
    mp.setattr(devices, "_parse", spy)
    try:
        for dev in (str(evil), os.path.relpath(evil)):
            f = _with_device(base, tmp_path, dev)
            with open_profile(f) as p:
                # drawn against the bundled fallback IPU, with a note; the named file is never read
                notes = " ".join(roofline.analyze(p).notes)
                assert "is unknown to this build" in notes and roofline.FALLBACK_IPU in notes
                assert insights.device_spec(p) is None
                floor_plan.floor_plan_layout(p.target)  # schematic fallback
        assert not any("evil" in o for o in opened), opened
    finally:
        mp.undo()
        devices._load_cached.cache_clear()
