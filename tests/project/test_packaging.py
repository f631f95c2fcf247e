"""pyproject's package list covers every package directory, so a wheel ships all code and resources.

A regular (non-editable) install once shipped without popvision_lite.resources: find() cannot see a
package that package-dir maps to resources/, so list_devices() was [] outside a checkout."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _setuptools() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _package_dirs() -> dict[str, Path]:
    """Every directory with an __init__.py under the package roots, by dotted package name."""
    roots = {name: ROOT / d for name, d in _setuptools()["package-dir"].items()}
    found: dict[str, Path] = {}
    for name, root in roots.items():
        for init in root.rglob("__init__.py"):
            rel = init.parent.relative_to(root)
            if "__pycache__" in rel.parts or any(p.startswith(".") for p in rel.parts):
                continue
            dotted = ".".join((name, *rel.parts))
            found.setdefault(dotted, init.parent)
    return found


def test_every_package_directory_is_listed():
    listed = set(_setuptools()["packages"])
    dirs = _package_dirs()
    assert "popvision_lite.resources.devices" in dirs  # the device specs must be a listed package
    missing = sorted(set(dirs) - listed)
    assert not missing, f"pyproject.toml [tool.setuptools] packages lacks {missing}: a wheel would miss them"
    stale = sorted(listed - set(dirs))
    assert not stale, f"pyproject.toml lists packages with no directory: {stale}"


def test_device_specs_are_package_data():
    patterns = _setuptools()["package-data"]["popvision_lite.resources"]
    root = ROOT / _setuptools()["package-dir"]["popvision_lite.resources"]
    specs = sorted((root / "devices").glob("*.toml"))
    assert specs, "no device specs under resources/devices"
    for spec in specs:
        rel = spec.relative_to(root)
        assert any(rel.match(p) or rel.match(p.replace("**/", "")) for p in patterns), f"{rel} not in package-data"
