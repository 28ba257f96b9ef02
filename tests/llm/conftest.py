"""Collect garbage after each model test, so a client left unclosed fails the test that left it."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _collect_after() -> Iterator[None]:
    yield
    gc.collect()
