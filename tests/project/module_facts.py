"""What the project checks read from a module's source, parsed once a session: its line count, docstring,
top-level imported names and every function's length (tests/project/test_sizes.py, test_layering.py and
module_index.py each parsed the whole package again; a syntax tree is dropped as soon as its facts are read)."""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Facts:
    lines: int
    docstring: str
    imports: frozenset[str]  # top-level names of absolute imports: "PySide6" for "from PySide6.QtCore import X"
    functions: tuple[tuple[str, int], ...]  # (qualified name, lines from its def line to its last)


# Functions, classes and imports are statements, and a statement only sits in these lists of its parent (a module,
# function or class body, a loop's, an ``if``'s, a ``with``'s, a ``try``'s and its handlers', a ``match`` case's):
# the walks below visit statements only, not the expressions in them, which are most of a tree's nodes.
_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")


def _statements(node: ast.AST):
    """The statements directly inside ``node`` (its bodies, and the bodies of its handlers and cases)."""
    for field in _BODIES:
        for child in getattr(node, field, ()):
            if isinstance(child, ast.stmt):
                yield child
            else:  # an except handler or a match case: its own body
                yield from _statements(child)


def functions(tree: ast.AST, prefix: str = ""):
    """(qualified name, lines) of every function and method, nested ones included."""
    for node in _statements(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield prefix + node.name, node.end_lineno - node.lineno + 1
            yield from functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from functions(node, f"{prefix}{node.name}.")
        else:
            yield from functions(node, prefix)


def imports(tree: ast.AST) -> set[str]:
    names = set()
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
        else:
            stack.extend(_statements(node))
    return names


def facts(path: Path) -> Facts:
    """The facts of the file as it is now (a file changed since it was read is read again)."""
    st = Path(path).stat()
    return _facts(str(path), st.st_mtime_ns, st.st_size)


@functools.cache
def _facts(path: str, _mtime_ns: int, _size: int) -> Facts:
    src = Path(path).read_text(encoding="utf-8")
    tree = ast.parse(src, filename=path)
    return Facts(len(src.splitlines()), ast.get_docstring(tree) or "", frozenset(imports(tree)),
                 tuple(functions(tree)))
