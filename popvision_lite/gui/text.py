"""Text from a file is shown literally, never as Qt rich text.

Names in a profile, a torch trace, a sweep.csv or an ONNX model are untrusted: Qt renders a string
that *looks* like HTML (``Qt.mightBeRichText``) as rich text, and rich text fetches ``<img src=...>``
(local files, /dev/zero, FIFOs) and follows ``<a href=...>`` links.  So every sink that shows file
text is one of:

* a plain-text widget: :func:`plain_label` (QLabel with ``Qt.PlainText``), :func:`show_message`
  (QMessageBox with ``Qt.PlainText``), table cells / headers / window titles / combo items (Qt draws
  those as plain text already);
* an HTML-only sink (QTextBrowser, rich labels, tooltips, pyqtgraph titles / legends / axis labels)
  fed through the one escape, :func:`plain_html`; tooltips through :func:`plain_tip`;
* pyqtgraph's title, legend and axis-label items escape their text themselves once
  :func:`install_plain_text_guards` has run (``create_app`` runs it), so a view passes plain text;
* :class:`SafeTextBrowser`, which loads no resources and follows no links, as a second line of defence.
"""

from __future__ import annotations

import html

from PySide6 import QtGui
from PySide6.QtCore import QByteArray, Qt
from PySide6.QtWidgets import QLabel, QMessageBox, QTextBrowser


def plain_html(text) -> str:
    """``text`` as an HTML fragment that displays literally (``<``, ``>``, ``&``, quotes escaped;
    newlines become ``<br>``).  The one escape for every HTML-only sink."""
    return html.escape(str(text), quote=True).replace("\n", "<br>")


def plain_tip(text) -> str:
    """A tooltip string that Qt shows literally.  Qt renders a tooltip as rich text when
    ``Qt.mightBeRichText`` says so, which a name can trigger: such text is escaped inside an explicit
    ``<p>`` (always rich text, whose visible text is ``text`` itself, line breaks and spaces kept);
    text Qt already shows as plain text is returned as it is."""
    s = str(text)
    if not QtGui.Qt.mightBeRichText(s):
        return s
    return "<p style='white-space:pre'>" + html.escape(s, quote=True) + "</p>"


def plain_label(text: str = "", parent=None) -> QLabel:
    """A QLabel that never interprets its text as rich text."""
    lab = QLabel(parent)
    lab.setTextFormat(Qt.PlainText)
    lab.setText(str(text))
    return lab


def show_message(parent, title: str, text, icon=QMessageBox.Critical) -> int:
    """A modal message box whose text is plain text (an error quoting a file's attribute stays literal)."""
    box = QMessageBox(icon, str(title), "", QMessageBox.Ok, parent)
    box.setTextFormat(Qt.PlainText)
    box.setText(str(text))
    return box.exec()


def show_error(parent, title: str, text) -> int:
    return show_message(parent, title, text, QMessageBox.Critical)


def show_warning(parent, title: str, text) -> int:
    return show_message(parent, title, text, QMessageBox.Warning)


def show_info(parent, title: str, text) -> int:
    return show_message(parent, title, text, QMessageBox.Information)


class SafeTextBrowser(QTextBrowser):
    """A QTextBrowser that loads no resource (no ``<img>`` file, no stylesheet) and follows no link
    itself: links reach ``anchorClicked`` and the view decides.  Callers still escape file text."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)

    def loadResource(self, _type, _name):  # noqa: N802 (Qt override)
        return QByteArray()


_GUARDS_INSTALLED = False


def install_plain_text_guards() -> None:
    """Make pyqtgraph's HTML-only text items (LabelItem: plot titles and legend entries; AxisItem:
    axis labels) escape the text they are given, so a view passes plain text and a name can never
    become markup.  The raw text stays in ``item.text`` / ``labelText`` (theme changes re-render it)."""
    global _GUARDS_INSTALLED
    if _GUARDS_INSTALLED:
        return
    import pyqtgraph as pg

    label_set_text = pg.LabelItem.setText

    def set_text(self, text, **args):
        label_set_text(self, plain_html(text), **args)
        self.text = text

    axis_label_string = pg.AxisItem.labelString

    def label_string(self):
        saved = self.labelText, self.labelUnits, self.labelUnitPrefix
        self.labelText, self.labelUnits, self.labelUnitPrefix = (html.escape(str(v)) for v in saved)
        try:
            return axis_label_string(self)
        finally:
            self.labelText, self.labelUnits, self.labelUnitPrefix = saved

    def update_label(self):
        # pyqtgraph sets the label's HTML again on every range change (``updateAutoSIPrefix``): a text layout
        # per axis per pan, zoom or resize, nearly always of the same text.  Set it when it changed; size,
        # picture and repaint as pyqtgraph's ``AxisItem._updateLabel`` does.
        text = self.labelString()
        if text != getattr(self, "_shown_label_html", None):
            self.label.setHtml(text)
            self._shown_label_html = text
        self._adjustSize()
        self.picture = None
        self.update()

    pg.LabelItem.setText = set_text
    pg.AxisItem.labelString = label_string
    pg.AxisItem._updateLabel = update_label
    _GUARDS_INSTALLED = True
