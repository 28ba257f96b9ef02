"""Deprecated: ``work_remotely`` lives in :mod:`fractal_nb.remote` (this name is kept for one release)."""

from __future__ import annotations

import warnings
from typing import Any


def __getattr__(name: str) -> Any:
    if name == "work_remotely":
        warnings.warn(
            "fractal_nb.engine.remote is deprecated; import work_remotely from fractal_nb.remote",
            DeprecationWarning,
            stacklevel=2,
        )
        from ..remote.worker import work_remotely  # a face: imported when asked for, not at module level

        return work_remotely
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
