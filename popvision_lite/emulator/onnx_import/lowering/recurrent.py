"""LSTM and GRU as poplibs' popnn runs them (``lib/popnn/Lstm.cpp``, ``lib/popnn/Gru.cpp``): the input of every time
step weighted by the input weights in one matmul up front (popnn's "pre-weighted" input, one GEMM over the whole
sequence), then a sequence loop whose body is the matmul of the previous hidden state with the recurrent
weights, the add of the pre-weighted input and the gates' non-linearities (sigmoid / tanh elementwise ops), from
zero initial states unless the node gives them.  The emulator unrolls the loop: each step is lowered with the
same ops (popnn runs one body in a ``Repeat``: the same cycles, its code once).  Built from the recorded
lowerings (matmul, views, elementwise), so ``--training`` has their backward passes.

ONNX gate orders: LSTM ``i o f c`` (W: [dirs, 4H, in]), GRU ``z r h`` (W: [dirs, 3H, in]); B holds the input
then the recurrence biases.  Refused by name: custom activations, ``clip``, ``input_forget``, peepholes (P),
sequence lengths that differ from the sequence, layout 1 (ONNX Runtime refuses it too)."""

from __future__ import annotations

import numpy as np

from ..loader import OnnxImportError
from .elementwise import binary_op, unary_act
from .matmul import matmul
from .values import Act, attrs

_DEFAULT_ACTS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"]}


def _check(low, node, ins, name, seq, batch):
    at = attrs(node)
    acts = [a.decode() if isinstance(a, bytes) else str(a) for a in at.get("activations", [])]
    dirs = 2 if _direction(at) == "bidirectional" else 1
    if acts and [a.lower() for a in acts] != [a.lower() for a in _DEFAULT_ACTS[node.op_type] * dirs]:
        raise OnnxImportError(f"{low.lm.path}: node '{name}': {node.op_type} activations {acts} are not supported "
                              f"(only the defaults {_DEFAULT_ACTS[node.op_type]}, as popnn runs them)")
    if "clip" in at:
        raise OnnxImportError(f"{low.lm.path}: node '{name}': {node.op_type} clip is not supported (popnn's cells "
                              "do not clip)")
    if at.get("input_forget", 0):
        raise OnnxImportError(f"{low.lm.path}: node '{name}': LSTM input_forget 1 is not supported")
    if len(ins) > 7 and ins[7] is not None and np.size(ins[7]):
        raise OnnxImportError(f"{low.lm.path}: node '{name}': LSTM peepholes (input P) are not supported")
    if any(isinstance(v, Act) for v in ins[1:4] if v is not None):
        raise OnnxImportError(f"{low.lm.path}: node '{name}': {node.op_type} weights must be initializers")
    lens = ins[4] if len(ins) > 4 else None
    if isinstance(lens, Act) or (lens is not None and np.size(lens) and np.any(np.asarray(lens) != seq)):
        raise OnnxImportError(f"{low.lm.path}: node '{name}': {node.op_type} sequence_lens other than the whole "
                              f"sequence ({seq}) are not supported; instead: pad the sequences (packed sequences "
                              "are not emulated)")
    return dirs


def _direction(at):
    d = at.get("direction", b"forward")
    return d.decode() if isinstance(d, bytes) else str(d)


class _Cell:
    """Helpers of one recurrent node: derived weights (per direction, transposed for the matmul; their gradient
    reaches the initializer's rows), rows / column slices of device tensors, elementwise ops."""

    def __init__(self, low, node, name):
        self.low, self.node, self.name = low, node, name

    def weight(self, src, arr, tag):
        wn = f"{src}/{tag}"
        self.low.vals[wn] = np.ascontiguousarray(np.asarray(arr, np.float32))
        if src in self.low.params:
            self.low.params.add(wn)
        return wn

    def mm(self, a, wn, tag):
        return matmul(self.low, a, self.low.vals[wn], f"{self.name}/{tag}", "", wn)

    def cols(self, a, k, h, tag=None):
        """Columns k*h .. (k+1)*h of a 2-D device tensor (a gate: a view)."""
        idx = np.arange(a.size).reshape(a.shape)[:, k * h:(k + 1) * h]
        return self.low.view(a, idx, idx.shape)

    def rows(self, a, r0, r1):
        idx = np.arange(a.size).reshape(a.shape)[r0:r1]
        return self.low.view(a, idx, idx.shape)

    def op(self, kind, a, b, tag, b_name=""):
        return binary_op(self.low, kind, self.node, a, b, f"{self.name}/{tag}", "", b_name)

    def act(self, kind, a, tag, s=None):
        return unary_act(self.low, kind, a, f"{self.name}/{tag}", s)

    def const(self, arr, tag):
        cn = f"{self.name}/{tag}"
        self.low.vals[cn] = np.asarray(arr, np.float32)
        return self.low.act(cn)


