"""Verdict panel (on the Summary view): IPU or GPU for this run, side by side, with cost.

Thin: every number comes from :func:`popvision_lite.analysis.verdict.verdict`.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSpinBox, QVBoxLayout, QWidget

from popvision_lite import devices
from popvision_lite.analysis import model_pass as wl
from popvision_lite.analysis.summary import summarize
from popvision_lite.analysis.verdict import DEFAULT_GPU, DEFAULT_SAMPLES, PRECISIONS, verdict
from popvision_lite.errors import PopvisionError
from popvision_lite.gui import theme
from popvision_lite.gui.text import plain_html


def verdict_choice(document) -> tuple[str, int]:
    """(GPU spec id, GPU count) the document's verdict is for: the Summary panel's choice once made, else the
    default GPU against as many GPUs as the run uses IPUs (all replicas)."""
    choice = getattr(document, "verdict_choice", None)
    if choice is not None:
        return choice
    try:
        n_ipus = wl.chips(document.profile)[0]
    except (PopvisionError, AttributeError, TypeError, ValueError):
        n_ipus = int(document.profile.target.num_ipus)
    return DEFAULT_GPU, int(n_ipus)


def document_verdict(document, gpu: str | None = None, count: int | None = None, precision: str | None = None):
    """The verdict of ``document`` for ``gpu`` x ``count`` (default: :func:`verdict_choice`) in ``precision``
    (default: the panel's choice, else the run's), through the document's cache: the Summary panel and the
    Roofline's verdict line read this one object."""
    dg, dn = verdict_choice(document)
    gid, n = gpu or dg, int(count or dn)
    prec = precision or getattr(document, "verdict_precision", None) or None
    prof = document.profile
    if hasattr(document, "cached"):
        summ = document.cached("summary", summarize, prof)   # the Summary view's, already made
        return document.cached(("verdict", gid, n, prec), _verdict, prof, gid, n, summ, prec)
    return verdict(prof, gid, n, precision=prec)


def _verdict(prof, gid, n, summ, prec):
    return verdict(prof, gid, n, DEFAULT_SAMPLES, summ, precision=prec)


class VerdictPanel(QWidget):
    def __init__(self, document, parent=None):
        super().__init__(parent)
        self.document = document
        self.result = None
        gid0, n_ipus = verdict_choice(document)

        bar = QHBoxLayout()
        bar.setContentsMargins(0, 0, 0, 0)
        title = QLabel("<b>Verdict: IPU or GPU?</b>")
        bar.addWidget(title)
        bar.addStretch(1)
        bar.addWidget(QLabel("vs"))
        self.gpus = QSpinBox()
        self.gpus.setRange(1, 4096)
        self.gpus.setValue(n_ipus)
        self.gpus.setSuffix(" x")
        self.gpus.setToolTip("Number of GPUs (their own tensor x pipeline x data-parallel placement, searched); "
                             "default: as many as the run uses IPUs (all replicas and tensor-parallel groups)")
        bar.addWidget(self.gpus)
        self.gpu = QComboBox()
        for gid in devices.list_devices("gpu"):
            self.gpu.addItem(devices.load_device(gid).name.replace("NVIDIA ", ""), gid)
        i = self.gpu.findData(gid0)
        self.gpu.setCurrentIndex(max(i, 0))
        self.gpu.setToolTip("GPU to estimate (constants and prices from resources/devices)")
        bar.addWidget(self.gpu)
        self.precision = QComboBox()
        self.precision.addItem("run's precision", None)
        for p in PRECISIONS:
            self.precision.addItem(p.upper(), p)
        i = self.precision.findData(getattr(document, "verdict_precision", None))
        self.precision.setCurrentIndex(max(i, 0))
        self.precision.setToolTip("Precision the GPUs train in (FP8: the GEMMs at the GPU's FP8 rate, Transformer "
                                  "Engine, where its spec has one)")
        bar.addWidget(self.precision)

        self.body = QLabel()
        self.body.setTextFormat(Qt.RichText)
        self.body.setWordWrap(True)
        self.body.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.body.setAlignment(Qt.AlignTop | Qt.AlignLeft)

        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 4, 0, 0)
        lay.addLayout(bar)
        lay.addWidget(self.body)
        self.gpus.valueChanged.connect(self.refresh)
        self.gpu.currentIndexChanged.connect(self.refresh)
        self.precision.currentIndexChanged.connect(self.refresh)
        theme.notifier.changed.connect(self._fill)
        self.refresh()

    def refresh(self, *_):
        gid, n = self.gpu.currentData(), int(self.gpus.value())
        prec = self.precision.currentData()
        if hasattr(self.document, "set_verdict_choice"):
            self.document.set_verdict_choice(gid, n, prec)
        try:
            self.result = document_verdict(self.document, gid, n, prec)
        except PopvisionError as e:
            self.result = None
            self.body.setText(f"Verdict unavailable: {plain_html(str(e))}")
            return
        self._fill()

    def _fill(self, *_):
        v = self.result
        if v is None:
            return
        c = theme.colors()
        gpu_wins = v.speedup >= 1  # False when the IPU run does not fit (NaN): then no winner is coloured
        col = c["bad"] if gpu_wins or not v.ipu.fits else c["good"]
        rows = "".join(
            f"<tr><td>{plain_html(a)}</td><td>{plain_html(b)}</td><td>{plain_html(g)}</td></tr>"
            for a, b, g in v.rows() if a not in ("system", "basis"))
        basis = (f"IPU: {plain_html(v.ipu.basis)}.<br>GPU: {plain_html(v.gpu.basis)}; "
                 "one kernel per op, launch overhead and achievable fractions measured (see resources/devices).")
        prices = "".join("<br>" + plain_html(t) for t in v.price_notes())
        self.body.setText(
            f"<p style='font-weight:bold; color:{col}'>{plain_html(v.headline())}</p>"
            f"<table cellpadding=2><tr><th></th><th>{plain_html(v.ipu.label)}</th>"
            f"<th>{plain_html(v.gpu.label)}</th></tr>{rows}</table>"
            f"<p style='color:{c['muted']}'>{basis}{prices}</p>")

    def tables(self) -> dict:
        import pandas as pd

        if self.result is None:
            return {}
        rows = self.result.rows()
        return {"verdict": pd.DataFrame(rows, columns=["metric", "ipu", "gpu"])}
