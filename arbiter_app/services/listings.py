"""The directory of merchant agents (docs/protocol.md §14.10): what each owner lists.

The arbiter publishes the directory, so it keeps the listings, as it keeps handoff targets;
the dashboard writes them through here, the way an agent's owner would through any client.
"""

from __future__ import annotations

from arbiter_app.models import Listing
from oanp.wire import discovery
from oanp.wire.canonical import canonical_bytes
from oanp.wire.envelope import IDENTIFIER_RULE, is_identifier

#: As long as a merchant's registered name may be.
MAX_MERCHANT_CHARS = Listing._meta.get_field("merchant").max_length


def save_listing(*, merchant_agent_id: str, merchant: str, listing: discovery.Listing) -> Listing:
    """List, unlist or change ``merchant_agent_id``'s entry (one row per agent, replaced);
    ``ValueError`` for a bad agent id or merchant name. ``listing`` was checked by
    :func:`oanp.wire.discovery.parse_listing`."""
    if not is_identifier(merchant_agent_id):
        raise ValueError(f"agent id {merchant_agent_id!r} is not {IDENTIFIER_RULE}")
    if not merchant or len(merchant) > MAX_MERCHANT_CHARS:
        raise ValueError(f"a merchant's name is 1 to {MAX_MERCHANT_CHARS} characters")
    row, _ = Listing.objects.update_or_create(
        merchant_agent_id=merchant_agent_id,
        defaults={
            "merchant": merchant,
            "listed": listing.listed,
            "description": listing.description,
            "currencies": list(listing.currencies),
            "catalog": canonical_bytes(list(listing.catalog)).decode(),
            "catalog_text": discovery.catalog_text(listing.catalog),
        },
    )
    return row
