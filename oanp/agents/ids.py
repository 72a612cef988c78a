"""Fresh identifiers for the edges that mint them: session and message ids as ULIDs.

The pure core never calls this: agents are handed ``new_message_id`` and the machine takes
the ids it is fed. The command line, the MCP server and the demo pass :func:`new_ulid` in.
"""

from __future__ import annotations

import secrets
import time

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_ulid() -> str:
    """A ULID: 48 bits of milliseconds, 80 random bits, Crockford base32."""
    value = (int(time.time() * 1000) << 80) | secrets.randbits(80)
    return "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))
