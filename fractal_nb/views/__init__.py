"""The notebook face: the live network widget, its control panel, the downloads and the HTML export."""

from .control_panel import ExplorationView
from .downloads import DownloadButtons
from .network_widget import NetworkWidget

__all__ = ["DownloadButtons", "ExplorationView", "NetworkWidget"]
