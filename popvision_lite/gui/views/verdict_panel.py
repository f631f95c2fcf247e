"""Verdict panel (on the Summary view): IPU or GPU for this run, side by side, with cost.

Thin: every number comes from :func:`popvision_lite.analysis.verdict.verdict`.  A run whose model pass has more
than ``SYNC_MAX_KERNELS`` kernel launches (the verdict costs ~0.1 ms per launch) is estimated on a worker thread:
the panel says so until the result comes; a newer choice of GPU or count cancels the older computation (its
result is dropped), so nothing a file claims runs long on the GUI thread (issue 45).
"""

from __future__ import annotations

from PySide6.QtCore import Qt, QThreadPool
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSpinBox, QVBoxLayout, QWidget

from popvision_lite import devices
from popvision_lite.analysis import model_pass as wl
from popvision_lite.analysis.summary import summarize
from popvision_lite.analysis.verdict import DEFAULT_GPU, DEFAULT_SAMPLES, PRECISIONS, verdict
from popvision_lite.errors import PopvisionError
from popvision_lite.gui import theme
from popvision_lite.gui.text import plain_html
from popvision_lite.gui.workers import Worker

SYNC_MAX_KERNELS = 5_000  # a model pass up to this (BERT-Large: ~1,100) is estimated at once, in under a second


def small_pass(profile) -> bool:
    """Whether the verdict of ``profile`` is quick enough for the GUI thread: its model pass has at most
    ``SYNC_MAX_KERNELS`` kernel launches (counted from the op counts, without building the pass).  A profile
    whose counts cannot be read is 'small': the verdict then fails at once with the reason."""
    try:
        return int(wl.op_counts(profile).model_calls.sum()) <= SYNC_MAX_KERNELS
    except (PopvisionError, AttributeError, KeyError, TypeError, ValueError):
        return True


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


def document_verdict(document, gpu: str | None = None, count: int | None = None, precision: str | None = None,
                     compute: bool = True):
    """The verdict of ``document`` for ``gpu`` x ``count`` (default: :func:`verdict_choice`) in ``precision``
    (default: the panel's choice, else the run's), through the document's cache: the Summary panel and the
    Roofline's verdict line read this one object.  ``compute`` False: only a verdict already computed (None
    otherwise)."""
    dg, dn = verdict_choice(document)
    gid, n = gpu or dg, int(count or dn)
    prec = precision or getattr(document, "verdict_precision", None) or None
    prof = document.profile
    if hasattr(document, "cached"):
        key = ("verdict", gid, n, prec)
        if not compute and not document.has_cached(key):
            return None
        summ = document.cached("summary", summarize, prof)   # the Summary view's, already made
        return document.cached(key, _verdict, prof, gid, n, summ, prec)
    return verdict(prof, gid, n, precision=prec) if compute else None


def _verdict(prof, gid, n, summ, prec):
    return verdict(prof, gid, n, DEFAULT_SAMPLES, summ, precision=prec)


class VerdictPanel(QWidget):
    def __init__(self, document, parent=None):
        super().__init__(parent)
        self.document = document
        self.result = None
        self.failed: Exception | None = None
        self._pending = None
        self._worker: Worker | None = None
        self._pool = QThreadPool(self)
        self._pool.setMaxThreadCount(1)
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
        doc = self.document
        if hasattr(doc, "set_verdict_choice"):
            doc.set_verdict_choice(gid, n, prec)
        prec = prec or getattr(doc, "verdict_precision", None) or None  # as document_verdict reads it
        key = ("verdict", gid, n, prec)
        self._pending, self.failed = key, None
        if self._worker is not None:
            self._worker.cancel()  # an older choice still computing: its result is dropped
            self._worker = None
        if hasattr(doc, "has_cached") and not doc.has_cached(key) and not small_pass(doc.profile):
            self.result = None
            self.body.setText("Computing the verdict (a large model pass: estimated off the GUI thread)…")
            prof = doc.profile
            summ = doc.cached("summary", summarize, prof)
            w = Worker(lambda task: (key, _verdict(prof, gid, n, summ, prec)), title="Verdict")
            # bound methods: Qt drops the connections when this panel is destroyed
            w.signals.result.connect(self._keyed_done)
            w.signals.error.connect(self._keyed_failed)
            self._worker = w
            w.start_on(self._pool)
            return
        try:
            self.result = document_verdict(doc, gid, n, prec)
        except PopvisionError as e:
            self._show_failure(e)
            return
        self._fill()

    def _keyed_done(self, keyed):
        key, result = keyed
        if hasattr(self.document, "put_cached"):
            self.document.put_cached(key, result)
        if key == self._pending:
            self._worker = None
            self.result = result
            self._fill()

    def _keyed_failed(self, exc):
        self._worker = None
        self._show_failure(exc)

    def _show_failure(self, exc):
        self.result = None
        self.failed = exc
        self.body.setText(f"Verdict unavailable: {plain_html(str(exc))}")

    def is_ready(self) -> bool:
        """True once the verdict of the current choice is shown (or failed)."""
        return self.result is not None or self.failed is not None

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
