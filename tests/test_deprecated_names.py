"""Names that moved keep working for one release, with a DeprecationWarning."""

from __future__ import annotations

import importlib
import sys

import pytest

from fractal_nb.remote import RemoteStore, work_remotely


def test_the_old_remote_names_warn_and_still_work() -> None:
    sys.modules.pop("fractal_nb.remote_store", None)
    with pytest.warns(DeprecationWarning, match="import RemoteStore from fractal_nb.remote"):
        old = importlib.import_module("fractal_nb.remote_store")
    assert old.RemoteStore is RemoteStore
    module = importlib.import_module("fractal_nb.engine.remote")
    with pytest.warns(DeprecationWarning, match="import work_remotely from fractal_nb.remote"):
        assert module.work_remotely is work_remotely