def _inputs(low, node, ins, name):
    """(cell, X as (seq, batch, in) Act, seq, batch, hidden)."""
    at = attrs(node)
    layout = int(at.get("layout", 0))
    if layout:  # ONNX Runtime refuses it too ("Batchwise recurrent operations (layout == 1) are not supported")
        raise OnnxImportError(f"{low.lm.path}: node '{name}': {node.op_type} layout 1 (batch first) is not "
                              "supported; instead: export with layout 0 (torch writes batch_first RNNs as "
                              "transposes around a layout-0 node)")
    x = low.data(node, ins)
    if len(x.shape) != 3:
        raise OnnxImportError(f"{low.lm.path}: node '{name}': {node.op_type} input of shape {x.shape}: expected 3-D")
    seq, batch, _ = x.shape
    hidden = int(at.get("hidden_size", np.shape(ins[2])[-1]))
    return _Cell(low, node, name), x, seq, batch, hidden


def _initial(c, ins, k, d, batch, hidden, tag):
    """Initial state k (initial_h / initial_c) of direction d: the node's, else zeros (popnn's default)."""
    v = ins[k] if len(ins) > k else None
    if v is None:
        return c.const(np.zeros((batch, hidden), np.float32), f"d{d}/{tag}0")
    a = v if isinstance(v, Act) else c.low.act(c.node.input[k])
    idx = np.arange(a.size).reshape(a.shape)[d]
    return c.low.view(a, idx, idx.shape)


def _outputs(low, node, name, per_step, finals, seq, batch, hidden, dirs):
    """Y ([seq, dirs, batch, H]) and the final states ([dirs, batch, H]), joined with concats."""
    from .values import canon

    be = low.be

    def join(parts, shape, tag):
        plains = [low.plain(p) for p in parts]
        out = Act(be.concat([(p.h, p.shape) for p in plains], 0, canon(shape), f"{name}/{tag}"), shape)
        if low.training:
            from ..ops import concat_index

            pos, _ = concat_index([p.shape for p in plains], 0)
            low.rec(out, plains, lambda dy: [(p, lambda q=q: be.take(dy, q)) for p, q in zip(plains, pos,
                                                                                              strict=True)])
        return out
    outs = node.output
    if len(outs) > 0 and outs[0]:
        parts = [low.reshape(per_step[d][t], (1, batch, hidden)) for t in range(seq) for d in range(dirs)]
        low.vals[outs[0]] = low.reshape(join(parts, (seq * dirs, batch, hidden), "Y"), (seq, dirs, batch, hidden))
    for k, states in ((1, finals[0]), (2, finals[1] if len(finals) > 1 else None)):
        if len(outs) > k and outs[k]:
            parts = [low.reshape(s, (1, batch, hidden)) for s in states]
            low.vals[outs[k]] = join(parts, (dirs, batch, hidden), "Y_h" if k == 1 else "Y_c") if dirs > 1 else \
                low.reshape(states[0], (1, batch, hidden))


def lower_lstm(low, i, node, ins, name):
    c, x, seq, batch, H = _inputs(low, node, ins, name)
    dirs = _check(low, node, ins, name, seq, batch)
    W, R = np.asarray(ins[1], np.float32), np.asarray(ins[2], np.float32)
    B = np.asarray(ins[3], np.float32) if len(ins) > 3 and ins[3] is not None else np.zeros((dirs, 8 * H), np.float32)
    xs = low.reshape(low.plain(x), (seq * batch, x.shape[2]))
    per_step, hs, cs = [], [], []
    direction = _direction(attrs(node))
    for d in range(dirs):
        reverse = direction == "reverse" or d == 1
        wn = c.weight(node.input[1], W[d].T, f"d{d}/T")
        rn = c.weight(node.input[2], R[d].T, f"d{d}/T")
        bn = c.weight(node.input[3] if len(ins) > 3 and ins[3] is not None else f"{name}/B",
                      B[d, :4 * H] + B[d, 4 * H:], f"d{d}/sum")
        # popnn: the whole sequence's input weighted in one matmul before the loop
        xw = c.op("add", c.mm(xs, wn, f"d{d}/input_weights"), low.vals[bn], f"d{d}/input_bias", bn)
        h, cell = _initial(c, ins, 5, d, batch, H, "h"), _initial(c, ins, 6, d, batch, H, "c")
        steps = [None] * seq
        for t in (range(seq - 1, -1, -1) if reverse else range(seq)):
            tg = f"d{d}/t{t}"
            g = c.op("add", c.rows(xw, t * batch, (t + 1) * batch), c.mm(h, rn, f"{tg}/recurrent"), f"{tg}/gates")
            ig = c.act("sigmoid", c.cols(g, 0, H), f"{tg}/input_gate")
            og = c.act("sigmoid", c.cols(g, 1, H), f"{tg}/output_gate")
            fg = c.act("sigmoid", c.cols(g, 2, H), f"{tg}/forget_gate")
            cand = c.act("tanh", c.cols(g, 3, H), f"{tg}/candidate")
            cell = c.op("add", c.op("mul", fg, cell, f"{tg}/forget"), c.op("mul", ig, cand, f"{tg}/input"),
                        f"{tg}/cell")
            h = c.op("mul", og, c.act("tanh", cell, f"{tg}/cell_tanh"), f"{tg}/hidden")
            steps[t] = h
        per_step.append(steps)
        hs.append(h)
        cs.append(cell)
    _outputs(low, node, name, per_step, (hs, cs), seq, batch, H, dirs)


