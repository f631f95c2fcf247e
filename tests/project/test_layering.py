"""Guards the one-way architecture: the import-linter contracts of pyproject.toml hold (layers, no Qt below
the GUI, no cycles, private modules stay private; docs/decisions/0013), and, as a second, independent
check, no file outside gui/ imports Qt."""

from pathlib import Path

from tests.project.module_facts import facts

PKG = Path(__file__).resolve().parents[2] / "popvision_lite"
QT_MODULES = {"PySide6", "pyqtgraph", "PyQt5", "PyQt6", "shiboken6"}


def _imports(path: Path) -> set[str]:
    return set(facts(path).imports)


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


# an import in every kind of statement body (the facts walk statements only: tests/project/module_facts.py)
NESTED_IMPORTS = """
def f():
    import a1
class C:
    def m(self):
        async def inner():
            import a2
try:
    import a3
except ImportError:
    import a4
else:
    import a5
finally:
    import a6
try:
    pass
except* ValueError:
    import a7
for x in y:
    import a8
else:
    import a9
while x:
    import a10
else:
    import a11
async def g():
    async for x in y:
        import a12
    async with z:
        import a13
with z:
    import a14
if x:
    import a15
elif y:
    import a16
else:
    from a17.sub import name
match x:
    case 1:
        import a18
from . import relative
"""


def test_checker_sees_imports_in_every_kind_of_block(tmp_path):
    f = tmp_path / "m.py"
    f.write_text(NESTED_IMPORTS)
    assert _imports(f) == {f"a{i}" for i in range(1, 19)}


def test_import_linter_contracts_are_kept(capsys):
    """The same check as `lint-imports` in .ci/run, so `pytest` alone fails on a broken layer.  import-linter
    configures its logging with ``logging.config.dictConfig``, whose default disables every logger that exists
    already - the package's own among them, so a later test's warnings (a sweep's note on daemonic Dask workers)
    vanished in the full suite: the loggers are given back as they were."""
    import logging
    import os

    import pytest

    cli = pytest.importorskip("importlinter.cli", reason="import-linter is in the test extra")
    cwd = os.getcwd()
    os.chdir(PKG.parent)  # it reads pyproject.toml from the current folder
    loggers = [lg for lg in logging.root.manager.loggerDict.values() if isinstance(lg, logging.Logger)]
    disabled = [lg.disabled for lg in loggers]
    try:
        status = cli.lint_imports(no_cache=True, no_logo=True)
    finally:
        os.chdir(cwd)
        for lg, was in zip(loggers, disabled, strict=True):
            lg.disabled = was
    assert status == 0, capsys.readouterr().out[-4000:]
