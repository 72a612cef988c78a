"""Whether a merchant agent takes new sessions: its owner pauses, resumes or archives it.

Kept by the arbiter, which refuses the opens (``merchant_paused``, ``merchant_archived``), so
that a pause stops an external agent's buyers as surely as a hosted one's; the dashboard sets
it through here, as an operator's tool would.
"""

from __future__ import annotations

from arbiter_app.models import Availability, MerchantAvailability
from oanp.wire.envelope import IDENTIFIER_RULE, is_identifier


def set_availability(*, merchant_agent_id: str, state: str) -> MerchantAvailability:
    """Set whether ``merchant_agent_id`` takes new sessions (an :class:`Availability`);
    ``ValueError`` for a bad id or state. Sessions already open are not touched."""
    if not is_identifier(merchant_agent_id):
        raise ValueError(f"agent id {merchant_agent_id!r} is not {IDENTIFIER_RULE}")
    if state not in Availability.values:
        raise ValueError(f"state {state!r} is not one of {', '.join(Availability.values)}")
    row, _ = MerchantAvailability.objects.update_or_create(
        merchant_agent_id=merchant_agent_id, defaults={"state": state}
    )
    return row
