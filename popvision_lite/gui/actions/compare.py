"""File > Compare with… (``Ctrl+Shift+C``): compare the current profile (A) with another open one or a file
(B) in a compare window."""

from __future__ import annotations

from popvision_lite.gui.compare_window import compare_documents, open_compare
from popvision_lite.gui.text import show_info


def compare_dialog(mw):
    """Compare two open profiles (or pick a second file) in compare mode."""
    from PySide6.QtWidgets import QFileDialog, QInputDialog

    docs = mw.documents()
    cur = mw.current_document()
    if cur is None:
        show_info(mw, "Compare", "Open a profile first.")
        return None
    others = [d for d in docs if d is not cur]
    choices = [d.title for d in others] + ["Another file…"]
    name, ok = QInputDialog.getItem(mw, "Compare", f"Compare A = {cur.title} with B =", choices, 0, False)
    if not ok:
        return None
    if name == "Another file…":
        path, _ = QFileDialog.getOpenFileName(mw, "Profile B", "", "popvision-lite profiles (*.pvl)")
        return open_compare(mw, cur.path, path) if path else None
    return compare_documents(mw, cur, others[choices.index(name)])


def install(mw) -> None:
    """File > Compare with… (``Ctrl+Shift+C``), before the Export menu and Quit."""
    f = mw.menus["file"]
    mw.act_compare = mw._action(f, "Co&mpare with…", lambda: compare_dialog(mw), "Ctrl+Shift+C",
                                "Compare this profile (A) with another (B) side by side")
    before = getattr(mw, "act_quit", None)
    if before is not None:  # keep Quit last
        f.removeAction(mw.act_compare)
        f.insertAction(before, mw.act_compare)
