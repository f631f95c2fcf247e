"""Every codelet cycle formula and constant lives once, in ``emulator/estimators`` (AST scan of the
package source), and the estimators agree with the poplibs tables they cite."""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

import popvision_lite
from popvision_lite.emulator.estimators import popops

PKG = pathlib.Path(popvision_lite.__file__).parent
EST = PKG / "emulator" / "estimators"
# PlanTarget's defaults mirror device-spec fields (resources/devices/*.toml is their source), not
# codelet estimates.
SPEC_DEFAULTS = {("emulator/ops/planners.py", "memcpy_bytes_per_cycle"), ("emulator/ops/planners.py", "sync_cycles"),
                 ("emulator/ops/planners.py", "launch_cycles")}
# Arguments named *cycle* in testing/ are the synthetic profiles' made-up device spec, not codelet
# estimates.
# class attributes of a codelet that are vertex behaviour, not cost
VERTEX_ATTRS = {"code_bytes", "state_bytes", "flops_per_element"}


def _numeric(node) -> bool:
    """A number, or an expression / tuple / list / dict / dict(...) call made only of numbers (and strings)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp):
        return _numeric(node.operand)
    if isinstance(node, ast.BinOp):
        return _numeric(node.left) and _numeric(node.right)
    if isinstance(node, ast.Tuple | ast.List):
        return any(_numeric(e) for e in node.elts) and all(_numeric(e) or isinstance(e, ast.Constant)
                                                             for e in node.elts)
    if isinstance(node, ast.Dict):
        return bool(node.values) and all(_numeric(v) for v in node.values)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        return bool(node.keywords) and all(_numeric(k.value) or isinstance(k.value, ast.Constant)
                                           for k in node.keywords)
    return False


def _bindings(nodes):
    """(name, value node, line) of every assignment (module, class or function level) among ``nodes``."""
    for node in nodes:
        if isinstance(node, ast.Assign):
            for t in node.targets:
                name = getattr(t, "id", None) or getattr(t, "attr", None)
                if name:
                    yield name, node.value, node.lineno
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            name = getattr(node.target, "id", None) or getattr(node.target, "attr", None)
            if name:
                yield name, node.value, node.lineno


def estimator_names(sources: dict[str, str]) -> set[str]:
    """Public functions and UPPER-case constants defined at module level by the estimator modules."""
    names = set()
    for src in sources.values():
        for node in ast.parse(src).body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name) and t.id.isupper()}
    return names


def _could_violate(src: str, estimators: set[str]) -> bool:
    """Whether ``src`` can hold a violation at all: every check below names either a word with "cycle" in it (a
    binding, an argument, a codelet's ``cycles`` method) or an estimator's name, so a source with neither can be
    skipped unparsed (half the package's bytes; parsing is most of the scan's CPU)."""
    return "cycle" in src.lower() or not estimators.isdisjoint(re.findall(r"\w+", src))


def violations(sources: dict[str, str], estimators: set[str]) -> list[str]:
    """Cycle formulas or constants outside the estimators in ``sources`` ({relative path: text})."""
    out = []
    for path, src in sources.items():
        if not _could_violate(src, estimators):
            continue
        nodes = list(ast.walk(ast.parse(src)))  # one walk of the tree serves every check
        for node in nodes:
            if isinstance(node, ast.FunctionDef) and node.name in estimators:
                out.append(f"{path}:{node.lineno}: estimator function {node.name} defined again")
        for name, value, line in _bindings(nodes):
            if name in estimators:
                out.append(f"{path}:{line}: estimator constant {name} defined again")
            elif "cycle" in name.lower() and _numeric(value) and (path, name) not in SPEC_DEFAULTS:
                out.append(f"{path}:{line}: cycle figure {name} outside the estimators")
        for node in nodes:  # cycle figures passed as arguments or argument defaults
            pairs = []
            if isinstance(node, ast.Call):
                pairs = [(k.arg, k.value) for k in node.keywords if k.arg]
            elif isinstance(node, ast.FunctionDef):
                args = node.args.posonlyargs + node.args.args
                pairs = list(zip([a.arg for a in args[len(args) - len(node.args.defaults):]], node.args.defaults,
                                 strict=True))
                pairs += [(a.arg, d) for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True) if d]
            for name, value in pairs:
                zero = isinstance(value, ast.Constant) and value.value == 0  # a count of nothing, not a figure
                if "cycle" in name.lower() and _numeric(value) and not zero and not path.startswith("testing/"):
                    out.append(f"{path}:{node.lineno}: cycle figure {name}={ast.unparse(value)} outside the estimators")
        for cls in (n for n in nodes if isinstance(n, ast.ClassDef)):
            methods = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
            if "cycles" not in methods:
                continue
            for st in cls.body:
                if isinstance(st, ast.Assign) and _numeric(st.value):
                    names = {getattr(t, "id", None) for t in st.targets} - VERTEX_ATTRS
                    if names:
                        out.append(f"{path}:{st.lineno}: codelet {cls.name} holds cost constant(s) {sorted(names)}")
            for node in ast.walk(methods["cycles"]):
                if _numeric(node) and isinstance(node, ast.Constant) and node.value not in (0, 1):
                    out.append(f"{path}:{node.lineno}: codelet {cls.name}.cycles has the literal {node.value}")
    return out


def _package_sources(exclude_estimators: bool) -> dict[str, str]:
    res = {}
    for p in sorted(PKG.rglob("*.py")):
        inside = EST in p.parents
        if inside != (not exclude_estimators):
            continue
        res[p.relative_to(PKG).as_posix()] = p.read_text()
    return res


def test_no_cycle_formula_or_constant_outside_the_estimators():
    est = estimator_names(_package_sources(exclude_estimators=False))
    assert {"BINARY_OP_INFO", "UNARY_OP_INFO", "VECTOR_OPS", "binary_op_worker_cycles",
            "amp_matmul_tile_cycles", "nonlinearity_worker_cycles", "pooling_cycles"} <= est
    assert violations(_package_sources(exclude_estimators=True), est) == []


@pytest.mark.parametrize("planted", [
    # the ONNX importer's old second table of the same popops figures
    'POPOPS_CYCLES = {"max": (4, 4), "min": (4, 4)}\n',
    # an estimator constant typed again
    "UNARY_OP_INFO = {}\n",
    # a formula copied into another module
    "def binary_op_loop_cycles(op, itemsize, n):\n    return n\n",
    # a codelet carrying its own cost figures
    "class Pool:\n    per_vector = 3\n    code_bytes = 64\n    def cycles(self, group, target):\n"
    "        return 14 + self.per_vector\n",
    # a figure handed to a codelet, or a default one
    'EXP = unary("Exp", fn, cycles_per_vector=8)\n',
    "def unary(name, fn, cycles_per_vector=2):\n    pass\n",
])
def test_the_scan_finds_a_planted_duplicate(planted):
    est = estimator_names(_package_sources(exclude_estimators=False))
    assert violations({"emulator/planted.py": planted}, est)


def test_onnx_vector_figures_come_from_the_poplibs_tables():
    # popopsCycleEstimators.hpp binaryOpPerfInfo {MAXIMUM, FLOAT} {3, false, 2}: 3 cycles per 2 floats
    # (= one 64-bit vector), {MAXIMUM, HALF} {4, false, 4}; MINIMUM the same
    for kind in ("max", "min", "max_scalar", "min_scalar"):
        assert popops.vector_cycles(kind, 4) == 3
        assert popops.vector_cycles(kind, 2) == 4
    # {GREATER_THAN, FLOAT} {14, false, 4}: 14 cycles per 4 floats = 7 per 2-float vector
    assert popops.vector_cycles("gt_scalar", 4) == 7
    # {POWER, HALF} {325, false, 1}: per element, 4 halves per vector
    assert popops.vector_cycles("pow", 2) == 4 * 325
    # SUBTRACT {1, true} with its assembly codelet: 1 + 2 per vector (binaryOpInnerLoopCycles)
    assert popops.vector_cycles("sub", 2) == 3


def test_onnx_max_costs_what_the_bundled_max_loop_costs():
    # the same binaryOpPerfInfo entry drives both: per vector of a fp32 piece, the bundled BinaryOp1D
    # inner loop and the ONNX per-vector figure agree
    n = 2 * 100
    assert int(popops.binary_op_loop_cycles("max", 4, n)) == popops.vector_cycles("max", 4) * 100
