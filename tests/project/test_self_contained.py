"""A clone is all the project needs: no committed file names a path outside the repository (the machine it
was written on: its work folders, scratch folder, or the data folder that used to sit beside the checkout), and
the measured data the commands read ships in resources/ (issue 42)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# absolute paths of a development machine, and the sibling data folder a clone does not have
# (also joined as a pathlib path, dot-dot then shared as two quoted parts, which a skipped test used)
MACHINE_PATH = re.compile(rb"(?<![\w.~-])/(?:work|tmp)/|\.\./shared\b|[\"']\.\.[\"']\s*/\s*[\"']shared[\"']")
# every match of MACHINE_PATH holds one of these (each alternative needs one): a file without any is not searched
# with the pattern, which is what scanning the 67 MB of committed profiles and models would cost (3 s CPU)
NEEDLES = (b"/" + b"work/", b"/" + b"tmp/", b"../" + b"shared", b'"' + b"shared", b"'" + b"shared")
SKIP_DIRS = {".git", ".venv", "__pycache__", "build", "dist", "out", "tmp", "mirrors", ".pytest_cache",
             ".ruff_cache", ".hypothesis", ".import_linter_cache"}


def _committed_files() -> list[Path]:
    """The tracked files (git ls-files), or every file of an unpacked source tree without .git."""
    if (ROOT / ".git").exists():
        out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True).stdout
        return [ROOT / p for p in out.decode().split("\0") if p]
    files = []
    for d, dirs, names in os.walk(ROOT):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.endswith(".egg-info")]
        files += [Path(d) / n for n in names]
    return files


def test_the_pattern_finds_machine_paths_and_nothing_else():
    work, tmp, shared = b"/" + b"work/", b"/" + b"tmp/", b"../" + b"shared"  # not spelled out: this file is scanned too
    for hit in (work + b"shared/validation", b"see " + tmp + b"s.pvl", b"`" + shared + b"/validation`",
                b"(" + work + b".mirror/x)", b'parents[1] / "' + b'.." / "sha' + b'red" / "validation"'):
        assert MACHINE_PATH.search(hit) and any(n in hit for n in NEEDLES), hit
    for miss in (b"out" + tmp + b"x", b"runs/x.pvl", b"~" + tmp + b"x", b"tests" + work + b"a.py", b"shared_arrays",
                 shared + b"_x"):
        assert not MACHINE_PATH.search(miss), miss


def test_no_committed_file_names_a_path_of_the_machine_it_was_written_on():
    hits = []
    for path in _committed_files():
        if not path.is_file():
            continue
        data = path.read_bytes()
        if not any(n in data for n in NEEDLES):
            continue
        for m in MACHINE_PATH.finditer(data):
            line = data[data.rfind(b"\n", 0, m.start()) + 1:data.find(b"\n", m.end())][:160]
            hits.append(f"{path.relative_to(ROOT)}: {line.decode(errors='replace')}")
    assert not hits, "paths outside the repository (make them arguments with an in-repo default):\n" + \
        "\n".join(hits[:40])


def test_the_measured_runs_ship_in_the_repository():
    from popvision_lite import mlperf_validation as V

    folder = V.data_dir(None)
    assert (folder / V.CSV_NAME).is_file() and (folder / V.HELDOUT_NAME).is_file()
    assert "mlperf_training.csv" in (folder / "PROVENANCE.md").read_text(encoding="utf-8")
