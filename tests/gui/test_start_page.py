"""Start page: the bundled samples are described in plain text (the README's markdown stripped)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_start_page_sample_descriptions_are_plain_text(tmp_path):
    """The start page showed markdown source ('the same with `--recompute`') for the samples."""
    from popvision_lite.gui.start_page import sample_descriptions

    (tmp_path / "a.pvl").write_bytes(b"")
    (tmp_path / "README.md").write_text(
        "| file | workload | shows |\n|---|---|---|\n"
        "| `a.pvl` | the same with `--recompute` | **lower** peak, `more` cycles |\n", encoding="utf-8")
    assert sample_descriptions([tmp_path / "a.pvl"]) == {
        "a.pvl": ("the same with --recompute", "lower peak, more cycles")}


def test_bundled_sample_descriptions_have_no_markdown():
    from popvision_lite.gui.start_page import sample_descriptions

    samples = sorted((ROOT / "sample_profiles").glob("*.pvl"))
    desc = sample_descriptions(samples)
    assert set(desc) == {p.name for p in samples}
    for name, (workload, shows) in desc.items():
        for text in (workload, shows):
            assert "`" not in text and "**" not in text, (name, text)
