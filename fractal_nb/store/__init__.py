"""The graph store, on DuckDB or PostgreSQL: the only package of fractal_nb that speaks SQL."""

from .contract import Store, WorkerStore
from .graph_store import GraphStore, copy_graphs, open_store

__all__ = ["GraphStore", "Store", "WorkerStore", "copy_graphs", "open_store"]
