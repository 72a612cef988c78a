"""The counters whose label values are known before anything happens, listed at zero from the
start (:func:`start_at_zero`, called when the app is ready, in every server, worker and beat
process).

A fresh server's ``/metrics`` then already shows ``oanp_deliveries_total`` with every kind and
outcome at 0, so the first rejected delivery after a start is an increase an alert can see.
Labels that depend on traffic (a request's route and status, a task's name) are left to appear
when they are first counted.
"""

from __future__ import annotations

from arbiter_app import metrics
from arbiter_app.deliveries.outbound import AttemptOutcome
from arbiter_app.delivery_history import KINDS as DELIVERY_KINDS
from arbiter_app.refusals import REFUSALS as SERVER_REFUSALS
from oanp.wire.envelope import SENDERS, Role
from oanp.wire.errors import REFUSALS as PROTOCOL_REFUSALS
from oanp.wire.profiles import VerdictStatus

#: What the services count of a party's envelope (arbiter_app.services.sessions).
ENVELOPE_OUTCOMES = ("accepted", "replayed", "refused")


def party_types() -> list[str]:
    """The envelope types a buyer or a merchant may send: the only ones a party's request
    counts (the arbiter's own are written, never received)."""
    return [kind.value for kind, senders in SENDERS.items() if senders - {Role.ARBITER}]


def refusal_codes() -> list[str]:
    """Every problem code an HTTP answer may carry: the protocol's and the server's."""
    return sorted({r.code for r in (*PROTOCOL_REFUSALS, *SERVER_REFUSALS)})


def start_at_zero() -> None:
    metrics.at_zero(metrics.ENVELOPES, type=party_types(), outcome=ENVELOPE_OUTCOMES)
    metrics.at_zero(metrics.REFUSALS, code=refusal_codes())
    metrics.at_zero(metrics.VERDICTS, status=[s.value for s in VerdictStatus])
    metrics.at_zero(
        metrics.DELIVERIES, kind=DELIVERY_KINDS, outcome=[o.value for o in AttemptOutcome]
    )
