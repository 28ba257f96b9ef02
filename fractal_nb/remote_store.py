"""Deprecated: ``RemoteStore`` lives in :mod:`fractal_nb.remote` (kept for one release)."""

import warnings

from .remote.store import RemoteStore

warnings.warn(
    "fractal_nb.remote_store is deprecated; import RemoteStore from fractal_nb.remote",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["RemoteStore"]
