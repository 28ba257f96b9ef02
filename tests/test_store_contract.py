"""The store's contract is written once (store/contract.py): the stores implement it member for member.

``Store`` holds each member's signature and docstring; ``GraphStore`` overrides every
one with the same signature and no docstring of its own, and ``RemoteStore`` does
the same for ``WorkerStore``, its methods made from the tool table.

Covers: store/graph_store.py.
"""

from __future__ import annotations

import inspect

import pytest

from fractal_nb.mcp.remote import RemoteStore
from fractal_nb.mcp.tools import TOOLS
from fractal_nb.store import GraphStore, Store, WorkerStore


def members(protocol: type) -> list[str]:
    """The protocol's own and inherited members: methods, properties and attributes."""
    names: set[str] = set()
    for cls in protocol.__mro__:
        if cls in (Store, WorkerStore):
            names |= set(cls.__annotations__)
            names |= {n for n in vars(cls) if not n.startswith("_") or n in ("__enter__", "__exit__")}
    return sorted(names)


ATTRIBUTES = set(Store.__annotations__) | set(WorkerStore.__annotations__)  # holder, lease_s, clock


def methods(protocol: type) -> list[str]:
    """Its methods and properties: what a store defines in its class."""
    return [n for n in members(protocol) if n not in ATTRIBUTES]


def signature(cls: type, name: str) -> inspect.Signature:
    member = inspect.getattr_static(cls, name)
    function = member.fget if isinstance(member, property) else getattr(cls, name)
    return inspect.signature(function, eval_str=True)


def test_the_contract_names_every_member_of_graph_store() -> None:
    public = {n for n in vars(GraphStore) if not n.startswith("_") or n in ("__enter__", "__exit__")}
    assert ATTRIBUTES == {"holder", "lease_s", "clock"}
    assert public | ATTRIBUTES == set(members(Store))
    assert set(members(WorkerStore)) < set(members(Store))
    with GraphStore() as store:  # the attributes are set in __init__
        for name in ATTRIBUTES:
            assert hasattr(store, name), name


@pytest.mark.parametrize("name", methods(Store))
def test_graph_store_overrides_each_member_with_its_signature_and_docstring(name: str) -> None:
    assert name in vars(GraphStore), f"GraphStore.{name} falls back to the protocol's empty body"
    assert signature(GraphStore, name) == signature(Store, name)
    mine = inspect.getattr_static(GraphStore, name)
    function = mine.fget if isinstance(mine, property) else mine
    assert getattr(function, "__override__", False), f"GraphStore.{name} is not marked @override"
    assert function.__doc__ is None, f"GraphStore.{name} repeats its docstring: it lives in Store"
    assert inspect.getdoc(getattr(GraphStore, name)) == inspect.getdoc(getattr(Store, name))
    assert inspect.getdoc(getattr(GraphStore, name)), name


def test_each_delegate_s_step_takes_the_contract_s_parameters_and_defaults() -> None:
    # A one-line delegate (graph_store.delegate) passes the arguments on as given: the step's own
    # defaults apply, so they must be the contract's (mypy checks names, kinds and types, not values),
    # and a parameter the contract lacks would be a way in the contract does not offer.
    delegated = 0
    with GraphStore() as store:
        for name in methods(Store):
            member = inspect.getattr_static(GraphStore, name)
            step = getattr(member, "step", None)
            if step is None:
                continue  # written out in GraphStore
            delegated += 1
            contract = list(inspect.signature(getattr(Store, name)).parameters.values())[1:]
            taken = list(inspect.signature(step(store)).parameters.values())
            # Exactly the contract's: a parameter of the step's own would reach it by keyword.
            assert [(p.name, p.kind, p.default) for p in taken] == [
                (p.name, p.kind, p.default) for p in contract
            ], name
    assert delegated > 50


@pytest.mark.parametrize("name", methods(WorkerStore))
def test_remote_store_has_each_worker_method_with_its_signature(name: str) -> None:
    assert name in vars(RemoteStore), f"RemoteStore.{name} falls back to the protocol's empty body"
    assert inspect.signature(getattr(RemoteStore, name)) == inspect.signature(getattr(WorkerStore, name))


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.name)
def test_each_tool_is_a_store_method_remote_store_offers_with_its_signature(tool) -> None:  # type: ignore[no-untyped-def]
    assert tool.method in methods(Store), tool.method
    assert inspect.signature(getattr(RemoteStore, tool.method)) == inspect.signature(
        getattr(Store, tool.method)
    )


def test_a_remote_method_points_to_the_contract() -> None:
    assert RemoteStore.claim_work.__doc__.startswith("See :meth:`Store.claim_work` (the tool ")
