"""terminal_text: the one sanitiser of file-derived text printed by the command line (issue 45)."""

import pytest

from popvision_lite.terminal import BIDI_CONTROLS, terminal_text


@pytest.mark.parametrize("bad", ["\x1b", "\x07", "\r", "\x00", "\x7f", "\x9b", "\x85", "\u2028", "\u2029", "\ud800",
                                 *sorted(BIDI_CONTROLS)])
def test_each_control_bidi_override_and_separator_becomes_a_replacement_character(bad):
    assert terminal_text(f"a{bad}b") == "a\ufffdb"


def test_ordinary_text_newlines_tabs_and_other_scripts_are_kept():
    for text in ("plain", "two\nlines\tand a tab", "שלום عربى 日本語 e\u0301", "emoji \U0001f600 zwj \u200d"):
        assert terminal_text(text) == text
    assert terminal_text(42) == "42"


def test_an_escape_sequence_loses_its_escape_and_cannot_act():
    out = terminal_text("\x1b]0;title\x07\x1b[2J\x1b]52;c;Zm9v\x07")
    assert "\x1b" not in out and "\x07" not in out and "title" in out
    out.encode("utf-8")  # printable: a lone surrogate would fail to encode
