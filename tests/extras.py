"""Tests needing an extra a fresh machine lacks (Chromium, the local model): skipped, or failed under CI."""

from __future__ import annotations

import os


def ci_requires_extras() -> bool:
    """Whether ``CI`` is set (to anything but empty, 0 or false): then a missing extra is a failure."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
