"""Every source module is named by a test module: its own test_<stem>.py, or a docstring's Covers: line.

Issue 41: a reader finds, for each module of the package, the tests that cover it. A
module is named when a test module anywhere under tests/ is called ``test_<stem>.py``,
or when its path relative to fractal_nb/ appears in a test module's docstring, as each
one's closing ``Covers:`` line lists them (this docstring names none on purpose).
"""

from __future__ import annotations

import ast
from pathlib import Path

import fractal_nb

PACKAGE = Path(fractal_nb.__file__).parent
TESTS = Path(__file__).parent


def named(source: Path, stems: set[str], docstrings: list[str]) -> bool:
    """Whether a test module is called after ``source`` or names its path in its docstring."""
    relative = source.relative_to(PACKAGE).as_posix()
    return f"test_{source.stem}" in stems or any(relative in doc for doc in docstrings)


def test_every_source_module_is_named_by_a_test_module() -> None:
    test_modules = sorted(TESTS.rglob("test_*.py"))
    stems = {path.stem for path in test_modules}
    docstrings = [
        ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or "" for path in test_modules
    ]
    unnamed = [
        source.relative_to(PACKAGE).as_posix()
        for source in sorted(PACKAGE.rglob("*.py"))
        if source.name != "__init__.py" and not named(source, stems, docstrings)
    ]
    assert not unnamed, (
        "no test module names these source modules; add each path to the Covers: line of the "
        "docstring of the test module(s) that exercise it:\n" + "\n".join(unnamed)
    )
