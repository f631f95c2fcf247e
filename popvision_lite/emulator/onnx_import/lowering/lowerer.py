"""Lowering an ONNX graph onto the backend op vocabulary (``backends/backend.py`` + ``ops.py``): the walk over the
nodes in graph order, constant folding, IPU placement and the dispatch through the table (``table.LOWERINGS``).

Values are either numpy arrays (constants: initializers, ``Constant`` nodes and everything folded from them and
from shapes) or :class:`Act` (a tensor on the device: a backend handle plus its ONNX shape).  Nodes whose inputs
are all constants are evaluated here with ``onnx.reference`` (constant folding: ``Shape``/``Gather``/``Concat``/
``Range``/... on shapes, masks, ...); the rest become backend ops named after the ONNX node."""

from __future__ import annotations

import numpy as np

from ..loader import OnnxImportError
from .blocks import find_blocks
from .fold import evaluate_node
from .fusion import Patterns, lower_fused
from .layout import Layout
from .outline import Outliner
from .quantized import CONTRIB_OPS
from .seeded import SEEDED_OPS, lower_seeded
from .table import DEVICE_OPS, INSTEAD, LOWERINGS, PARAM_FOLDABLE
from .values import Act, attrs, canon


class Lowerer(Layout):
    """Walks the graph in order and builds it on backend ``be``."""

    def __init__(self, be, lm, input_values: dict, ipus: int = 1, training: bool = False, ipu_split=None,
                 recompute: bool = False, outline: bool = False, seed: int = 0):
        self.be = be
        self.seed = int(seed)  # Dropout masks and random ops are drawn from it (seeded.py)
        self.seeded: dict = {}  # node index -> the values drawn for it (the numerics check feeds them to ONNX Runtime)
        self.quantized = False  # a quantized model, run in float (quantized.py): the check's tolerance is 8-bit's
        self.dynamic_quantized: set = set()  # ids of DynamicQuantizeLinear outputs (real values, scale 1)
        self.incomparable: set = set()  # ids of values ONNX Runtime holds differently (integers) - not checked
        self.training = bool(training)
        self.tape: list = []        # (output Act, backward fn(dy) -> [(Act or param name, grad handle)])
        self.tape_block: list = []  # the recomputation block (index into self.blocks) of each tape entry, or -1
        self._cur_block = -1
        self._const_acts: dict = {}  # constant / weight name -> its Act (one per name, so grads add up)
        self.act_param: dict = {}    # id(Act) -> weight name
        self.rg: set = set()         # ids of Acts a weight flows into (they need gradients)
        self.perm_cache: dict = {}  # (shape, perm) -> transpose index
        self.lm = lm
        self.graph = lm.model.graph
        self.opset = lm.opset
        self.vals: dict = {}
        self.params: set[str] = set()
        self.handles: dict = {}   # const name -> backend tensor
        self.notes: list[str] = []
        self.ipus = max(1, int(ipus))
        self.ipu_split = list(ipu_split or [])
        self.placement: dict[str, int] = {}
        self.op_count = 0
        for name, arr in lm.initializers.items():
            self.vals[name] = arr
            if np.issubdtype(arr.dtype, np.floating) and arr.size > 1:
                self.params.add(name)
        for name, (shape, _et) in lm.inputs.items():
            v = input_values[name]
            if np.issubdtype(np.asarray(v).dtype, np.floating):
                self.vals[name] = Act(be.input(name, np.asarray(v).reshape(canon(shape))), shape)
            else:  # integer / bool inputs (ids, masks) are known when the graph is built
                self.vals[name] = np.asarray(v)
        patterns = Patterns(lm)
        self.skip, self.fused = patterns.skip, patterns.fused
        self.must_fold = self._weights_to_fold() if self.training else set()
        self._place()
        self.blocks = find_blocks(self.graph.node) if recompute and self.training else []
        self.block_of = np.full(len(self.graph.node), -1, dtype=np.int64)
        for b, (s0, e0) in enumerate(self.blocks):
            self.block_of[s0:e0] = b
        # timing-only inference: each repeated block's body lowered once, the others calls of it (outline.py)
        self.outliner = Outliner(self) if outline and Outliner.applies(self) else None
        if self.outliner is not None and not self.outliner.blocks:
            self.outliner = None

    def _weights_to_fold(self) -> set[int]:
        """Training: the nodes on weights alone (every input known when the graph is built) whose results reach,
        through other such nodes, an op with no device lowering or no backward pass (a rotary table's Cos of
        ``inv_freq``, a Range, a Tile): they are evaluated when the graph is built, as in inference, and what
        they compute is a constant, not trained (a note says so).  Other nodes on weights run on the device, so
        their weights get gradients."""
        nodes = self.graph.node
        known = set(self.lm.initializers) | {k for k, v in self.vals.items() if not isinstance(v, Act)}
        on_consts = []
        for i, n in enumerate(nodes):
            if n.domain in ("", "ai.onnx") and (n.op_type in ("Constant", "Shape", "Size")
                                                or all(x in known for x in n.input if x)):
                known.update(o for o in n.output if o)
                on_consts.append(i)
        producer = {o: i for i in on_consts for o in nodes[i].output if o}
        fold: set[int] = set()
        for i in reversed(on_consts):
            n = nodes[i]
            lw = LOWERINGS.get(n.op_type)
            if i in fold or n.op_type in SEEDED_OPS or lw is None or not lw.trainable:
                fold.add(i)
                fold.update(producer[x] for x in n.input if x in producer)
        return fold

    def _place(self):
        """IPU of each node: layers balanced by the bytes of the weights they read (in graph order)."""
        nodes = self.graph.node
        own = np.array([sum(self.lm.initializers[x].nbytes for x in n.input if x in self.params) for n in nodes],
                       dtype=np.float64)
        total = own.sum()
        if self.ipu_split:
            self._user_split(nodes, own)
            return
        if self.ipus == 1 or total == 0:
            self.ipu_of = np.zeros(len(nodes), dtype=np.int64)
            self.weight_bytes_per_ipu = [int(total)] + [0] * (self.ipus - 1)
            return
        mid = np.cumsum(own) - own / 2
        ipu = np.minimum(self.ipus - 1, (mid / total * self.ipus).astype(np.int64))
        self.ipu_of = np.maximum.accumulate(ipu)  # never move back to an earlier IPU
        self.weight_bytes_per_ipu = [int(own[self.ipu_of == k].sum()) for k in range(self.ipus)]

    def _user_split(self, nodes, own):
        """IPU k + 1 starts at the k-th node named in ``ipu_split`` (graph order)."""
        if len(self.ipu_split) != self.ipus - 1:
            raise OnnxImportError(f"--ipu-split: {len(self.ipu_split)} node name(s) for {self.ipus} IPUs; give "
                                  f"{self.ipus - 1} (the first node of IPU 1, 2, ...)")
        names = [self.node_name(i, n) for i, n in enumerate(nodes)]
        pos = []
        for nm in self.ipu_split:
            hits = [i for i, (a, n) in enumerate(zip(names, nodes, strict=True)) if nm in (a, n.name)]
            if not hits:
                raise OnnxImportError(f"--ipu-split: {self.lm.path} has no node named '{nm}' (e.g. "
                                      f"{', '.join(names[:3])})")
            pos.append(hits[0])
        if pos != sorted(pos) or len(set(pos)) != len(pos):
            raise OnnxImportError("--ipu-split: the nodes must be given in graph order, each once")
        self.ipu_of = np.zeros(len(nodes), dtype=np.int64)
        for p_ in pos:
            self.ipu_of[p_:] += 1
        self.weight_bytes_per_ipu = [int(own[self.ipu_of == k].sum()) for k in range(self.ipus)]

    def run(self, progress=None):
        if self.outliner is not None:
            self.outliner.run(progress)
        else:
            self.lower_range(0, len(self.graph.node), progress)
        if self.quantized:
            from .quantized import finish_notes

            finish_notes(self)
        return {o: self.vals[o] for o in self.lm.outputs}

    def lower_range(self, start, stop, progress=None):
        nodes = self.graph.node
        n = len(nodes)
        for i in range(start, stop):
            node = nodes[i]
            self._cur_block = int(self.block_of[i])
            if progress and i % 50 == 0:
                progress(i / max(1, n))
            if i in self.skip:
                continue
            with self.be.on_ipu(int(self.ipu_of[i])):
                try:
                    if i in self.fused:
                        lower_fused(self, i, node, self.fused[i])
                    else:
                        self._lower(i, node)
                except (ValueError, IndexError, KeyError, TypeError, AttributeError) as e:
                    # a malformed node (attributes / shapes the op cannot have): name it, no traceback
                    raise OnnxImportError(f"{self.lm.path}: node '{self.node_name(i, node)}' ({node.op_type}) cannot "
                                          f"be lowered: {type(e).__name__}: {e}") from None
        self._cur_block = -1

    def _fold(self, i, node, ins):
        feeds = {nm: np.asarray(v) for nm, v in zip(node.input, ins, strict=False) if nm}
        try:
            res = evaluate_node(node, feeds, self.opset)
        except Exception as e:
            raise OnnxImportError(f"{self.lm.path}: node '{self.node_name(i, node)}' ({node.op_type}) could not be "
                                  f"evaluated on its constant inputs: {e}; neither ONNX's reference implementation "
                                  "nor ONNX Runtime runs it, so the export itself is likely invalid: try the other "
                                  "exporter (torch.onnx.export dynamo=True / False)") from None
        for o, r in zip(node.output, res, strict=False):
            if o:
                self.vals[o] = np.asarray(r)

    def _lower(self, i, node):
        op = node.op_type
        name = self.node_name(i, node)
        default_domain = node.domain in ("", "ai.onnx") or (node.domain == "com.microsoft" and op in CONTRIB_OPS)
        if op == "Constant" and default_domain:
            return self._fold(i, node, [])
        ins = []
        for x in node.input:
            if not x:
                ins.append(None)
                continue
            if x not in self.vals:
                raise OnnxImportError(f"{self.lm.path}: node '{name}' reads '{x}', which no "
                                      "node, input or initializer defines")
            ins.append(self.vals[x])
        acts = [v for v in ins if isinstance(v, Act)]
        if op in ("Shape", "Size") and acts and default_domain:
            shape = acts[0].shape
            a = attrs(node)
            if op == "Size":
                self.vals[node.output[0]] = np.asarray(int(np.prod(shape)), np.int64)
            else:
                self.vals[node.output[0]] = np.asarray(shape[a.get("start", 0):a.get("end", len(shape))], np.int64)
            return None
        if default_domain and op in SEEDED_OPS:  # never evaluated by a random draw, folded or not
            return lower_seeded(self, i, node, ins, name)
        has_param = any(x in self.params for x in node.input if x)
        device = default_domain and op in LOWERINGS
        if not acts and default_domain and not (op == "Gather" and has_param) and (
                not has_param or op in PARAM_FOLDABLE or not self.training or not device or i in self.must_fold):
            # every input known when the graph is built: evaluate the node now.  A weight folded through a
            # rearrangement (or, in inference, any op) stays a weight (it is held in tile memory as one); in
            # training, what another op computes of weights is a constant, not trained (_weights_to_fold).
            self._fold(i, node, ins)
            if op in ("QuantizeLinear", "DequantizeLinear") and not self.quantized:  # a weight dequantized
                from .quantized import _mark

                _mark(self)
            if has_param:
                trained = not self.training or op in PARAM_FOLDABLE
                if not trained:
                    self.notes.append(f"node '{name}': {op} of weights evaluated when the graph is built; the "
                                      "result is not trained")
                for o in node.output:
                    v = self.vals.get(o)
                    if trained and v is not None and np.issubdtype(np.asarray(v).dtype, np.floating) and \
                            np.size(v) > 1:
                        self.params.add(o)
            return None
        if not device:
            dom = f" (domain '{node.domain}')" if not default_domain else ""
            raise OnnxImportError(
                f"{self.lm.path}: node '{name}': op type '{op}'{dom} is not supported on values computed on the "
                f"device (any node whose inputs are all constants is evaluated when the graph is built); supported: "
                f"{', '.join(DEVICE_OPS)}; instead: {INSTEAD.get(op, INSTEAD[''])}")
        unknown = sorted({a.name for a in node.attribute} - LOWERINGS[op].attrs)
        if unknown:
            raise OnnxImportError(f"{self.lm.path}: node '{name}': attribute{'s' if len(unknown) > 1 else ''} "
                                  f"{', '.join(unknown)} of {op} cannot be honoured by the emulator's op library "
                                  f"(honoured: {', '.join(sorted(LOWERINGS[op].attrs)) or 'none'})")
        self.op_count += 1
        if self.training and not LOWERINGS[op].trainable and (
                any(isinstance(v, Act) and id(v) in self.rg for v in ins) or any(x in self.params for x in node.input)):
            self.no_backward(f"op type '{op}'", name)
        if self.training and not acts and op != "Gather" and ins and isinstance(ins[0], np.ndarray) and \
                np.issubdtype(ins[0].dtype, np.floating):
            ins[0] = self.act(node.input[0])  # training: an op on weights alone runs on the device (they train)
        LOWERINGS[op].fn(self, i, node, ins, name)
        return None
