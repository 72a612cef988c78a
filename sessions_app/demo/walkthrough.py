"""The two sessions ``make demo`` plays while its user watches: the published SFO→JFK
negotiation against SkyFare's hosted agent, verified offline from the JWKS, and a session left
to its deadline for the worker's timer to close."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError

from oanp.agents.ids import new_ulid
from oanp.agents.parties import BuyerAgent
from oanp.agents.vaults import BuyerVault
from oanp.audit import verify_log
from oanp.net.client import ArbiterClient
from oanp.net.negotiators import party_signature_rules
from oanp.wire.envelope import format_timestamp
from oanp.wire.log import Entry
from oanp.wire.transcript import describe_entry
from sessions_app.demo.buyers import Stalled, buyer_agent, demo_signer, negotiate

# The timer demo's session ends this long after it opens, with nobody moving.
DEADLINE_SECONDS = 5
#: How long the walkthrough waits for an answer before it blames the worker: the first moves
#: wait for a worker that has just started.
ANSWER_SECONDS = 30
WALKTHROUGH_BUYER = "buyer-demo"
WALKTHROUGH_MERCHANT = "merchant-sfo"
SFO_JFK = {"route": "SFO-JFK", "date": "2026-04-28"}


class Walkthrough:
    """The sessions of :data:`WALKTHROUGH_BUYER` on the arbiter at ``url``, told to ``say``."""

    def __init__(self, url: str, keys: dict[str, str], say: Callable[[str], None]) -> None:
        self.url = url
        self.keys = keys
        self.say = say
        #: The buyer's signing key for every session of this run (docs/protocol.md §17).
        self.signer = demo_signer()

    def _buyer(self) -> tuple[BuyerAgent, ArbiterClient]:
        """The published example's buyer (ceiling 420, budget 400), in this process."""
        vault = BuyerVault(true_ceiling=Decimal(420), budget_cap=Decimal(400), urgency="medium")
        client = ArbiterClient(self.url, self.keys[WALKTHROUGH_BUYER], signing_key=self.signer)
        return buyer_agent(WALKTHROUGH_BUYER, vault, "reference"), client

    def _show(self, entry: dict[str, Any]) -> None:
        self.say(describe_entry(Entry(**entry)))

    def negotiate(self) -> None:
        """The buyer negotiates over HTTP; the hosted merchant answers through the worker."""
        buyer, client = self._buyer()
        session_id = new_ulid()
        self.say(
            f"Live demo: session {session_id}, {buyer.agent_id} (here, over HTTP) and "
            f"{WALKTHROUGH_MERCHANT} (hosted: SkyFare's agent, answered by the worker)"
        )
        self.say("Each side's private limit stays on its own side.\n")
        opening = buyer.open(
            session_id=session_id,
            merchant_agent_id=WALKTHROUGH_MERCHANT,
            item=SFO_JFK,
            currency="USD",
            max_rounds=5,
            now=datetime.now(UTC),
        )
        with client:
            log = self._drive(client, buyer, opening)
            jwks = client.jwks()
            signatures = party_signature_rules(client, log)
        outcome = log[-1]["envelope"]["payload"]
        if log[-1]["envelope"]["type"] == "session.agree":
            rounds = sum(e["envelope"]["type"] == "round.verdict" for e in log)
            self.say(
                f"\nSettled at {outcome['final_price']} {outcome['currency']} in {rounds} rounds."
            )
        report = verify_log(log, jwks, signatures=signatures)
        self.say(f"Verified offline from the JWKS and the parties' keys: {report.summary()}")
        self.say(
            f"Watch it on the dashboard: {self.url}/sessions/{session_id}/\n"
            "\nTry it yourself (this run's buyer key, shown once):\n"
            f"  curl -H 'Authorization: Bearer {self.keys[WALKTHROUGH_BUYER]}' "
            f"{self.url}/oanp/v0.1/sessions/{session_id}/log > log.json\n"
            f"  curl {self.url}/.well-known/jwks.json > jwks.json\n"
            "  oanp verify log.json --jwks jwks.json"
        )

    def _drive(
        self,
        client: ArbiterClient,
        buyer: BuyerAgent,
        opening: dict[str, Any],
        *,
        moves: int | None = None,
        patience: float = ANSWER_SECONDS,
    ) -> list[dict[str, Any]]:
        client.register_signing_key()  # 200 once registered: each session may be the first
        try:
            return negotiate(
                client,
                buyer,
                opening,
                stop=threading.Event(),
                moves=moves,
                on_entry=self._show,
                patience=patience,
            )
        except Stalled as stalled:
            worker_log = settings.VAR_DIR / "demo-worker.log"
            raise CommandError(f"{stalled}; is the worker answering? See {worker_log}") from None

    def time_out(self) -> None:
        """A session with a deadline a few seconds away, then silence: the worker's timer
        closes it, with nobody calling the server."""
        buyer, client = self._buyer()
        session_id = new_ulid()
        deadline = datetime.now(UTC) + timedelta(seconds=DEADLINE_SECONDS)
        self.say(
            f"\nTimers: session {session_id} must end by {format_timestamp(deadline)}; "
            "the hosted merchant acknowledges, then the buyer goes quiet."
        )
        opening = buyer.open(
            session_id=session_id,
            merchant_agent_id=WALKTHROUGH_MERCHANT,
            item=SFO_JFK,
            currency="USD",
            max_rounds=5,
            now=datetime.now(UTC),
            deadline=deadline,
        )
        # The task fires at the deadline; the sweep would catch it within one period anyway.
        patience = DEADLINE_SECONDS + settings.OANP_TIMER_SWEEP_SECONDS + ANSWER_SECONDS
        with client:
            log = self._drive(client, buyer, opening, moves=1, patience=patience)
        close = log[-1]
        late = datetime.fromisoformat(close["received_at"]) - deadline
        self.say(
            f"closed: {close['envelope']['payload'].get('reason')} at {close['received_at']}, "
            f"{late.total_seconds():.2f} s after the deadline, by the worker's timer"
        )
