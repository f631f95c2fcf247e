"""Guards the one-way architecture: nothing outside gui/ imports Qt."""

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "popvision_lite"
QT_MODULES = {"PySide6", "pyqtgraph", "PyQt5", "PyQt6", "shiboken6"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_no_qt_outside_gui():
    offenders = []
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG)
        if rel.parts[0] == "gui":
            continue
        bad = _imports(path) & QT_MODULES
        if bad:
            offenders.append(f"{rel}: {sorted(bad)}")
    assert not offenders, "Qt imported outside gui/: " + "; ".join(offenders)


def test_checker_sees_qt_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("from PySide6 import QtCore\nimport pyqtgraph as pg\n")
    assert _imports(f) & QT_MODULES == {"PySide6", "pyqtgraph"}
