"""Voila's configuration for the app when Voila starts beside the notebooks (``voila app.ipynb``).

The repository's own (../voila.py): the app's template, without a CDN, following the reader's theme.
"""

from pathlib import Path

if "load_subconfig" not in globals():  # imported, or run by `python -m voila` here: it shadows Voila
    raise ImportError(
        f"{__file__} is Voila's configuration, not Voila: start Voila with the `voila` command "
        "(`python -m voila` cannot run in this folder)"
    )

load_subconfig("voila.py", path=str(Path(__file__).resolve().parents[1]))  # noqa: F821 - Voila's loader
