"""``OpSearch``: the execution view's op search (``/``): which steps run ops whose name matches, and the next
or previous of them from a step.  A helper object with explicit inputs (the profile, its step index)."""

from __future__ import annotations

import numpy as np

from popvision_lite.analysis import execution as ex


class OpSearch:
    """Steps of ``index`` whose op name matches the text; ``matches`` (sorted) and ``pos`` (of the last jump)."""

    def __init__(self, profile, index: ex.StepIndex):
        self.profile = profile
        self.index = index
        self.matches = np.zeros(0, np.int64)
        self.pos = -1

    def set_text(self, text: str) -> str:
        """Search for ``text`` (empty clears); the status line that says how much matched."""
        ops = ex.search_ops(self.profile, text)
        self.matches = ex.match_steps(self.index, ops)
        self.pos = -1
        return f"search '{text}': {len(ops)} ops, {len(self.matches)} steps" if text else ""

    def jump(self, current: int, forward: bool = True) -> int:
        """The next (or previous) matching step after ``current`` (wrapping), or -1 when none matches."""
        if len(self.matches) == 0:
            return -1
        s = ex.next_match(self.matches, current, forward)
        self.pos = int(np.searchsorted(self.matches, s))
        return s
