"""Text from a file, made safe to print on a terminal: the one helper every command line print of file-derived
text goes through (``info``, ``verdict``, ``export``, ``sweep`` and their error messages, the sweep lock's holder).

A name in a profile, a sweep row or a lock file is the file author's text.  Printed raw, control characters move
the cursor, clear the screen, retitle the window or write the clipboard (ESC sequences: CSI, OSC 0 / 52; C1
controls such as U+009B, which some terminals take as CSI), a carriage return overwrites what the line showed,
and bidirectional overrides (U+202E ...) make text read in another order than it is stored ("Trojan Source",
CVE-2021-42574).  :func:`terminal_text` replaces each such character with U+FFFD, so the reader sees that
something was there, and leaves the rest, newlines and tabs included, as it was.
"""

from __future__ import annotations

import unicodedata

REPLACEMENT = "\ufffd"
_KEEP = frozenset("\n\t")
# bidirectional formatting characters (Unicode Bidi_Control): embeddings, overrides, isolates and marks
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# C0 / C1 controls and DEL (Cc), lone surrogates (Cs: print would fail to encode them), line / paragraph
# separators (Zl / Zp: a line break to some terminals)
_CATEGORIES = frozenset({"Cc", "Cs", "Zl", "Zp"})


def _unsafe(c: str) -> bool:
    return c not in _KEEP and (c in BIDI_CONTROLS or unicodedata.category(c) in _CATEGORIES)


def terminal_text(text) -> str:
    """``str(text)`` with every control character (C0 and C1 except newline and tab, so ESC, BEL, CR and CSI),
    bidirectional override / isolate / mark, line or paragraph separator and lone surrogate replaced by U+FFFD."""
    s = str(text)
    if s.isprintable() and not any(c in BIDI_CONTROLS for c in s):
        return s
    return "".join(REPLACEMENT if _unsafe(c) else c for c in s)
