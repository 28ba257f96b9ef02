"""No module holds more than 400 lines of logic, no function more than 60 (issue 41).

A line of logic holds code: docstrings, comments and blank lines do not count, so a
module explains itself without paying for it. A table (one row per tool) is exempt,
and only the table: ``TABLES`` names the module and the assignment that is its table,
and the rest of the module counts as any module does.

Covers: (every source module's size; no behaviour).
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import fractal_nb

PACKAGE = Path(fractal_nb.__file__).parent
MODULE_LINES = 400
FUNCTION_LINES = 60
TABLES = {"mcp/tools.py": "TOOLS"}
"""Modules that hold a table, and the name it is assigned to: its lines are exempt from ``MODULE_LINES``."""
SKIPPED = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENDMARKER,
}


def docstring_lines(tree: ast.Module) -> set[int]:
    """The lines of every docstring in a module (its own, its classes', its functions')."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                if isinstance(first.value.value, str):
                    lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return lines


def logic_lines(source: str) -> tuple[set[int], ast.Module]:
    """The lines of ``source`` that hold code, and its tree."""
    tree = ast.parse(source)
    code: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in SKIPPED:
            code.update(range(token.start[0], token.end[0] + 1))
    return code - docstring_lines(tree), tree


def table_lines(tree: ast.Module, name: str) -> set[int]:
    """The lines of the module-level assignments to ``name`` (a table, rows added too); there must be one."""
    lines: set[int] = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    assert lines, f"no table {name} at the module's top level: update TABLES"
    return lines


def test_a_line_of_logic_holds_code_not_a_docstring_a_comment_or_a_blank() -> None:
    source = 'def f():\n    """Doc.\n\n    More."""\n\n    # a note\n    return (1,\n            2)  # kept\n'
    assert sorted(logic_lines(source)[0]) == [1, 7, 8]


def test_no_module_holds_more_than_400_lines_of_logic() -> None:
    big = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        code, tree = logic_lines(path.read_text(encoding="utf-8"))
        if name in TABLES:
            code -= table_lines(tree, TABLES[name])
        if len(code) > MODULE_LINES:
            big[name] = len(code)
    assert not big, f"modules over {MODULE_LINES} lines of logic (split each by its jobs): {big}"


def test_no_function_holds_more_than_60_lines_of_logic() -> None:
    long = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        code, tree = logic_lines(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                span = set(range(node.lineno, (node.end_lineno or node.lineno) + 1))
                if len(span & code) > FUNCTION_LINES:
                    long[f"{path.relative_to(PACKAGE).as_posix()}:{node.name}"] = len(span & code)
    assert not long, f"functions over {FUNCTION_LINES} lines of logic: {long}"
