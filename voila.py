"""Voila's configuration for the app when Voila starts here (``voila notebooks/app.ipynb``).

Voila reads ``voila.py`` from the folder it starts in. Its own lab template links
FontAwesome from a CDN; the app's template (binder/jupyter/voila/templates/fractal:
the lab template without those links, following the reader's light or dark
preference) is found on JUPYTER_PATH only, so this puts that folder there and
selects the template, as binder/start does for Binder and a Jupyter server.
notebooks/voila.py loads this file when Voila starts beside the notebooks.
"""

import os
from pathlib import Path

if "load_subconfig" not in globals():  # imported, or run by `python -m voila` here: it shadows Voila
    raise ImportError(
        f"{__file__} is Voila's configuration, not Voila: start Voila with the `voila` command "
        "(`python -m voila` cannot run in this folder)"
    )

APP_JUPYTER = str(Path(__file__).resolve().parent / "binder" / "jupyter")
found = [path for path in os.environ.get("JUPYTER_PATH", "").split(os.pathsep) if path]
os.environ["JUPYTER_PATH"] = os.pathsep.join([APP_JUPYTER, *(path for path in found if path != APP_JUPYTER)])
c.VoilaConfiguration.template = "fractal"  # noqa: F821 - Voila's config loader provides c
