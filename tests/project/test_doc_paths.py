"""Paths named in prose exist: every module path the docs name (docs/*.md; the decision records keep the
paths of their day) and every test file a docstring or comment in popvision_lite/ cites."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "popvision_lite"
SUBPACKAGES = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
# a path starting at the package or one of its subpackages, with {a,b} alternatives: gui/views/{x,y}_view.py
_START = "|".join(["popvision_lite", *SUBPACKAGES])
MODULE_PATH = re.compile(rf"(?<![\w/.<>{{}}-])((?:{_START})/[\w/{{}},.-]*?\.py)\b")
TEST_PATH = re.compile(r"(?<![\w/.-])(tests/[\w/]+\.py)\b")


def _expand(path: str) -> list[str]:
    """``a/{b,c}.py`` -> ``['a/b.py', 'a/c.py']`` (one brace group at a time)."""
    m = re.search(r"\{([^{}]*)\}", path)
    if not m:
        return [path]
    return [x for alt in m.group(1).split(",") for x in _expand(path[:m.start()] + alt + path[m.end():])]


def _module_exists(path: str) -> bool:
    rel = path.removeprefix("popvision_lite/")
    return (PACKAGE / rel).is_file()


def _docs() -> list[Path]:
    return sorted((ROOT / "docs").glob("*.md"))


def test_the_pattern_finds_what_it_should():
    text = "see `popvision_lite/gui/state/document.py`, gui/views/{insights,operations}_view.py and " \
           "`emulator/models/config.py`; not ops/reference.py nor x/gui/a.py"
    found = [p for m in MODULE_PATH.finditer(text) for p in _expand(m.group(1))]
    assert found == ["popvision_lite/gui/state/document.py", "gui/views/insights_view.py",
                     "gui/views/operations_view.py", "emulator/models/config.py"]
    assert all(_module_exists(p) for p in found) and not _module_exists("gui/selection.py")


def test_every_module_path_named_in_the_docs_exists():
    missing = [f"{doc.name}: {p}" for doc in _docs() for m in MODULE_PATH.finditer(doc.read_text(encoding="utf-8"))
               for p in _expand(m.group(1)) if not _module_exists(p)]
    assert not missing, "docs name modules that are not there (moved or renamed?):\n" + "\n".join(missing)


def test_every_test_file_cited_in_the_code_and_docs_exists():
    sources = [*PACKAGE.rglob("*.py"), *_docs()]
    missing = [f"{src.relative_to(ROOT)}: {m.group(1)}" for src in sources
               for m in TEST_PATH.finditer(src.read_text(encoding="utf-8")) if not (ROOT / m.group(1)).is_file()]
    assert not missing, "cited test files that are not there (moved?):\n" + "\n".join(missing)
