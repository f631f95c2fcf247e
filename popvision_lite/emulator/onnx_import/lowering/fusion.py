"""Patterns exporters emit for one op, fused back: the Erf GELU (``x * 0.5 * (1 + erf(x / sqrt 2))``, both
operand orders) becomes one ``gelu`` op and the decomposed layer norm (``ReduceMean, Sub, Pow, ReduceMean, Add,
Sqrt, Div [, Mul, Add]``) one ``layer_norm`` op, as exporters emit ``torch.nn.GELU`` / ``LayerNorm``."""

from __future__ import annotations

import math

import numpy as np

from .elementwise import unary_act
from .rows import layer_norm
from .values import attrs, ints


class Patterns:
    """The fused patterns of a graph: ``skip`` (indices of member nodes lowered by their pattern's last node)
    and ``fused`` ({last node index: ("gelu", x) or ("layer_norm", x, gamma, beta, eps)})."""

    def __init__(self, lm):
        self.lm = lm
        self.graph = lm.model.graph
        self._consumers: dict = {}
        for i, n in enumerate(self.graph.node):
            for x in n.input:
                if x:
                    self._consumers.setdefault(x, []).append(i)
        self._producer = {o: i for i, n in enumerate(self.graph.node) for o in n.output if o}
        self._ranks = {}
        for vi in list(self.graph.value_info) + list(self.graph.input) + list(self.graph.output):
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
                self._ranks[vi.name] = len(vi.type.tensor_type.shape.dim)
        self.skip, self.fused = self._find()

    def static_const(self, name):
        """Value of ``name`` if it is an initializer or a Constant node's output (pattern matching)."""
        if name in self.lm.initializers:
            return self.lm.initializers[name]
        i = self._producer.get(name)
        if i is not None and self.graph.node[i].op_type == "Constant":
            from onnx import numpy_helper

            a = attrs(self.graph.node[i])
            if "value" in a:
                return numpy_helper.to_array(a["value"])
            for k in ("value_float", "value_int"):
                if k in a:
                    return np.asarray(a[k])
        return None

    def _sole(self, name):
        c = self._consumers.get(name, [])
        outs = {o.name for o in self.graph.output}
        return c[0] if len(c) == 1 and name not in outs else None

    def _const_near(self, name, target, tol=1e-3):
        v = self.static_const(name)
        return v is not None and np.asarray(v).size == 1 and abs(float(np.asarray(v).ravel()[0]) - target) <= tol

    def _other(self, node, name):
        ins = list(node.input)
        if len(ins) != 2 or name not in ins:
            return None
        return ins[1] if ins[0] == name else ins[0]

    def _find(self):
        nodes = self.graph.node
        skip, fused = set(), {}
        for i, n in enumerate(nodes):
            if n.op_type == "Erf":
                r = self._match_gelu(i)
                if r:
                    members, last, x = r
                    skip |= set(members) - {last}
                    fused[last] = ("gelu", x)
            elif n.op_type == "ReduceMean":
                r = self._match_layer_norm(i)
                if r:
                    members, last, x, g, b, eps = r
                    skip |= set(members) - {last}
                    fused[last] = ("layer_norm", x, g, b, eps)
        return skip, fused

    def _match_gelu(self, ie):
        nodes = self.graph.node
        e = nodes[ie]
        ip = self._producer.get(e.input[0])
        if ip is None or self._sole(e.input[0]) != ie:
            return None
        p = nodes[ip]
        x = None
        if p.op_type == "Div" and self._const_near(p.input[1], math.sqrt(2.0)):
            x = p.input[0]
        elif p.op_type == "Mul":
            for a, b in ((0, 1), (1, 0)):
                if self._const_near(p.input[b], 1 / math.sqrt(2.0)):
                    x = p.input[a]
        if x is None:
            return None
        ia = self._sole(e.output[0])
        if ia is None or nodes[ia].op_type != "Add" or not self._const_near(self._other(nodes[ia], e.output[0]) or "", 1.0):
            return None
        im = self._sole(nodes[ia].output[0])
        if im is None or nodes[im].op_type != "Mul":
            return None
        other = self._other(nodes[im], nodes[ia].output[0])
        members = [ip, ie, ia, im]
        if other is not None and other != x and self._const_near(other, 0.5):  # (0.5 * (1 + erf)) * x
            ix = self._sole(nodes[im].output[0])
            if ix is None or nodes[ix].op_type != "Mul" or self._other(nodes[ix], nodes[im].output[0]) != x:
                return None
            return [*members, ix], ix, x
        if other == x:  # x * (1 + erf) then * 0.5
            ih = self._sole(nodes[im].output[0])
            if ih is None or nodes[ih].op_type != "Mul" or not self._const_near(
                    self._other(nodes[ih], nodes[im].output[0]) or "", 0.5):
                return None
            return [*members, ih], ih, x
        ih = self._producer.get(other or "")
        if ih is None or nodes[ih].op_type != "Mul" or self._sole(other) != im:
            return None
        h = nodes[ih]
        if x in h.input and self._const_near(self._other(h, x) or "", 0.5):
            return [*members, ih], im, x
        return None

    def _axes_last(self, node, x):
        a = attrs(node)
        axes = a.get("axes")
        if axes is None and len(node.input) > 1 and node.input[1]:
            v = self.static_const(node.input[1])
            axes = None if v is None else ints(v)
        if axes is None or len(axes) != 1:
            return False
        r = self._ranks.get(x)
        return axes[0] == -1 or (r is not None and axes[0] == r - 1)

    def _match_layer_norm(self, ir):
        nodes = self.graph.node
        m = nodes[ir]
        x = m.input[0]
        if not self._axes_last(m, x):
            return None
        isub = self._sole(m.output[0])
        if isub is None or nodes[isub].op_type != "Sub" or list(nodes[isub].input) != [x, m.output[0]]:
            return None
        d = nodes[isub].output[0]
        cons = self._consumers.get(d, [])
        if len(cons) != 2 or d in {o.name for o in self.graph.output}:
            return None
        ipow = next((c for c in cons if nodes[c].op_type == "Pow" and self._const_near(nodes[c].input[1], 2.0)
                     or nodes[c].op_type == "Mul" and list(nodes[c].input) == [d, d]), None)
        idiv = next((c for c in cons if nodes[c].op_type == "Div" and nodes[c].input[0] == d), None)
        if ipow is None or idiv is None:
            return None
        im2 = self._sole(nodes[ipow].output[0])
        if im2 is None or nodes[im2].op_type != "ReduceMean" or not self._axes_last(nodes[im2], x):
            return None
        iadd = self._sole(nodes[im2].output[0])
        if iadd is None or nodes[iadd].op_type != "Add":
            return None
        eps = self._other(nodes[iadd], nodes[im2].output[0])
        if eps is None or self.static_const(eps) is None or np.size(self.static_const(eps)) != 1:
            return None
        eps = float(np.asarray(self.static_const(eps)).ravel()[0])
        isq = self._sole(nodes[iadd].output[0])
        if isq is None or nodes[isq].op_type != "Sqrt" or self._sole(nodes[isq].output[0]) != idiv:
            return None
        if list(nodes[idiv].input) != [d, nodes[isq].output[0]]:
            return None
        members = [ir, isub, ipow, im2, iadd, isq, idiv]
        last, g, b = idiv, None, None
        inext = self._sole(nodes[idiv].output[0])
        if inext is not None and nodes[inext].op_type == "Mul":
            gg = self._other(nodes[inext], nodes[idiv].output[0])
            if gg is not None and gg in self.lm.initializers and self.lm.initializers[gg].ndim == 1:
                g, last = gg, inext
                members.append(inext)
                inext = self._sole(nodes[inext].output[0])
                if inext is not None and nodes[inext].op_type == "Add":
                    bb = self._other(nodes[inext], nodes[last].output[0])
                    if bb is not None and bb in self.lm.initializers and self.lm.initializers[bb].ndim == 1:
                        b, last = bb, inext
                        members.append(inext)
        return members, last, x, g, b, eps


def lower_fused(low, i, node, spec):
    """Lower a matched pattern (``spec`` of :class:`Patterns`) as its one op."""
    name = low.node_name(i, node)
    out = node.output[0]
    if spec[0] == "gelu":
        x = low.act(spec[1])
        low.vals[out] = unary_act(low, "gelu_erf", x, name + "/gelu")
    else:
        _, xn, g, b, eps = spec
        x = low.act(xn)
        row = x.shape[-1]
        gname, bname = g or f"{name}/gamma", b or f"{name}/beta"
        gam = low.tensor_of(g) if g else low.tensor_of(gname, np.ones(row, np.float32))
        bet = low.tensor_of(b) if b else low.tensor_of(bname, np.zeros(row, np.float32))
        low.vals[out] = layer_norm(low, x, row, gam, bet, gname, bname, name + "/layer_norm", eps)
    low.op_count += 1
