"""Whether an address stays on this machine: servers bind there by default, local models get one slot."""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback"]


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the server on this machine.

    Parameters
    ----------
    host : str
        A bind address or name: ``127.0.0.1`` (any of 127.0.0.0/8), ``::1``
        (bracketed or not) or ``localhost`` are loopback; anything else,
        ``0.0.0.0`` and other names included, is not.

    Returns
    -------
    bool
        True for a loopback address or ``localhost``.
    """
    name = host.strip().lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False
