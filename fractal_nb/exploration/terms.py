"""What the faces show, in the store's own terms, through the facade (docs/architecture.md, "Layers").

A question item's view statuses and marks (store/question_items.py), a turn's
bounds (store/turn_requests.py) and a chain level's state (store/chain.py): the views
and the shell take them from here, never from the store's modules.
"""

from __future__ import annotations

from ..store.chain import KEY as CHAIN_KEY
from ..store.chain import level_state
from ..store.question_items import FAILED, JOINED, PRUNED, TEXT_CHARS, UNSUPPORTED, VIEW_STATUSES
from ..store.turn_requests import MAX_LEVELS, MAX_WIDEN

__all__ = [
    "CHAIN_KEY",
    "FAILED",
    "JOINED",
    "MAX_LEVELS",
    "MAX_WIDEN",
    "PRUNED",
    "TEXT_CHARS",
    "UNSUPPORTED",
    "VIEW_STATUSES",
    "level_state",
]
