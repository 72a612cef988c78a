"""Whose address a request comes from, behind ``$OANP_PROXY_HEADERS`` proxies.

Each proxy in front of the server appends the address it received the request from to
``X-Forwarded-For``; whatever a client put there itself stays on the left. So only the right-most
entries were written by proxies of the deployment, and with ``N`` of them the client is the
``N``-th address from the right: the one the outermost proxy saw. Everything to its left is the
client's to make up (``X-Forwarded-For: 127.0.0.1`` must open neither ``/metrics`` nor a fresh
budget of failed authentications).

- ``0`` (the default; also ``off``, ``false``, ``no``): the header is ignored, the client is the
  TCP peer.
- ``N``: the ``N``-th entry from the right. The older spellings ``1``, ``true``, ``yes`` and
  ``on`` mean one proxy.
- Fewer than ``N`` entries: the request skipped the outer proxies (it reached an inner one
  directly), so every entry was written by a proxy and the left-most is the address the first
  of them saw. That is only safe when the outer proxies cannot be skipped; in front of an inner
  proxy that anyone can reach, a client could write the entries the skipped ones would have.
- No header, or an entry that is no address (``unknown``): the TCP peer, that is the nearest
  proxy. Clients then share its budget, which is stricter, never looser.

:class:`ForwardedFor` applies this to every HTTP request and WebSocket of the ASGI application,
before anything reads ``scope["client"]`` (Django's ``REMOTE_ADDR``): the per-address limits,
the metrics allow-list and the request log all see the same address. Daphne's own
``--proxy-headers`` is not used, since it believes the left-most entry.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

Scope = dict[str, Any]

_OFF = frozenset({"", "0", "off", "false", "no"})
_ONE = frozenset({"true", "yes", "on"})


def proxy_hops(value: str | None) -> int:
    """How many proxies ``$OANP_PROXY_HEADERS`` says stand in front of the server."""
    spelled = (value or "").strip().lower()
    if spelled in _OFF:
        return 0
    if spelled in _ONE:
        return 1
    if spelled.isdigit():
        return int(spelled)
    raise ValueError(
        "OANP_PROXY_HEADERS must be the number of proxies in front of the server "
        f"(0 for none; true means 1), not {value!r}"
    )


def _address(entry: str) -> str | None:
    """The address an entry names, port or brackets removed; ``None`` for anything else."""
    for candidate in (entry, entry.strip("[]"), entry.rpartition(":")[0].strip("[]")):
        try:
            return str(ipaddress.ip_address(candidate))
        except ValueError:
            continue
    return None


def client_address(forwarded_for: Iterable[str], peer: str | None, hops: int) -> str | None:
    """The client's address: from the ``X-Forwarded-For`` values (every such header, in order)
    trusting ``hops`` proxies, else ``peer``."""
    if hops <= 0:
        return peer
    entries = [e.strip() for value in forwarded_for for e in value.split(",") if e.strip()]
    if not entries:
        return peer
    return _address(entries[max(len(entries) - hops, 0)]) or peer


def _scheme(proto: list[str], kind: str) -> str | None:
    # The nearest proxy's word, as Daphne's --proxy-headers took it.
    entries = [e.strip().lower() for value in proto for e in value.split(",") if e.strip()]
    if not entries or entries[-1] not in ("http", "https"):
        return None
    secure = entries[-1] == "https"
    if kind == "websocket":
        return "wss" if secure else "ws"
    return "https" if secure else "http"


class ForwardedFor:
    """ASGI middleware: ``scope["client"]`` (and ``scope["scheme"]``, from the nearest proxy's
    ``X-Forwarded-Proto``) as the proxies in front of the server say, trusting ``hops``."""

    def __init__(self, app: Any, *, hops: int) -> None:
        self.app = app
        self.hops = hops

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> Any:
        if self.hops and scope["type"] in ("http", "websocket"):
            scope = self.rewrite(scope)
        return await self.app(scope, receive, send)

    def rewrite(self, scope: Scope) -> Scope:
        forwarded, proto = [], []
        for name, value in scope.get("headers", ()):
            if name == b"x-forwarded-for":
                forwarded.append(value.decode("latin-1"))
            elif name == b"x-forwarded-proto":
                proto.append(value.decode("latin-1"))
        changed = dict(scope)
        peer = scope.get("client")
        address = client_address(forwarded, peer[0] if peer else None, self.hops)
        if address is not None and (not peer or address != peer[0]):
            changed["client"] = (address, 0)
        scheme = _scheme(proto, scope["type"])
        if scheme is not None:
            changed["scheme"] = scheme
        return changed