def lower_gru(low, i, node, ins, name):
    c, x, seq, batch, H = _inputs(low, node, ins, name)
    dirs = _check(low, node, ins, name, seq, batch)
    before = int(attrs(node).get("linear_before_reset", 0))
    W, R = np.asarray(ins[1], np.float32), np.asarray(ins[2], np.float32)
    B = np.asarray(ins[3], np.float32) if len(ins) > 3 and ins[3] is not None else np.zeros((dirs, 6 * H), np.float32)
    bsrc = node.input[3] if len(ins) > 3 and ins[3] is not None else f"{name}/B"
    xs = low.reshape(low.plain(x), (seq * batch, x.shape[2]))
    per_step, hs = [], []
    direction = _direction(attrs(node))
    for d in range(dirs):
        reverse = direction == "reverse" or d == 1
        wn = c.weight(node.input[1], W[d].T, f"d{d}/T")
        wb, rb = B[d, :3 * H], B[d, 3 * H:]
        if before:  # the h gate's recurrence bias is inside the reset: r * (h R_h + Rb_h)
            xbn = c.weight(bsrc, np.concatenate([wb[:2 * H] + rb[:2 * H], wb[2 * H:]]), f"d{d}/input")
            rbn = c.weight(bsrc, np.concatenate([np.zeros(2 * H, np.float32), rb[2 * H:]]), f"d{d}/recurrent")
            rn = c.weight(node.input[2], R[d].T, f"d{d}/T")
        else:  # r * h, then times R_h: the z / r rows and the h row apart
            xbn = c.weight(bsrc, wb + rb, f"d{d}/sum")
            rn = c.weight(node.input[2], R[d, :2 * H].T, f"d{d}/zr/T")
            rhn = c.weight(node.input[2], R[d, 2 * H:].T, f"d{d}/h/T")
        xw = c.op("add", c.mm(xs, wn, f"d{d}/input_weights"), low.vals[xbn], f"d{d}/input_bias", xbn)
        h = _initial(c, ins, 5, d, batch, H, "h")
        steps = [None] * seq
        for t in (range(seq - 1, -1, -1) if reverse else range(seq)):
            tg = f"d{d}/t{t}"
            xt = c.rows(xw, t * batch, (t + 1) * batch)
            hr = c.mm(h, rn, f"{tg}/recurrent")
            if before:
                hr = c.op("add", hr, low.vals[rbn], f"{tg}/recurrent_bias", rbn)
            z = c.act("sigmoid", c.op("add", c.cols(xt, 0, H), c.cols(hr, 0, H), f"{tg}/update_pre"),
                      f"{tg}/update_gate")
            r = c.act("sigmoid", c.op("add", c.cols(xt, 1, H), c.cols(hr, 1, H), f"{tg}/reset_pre"),
                      f"{tg}/reset_gate")
            if before:
                rh = c.op("mul", r, c.cols(hr, 2, H), f"{tg}/reset")
            else:
                rh = c.mm(c.op("mul", r, h, f"{tg}/reset"), rhn, f"{tg}/recurrent_h")
            cand = c.act("tanh", c.op("add", c.cols(xt, 2, H), rh, f"{tg}/candidate_pre"), f"{tg}/candidate")
            # (1 - z) h~ + z h = h~ + z (h - h~)
            h = c.op("add", cand, c.op("mul", z, c.op("sub", h, cand, f"{tg}/diff"), f"{tg}/keep"), f"{tg}/hidden")
            steps[t] = h
        per_step.append(steps)
        hs.append(h)
    _outputs(low, node, name, per_step, (hs,), seq, batch, H, dirs)
