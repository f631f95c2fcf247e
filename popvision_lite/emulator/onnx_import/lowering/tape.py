"""The autodiff tape of a lowering (``--training``): each op records its backward while it is lowered, only
where a weight (float initializer) is upstream; :meth:`Tape.backward` replays the tape in reverse from the
loss, recomputing repeated blocks when asked, and appends an SGD step on every weight that got a gradient."""

from __future__ import annotations

import numpy as np

from ..loader import OnnxImportError
from .table import TRAINABLE_OPS
from .values import Act, canon, is_identity


class Tape:
    """Backward-pass recording and replay; the state (``tape``, ``rg``, ...) is set up by the lowerer."""

    def rec(self, out, deps, fn, force=False):
        """Record ``out``'s backward ``fn(dy) -> [(input Act or weight name, thunk of its gradient)]``
        when a weight is upstream (``deps`` need gradients, or ``force``)."""
        if force or any(id(d) in self.rg for d in deps if d is not None):
            self.rg.add(id(out))
            self.tape.append((out, fn))
            self.tape_block.append(self._cur_block)

    def need(self, target) -> bool:
        return (target in self.params) if isinstance(target, str) else id(target) in self.rg

    def no_backward(self, what, name):
        raise OnnxImportError(f"{self.lm.path}: node '{name}': --training: {what} has no backward pass yet; "
                              f"training supports: {', '.join(TRAINABLE_OPS)} (run without --training)")

    def view_bwd(self, dy, pidx, n, fill_last=False):
        """Gradient of a view (elements ``pidx`` of a tensor of ``n`` elements) given ``dy``; ``fill_last``: the
        last element is a constant fill value (a pad's, a spread-out input's zeros) read any number of times,
        whose gradient nothing reads, so its reads do not make the view a broadcast."""
        be = self.be
        m = int(pidx.size)
        counts = np.bincount(pidx, minlength=n)
        if fill_last:
            counts[-1] = min(counts[-1], 1)
            if counts.max(initial=0) > 1:  # a broadcast: the fill's own reads get no gradient
                counts[-1] = 0
        if m == n and counts.max(initial=0) == 1:  # a permutation: the inverse view
            inv = np.empty(n, dtype=np.int64)
            inv[pidx] = np.arange(n, dtype=np.int64)
            if is_identity(inv, n):
                return dy
            return be.take(dy, inv)
        if counts.max(initial=0) <= 1:  # a subset (slice / split): zeros where nothing was read
            zero = self.tensor_of(f"zero/{n}_{m}", np.zeros(1, np.float32))
            cat = be.concat([(self.operand_raw(dy, (m,)), (m,)), (zero, (1,))], 0, (m + 1,), f"view_bwd/{n}_{m}")
            src = np.full(n, m, dtype=np.int64)
            src[pidx] = np.arange(m, dtype=np.int64)
            return be.take(cat, src)
        return self.broadcast_bwd(dy, pidx, counts, n)

    def broadcast_bwd(self, dy, pidx, counts, n):
        """Gradient of a view that reads elements more than once (a broadcast, Expand, repeated Gather indices):
        element j's gradient is the sum of ``dy`` over the positions that read it - a reduction over the
        broadcast axes, as poplibs' popops::reduce computes it, not a dense scatter matrix.  The reads of the
        elements read ``c`` times are gathered as ``c`` rows (a view) and reduced over them (``reduce_rows``);
        one group per distinct count, joined with a zero for elements nothing read.  ``counts`` is the number
        of reads of each of the ``n`` elements (0: no gradient)."""
        be = self.be
        m = int(pidx.size)
        flat = self.operand_raw(dy, (m,))
        order = np.argsort(pidx, kind="stable")
        start = np.cumsum(counts) - counts
        tag = f"{n}_{m}_{len(self.tape)}"
        parts, where = [], np.full(n, -1, np.int64)
        for c in np.unique(counts[counts > 0]):
            js = np.flatnonzero(counts == c)
            pos = order[start[js][None, :] + np.arange(int(c))[:, None]]  # (c, n_c): row k = each element's k-th read
            g = be.take(flat, pos.ravel()) if c == 1 else be.reduce_rows(be.take(flat, pos), f"bcast_bwd/{tag}_x{c}")
            where[js] = sum(int(p.shape[0]) for p in parts) + np.arange(js.size)
            parts.append(g)
        if len(parts) == 1 and (where >= 0).all():
            return parts[0] if np.array_equal(where, np.arange(n)) else be.take(parts[0], where)
        size = int(sum(int(np.prod(p.shape)) for p in parts))
        zero = self.tensor_of(f"zero/{n}_{m}", np.zeros(1, np.float32))
        cat = be.concat([*[(p, (int(np.prod(p.shape)),)) for p in parts], (zero, (1,))], 0, (size + 1,),
                        f"bcast_bwd/{tag}/join")
        return be.take(cat, np.where(where >= 0, where, size))

    def backward(self, outputs: dict, loss_output=None, lr: float = 0.01):
        """Backward pass from loss = mean of ``loss_output`` (default: sum of the means of all device
        outputs), then SGD on every weight that got a gradient; returns {weight name: updated handle}."""
        be = self.be
        names = [loss_output] if loss_output else [k for k, v in outputs.items() if isinstance(v, Act)]
        if loss_output and loss_output not in outputs:
            raise OnnxImportError(f"--loss-output: '{loss_output}' is not a graph output (outputs: "
                                  f"{', '.join(outputs)})")
        grads: dict = {}

        def like(g, ref):  # the same elements in the other gradient's handle shape
            return g if tuple(g.shape) == tuple(ref.shape) else self.operand_raw(g, tuple(ref.shape))

        def acc(key, g):
            grads[key] = be.add(grads[key], like(g, grads[key]), f"grad_acc/{len(grads)}") if key in grads else g

        for nm in names:
            a = outputs[nm]
            if not isinstance(a, Act):
                continue
            seed = self.tensor_of(f"loss/{nm}/dy", np.full(canon(a.shape), 1.0 / a.size, np.float32))
            acc(id(a), seed)
        objs = {}
        for out, _ in self.tape:
            objs[id(out)] = out
        def step(out, fn):
            g = grads.pop(id(out), None)
            if g is None:
                return
            if hasattr(out.h, "shape") and int(np.prod(out.h.shape)) == int(np.prod(g.shape)):
                g = like(g, out.h)  # the backward reads dy in its forward output's handle shape
            for target, thunk in fn(g):
                if target is None:
                    continue
                key = target if isinstance(target, str) else self.act_param.get(id(target), None)
                if key is None:
                    if id(target) not in self.rg:
                        continue
                    key = id(target)
                elif key not in self.params:
                    continue
                acc(key, thunk())

        done = set()
        with be.scope("bwd"):
            n_fwd = len(self.tape)
            for k in range(n_fwd - 1, -1, -1):
                b = self.tape_block[k]
                if b < 0:
                    step(*self.tape[k])
                elif b not in done:  # recomputation: the block's forward again, then its backward on that
                    done.add(b)
                    for out, fn in reversed(self.recompute_block(b, grads, acc)):
                        step(out, fn)
        updated = {}
        for key, g in grads.items():
            if isinstance(key, str) and key in self.handles and key in self.params:
                updated[key] = be.sgd(self.handles[key], like(g, self.handles[key]), lr, f"{key}/sgd")
        return updated

    def recompute_block(self, b, grads, acc):
        """Lower block ``b``'s nodes again (from its inputs, kept from the forward pass: the checkpoints) and
        return the tape entries of that second forward; the gradients waiting on the block's first-forward
        outputs move to the recomputed ones.  The first forward's activations inside the block are then read
        by nothing after the forward pass, so they are not live during the backward (the memory recomputation
        saves)."""
        s0, e0 = self.blocks[b]
        nodes = self.graph.node
        produced = [o for i in range(s0, e0) for o in nodes[i].output if o]
        old = {o: self.vals.get(o) for o in produced}
        n0 = len(self.tape)
        with self.be.scope("recompute"):
            self.lower_range(s0, e0)
        self._cur_block = -1
        for o in produced:
            a, new = old[o], self.vals.get(o)
            if isinstance(a, Act) and isinstance(new, Act) and id(a) in grads:
                acc(id(new), grads.pop(id(a)))
        entries = self.tape[n0:]
        del self.tape[n0:], self.tape_block[n0:]
        return entries
