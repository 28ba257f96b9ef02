"""Workers in another process: the engine's worker loop over a graph another process serves by MCP.

``RemoteStore`` speaks the store's methods a worker needs as MCP tool calls;
``work_remotely`` runs the dispatcher's workers on it (``fractal-nb worker``).
"""

from .store import RemoteStore
from .worker import only_active_graph, work_remotely

__all__ = ["RemoteStore", "only_active_graph", "work_remotely"]
