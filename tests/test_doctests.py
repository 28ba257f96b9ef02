"""Every docstring example in fractal_nb runs, as the README promises (STYLE: examples are doctests)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import warnings

import pytest

import fractal_nb

MODULES = sorted(m.name for m in pkgutil.walk_packages(fractal_nb.__path__, "fractal_nb.") if not m.ispkg)


@pytest.mark.parametrize("name", MODULES)
def test_the_examples_in_the_docstrings_run(name: str) -> None:
    with warnings.catch_warnings():  # a deprecated module's warning is its own test's business
        warnings.simplefilter("ignore", DeprecationWarning)
        module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
