"""The notebook face: the live network widget, its control panel and the HTML export."""

from .control_panel import ExplorationView
from .network_widget import NetworkWidget

__all__ = ["ExplorationView", "NetworkWidget"]
