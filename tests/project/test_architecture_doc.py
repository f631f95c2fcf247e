"""docs/architecture.md's module index is the package as it is (tests/project/module_index.py renders it)."""

from __future__ import annotations

from tests.project import module_index as mi


def test_module_index_lists_every_module_as_the_tree_has_it():
    text = mi.DOC.read_text(encoding="utf-8")
    assert mi.section_of(text) == mi.render(), "regenerate: python -m tests.project.module_index --write"


def test_the_index_finds_a_new_module_and_a_gone_one(tmp_path, monkeypatch):
    """The check fails both ways: a module added to the package, or one removed, changes the render."""
    before = mi.render()
    pkg = tmp_path / "popvision_lite"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""The package."""\n')
    (pkg / "sub" / "new_thing.py").write_text('"""A new thing. More words."""\n')
    monkeypatch.setattr(mi, "PKG", pkg)
    after = mi.render()
    assert after != before and "| `sub/new_thing.py` | A new thing. |" in after
    (pkg / "sub" / "new_thing.py").unlink()
    assert "new_thing" not in mi.render()


def test_first_sentence_keeps_abbreviations_and_escapes_table_bars():
    assert mi.first_sentence("Cycles, e.g. of a copy. Then more.") == "Cycles, e.g. of a copy."
    assert mi.first_sentence("A | B split.") == "A \\| B split."
