"""The agent form's preview: the agent as the form stands, unsaved, against each reference
buyer, in whole sessions played in-process by :func:`oanp.rehearsal.rehearse`.

Nothing is written and nothing reaches the arbiter: the sessions live in memory, under an
arbiter key made for the request and dropped with it. They take milliseconds, so they run in
the request. The limits are the ones typed in the form, else the sealed ones; they are used
here and never shown, though the prices played tell a good deal about them, which is why only
those who may change the agent may preview it.

The buyers: each strategy of :data:`oanp.strategies.STRATEGIES` at its defaults, with its
ceiling (and budget) halfway between the merchant's floor and ideal price, so a deal is
possible; then a reference buyer whose ceiling is a tenth under the floor, so none is. Sessions
have the protocol's default of five rounds. The buyers open them for settlement by reveal but
never reveal first, so the agent's own settle policy shows, and answer its reveal as every
agent does.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import ROUND_FLOOR, Decimal
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from oanp.agents import BuyerAgent, BuyerVault, MerchantAgent, MerchantVault, SettlePolicy
from oanp.commitments import encode_salt
from oanp.envelope import DEFAULT_MAX_ROUNDS
from oanp.machine import Arbiter
from oanp.money import decimals_of, minor_units
from oanp.rehearsal import rehearse
from oanp.signing import ArbiterKey
from oanp.strategies import STRATEGIES
from sessions_app.analytics import plain
from sessions_app.models import AgentProfile, Mode
from sessions_app.services import NoLimits
from sessions_app.vault import Limits, unseal

MAX_ROUNDS = DEFAULT_MAX_ROUNDS
#: The ceiling of the buyer that cannot meet the floor, as a share of the floor.
UNDER_FLOOR_SHARE = Decimal("0.9")
#: A buyer that opens for settlement and never reveals first: its first round to reveal in
#: comes after the session's last.
OPEN_FOR_SETTLEMENT = SettlePolicy("round", MAX_ROUNDS + 1)
_MERCHANT_ID, _BUYER_ID = "preview-merchant", "preview-buyer"


@dataclass(frozen=True)
class Round:
    """One round's moves, in order, as the table shows them: ``("buyer", "320")``,
    ``("merchant", "accepts")``."""

    number: int
    moves: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class Run:
    buyer: str  # the buyer's strategy, by its registry name
    ceiling: str  # where the buyer's ceiling sits, in words: never a number
    rounds: list[Round]
    agreed: bool
    outcome: str


@dataclass(frozen=True)
class Preview:
    currency: str
    max_rounds: int
    runs: list[Run]
    #: Whether the limits typed in the form were played (they are not kept: limits are never
    #: shown back), rather than the sealed ones.
    typed_limits: bool


def preview_form(
    data: Mapping[str, Any], typed: Limits | None, profile: AgentProfile | None
) -> Preview:
    """The preview of a valid agent form's ``cleaned_data``: with the limits ``typed`` in it,
    else the sealed ones of ``profile``. :class:`~sessions_app.services.NoLimits` if neither."""
    if typed is not None:
        limits = typed
    elif profile is not None and profile.vault:
        limits = unseal(profile.vault)
    else:
        raise NoLimits("The preview plays the agent's limits: enter its floor and ideal price.")
    return play(
        strategy=data["strategy"],
        parameters=data["parameters"],
        settle=data["settle"],
        floor=limits.floor_price,
        ideal=limits.ideal_price,
        typed_limits=typed is not None,
    )


def preview_saved(profile: AgentProfile) -> Preview:
    """The saved agent, as new sessions will meet it; :class:`~sessions_app.services.NoLimits`
    for an agent that is not hosted here or has no limits yet."""
    if profile.mode != Mode.HOSTED or not profile.vault:
        raise NoLimits("Only a hosted agent with its floor and ideal price set can be previewed.")
    limits = unseal(profile.vault)
    return play(
        strategy=profile.strategy,
        parameters=profile.parameters,
        settle=profile.settle_policy(),
        floor=limits.floor_price,
        ideal=limits.ideal_price,
    )


def play(
    *,
    strategy: str,
    parameters: Mapping[str, object],
    settle: SettlePolicy,
    floor: Decimal,
    ideal: Decimal,
    typed_limits: bool = False,
) -> Preview:
    """A merchant playing ``strategy`` tuned by ``parameters`` and settling by ``settle``,
    with ``floor`` and ``ideal``, against each preview buyer."""
    # USD unless a limit needs finer units: the protocol refuses a price the currency cannot carry.
    currency = "USD" if max(decimals_of(floor), decimals_of(ideal)) <= 2 else "KWD"
    unit = Decimal(1).scaleb(-minor_units(currency))
    halfway = ((floor + ideal) / 2).quantize(unit, rounding=ROUND_FLOOR)
    buyers = [(name, halfway, "halfway between floor and ideal") for name in STRATEGIES]
    under = (floor * UNDER_FLOOR_SHARE).quantize(unit, rounding=ROUND_FLOOR)
    if under > 0:
        buyers.append(("reference", under, "a tenth under the floor"))
    arbiter = Arbiter(
        "preview", ArbiterKey.from_cryptography(Ed25519PrivateKey.generate()), "urn:preview"
    )
    runs = [
        _run(
            arbiter,
            buyer=name,
            ceiling=ceiling,
            where=where,
            merchant=MerchantAgent(
                agent_id=_MERCHANT_ID,
                vault=MerchantVault(floor_price=floor, ideal_price=ideal),
                strategy=STRATEGIES[strategy].build("merchant", parameters),
                salt=_salt(),
                new_message_id=_ids("m"),
                settle=settle,
            ),
            currency=currency,
        )
        for name, ceiling, where in buyers
    ]
    return Preview(currency, MAX_ROUNDS, runs, typed_limits)


def _salt() -> str:
    return encode_salt(secrets.token_bytes(32))


def _ids(prefix: str) -> Callable[[], str]:
    numbers = itertools.count(1)
    return lambda: f"{prefix}{next(numbers)}"


def _run(
    arbiter: Arbiter,
    *,
    buyer: str,
    ceiling: Decimal,
    where: str,
    merchant: MerchantAgent,
    currency: str,
) -> Run:
    agent = BuyerAgent(
        agent_id=_BUYER_ID,
        vault=BuyerVault(true_ceiling=ceiling, budget_cap=ceiling),
        strategy=STRATEGIES[buyer].build("buyer"),
        salt=_salt(),
        new_message_id=_ids("b"),
        settle=OPEN_FOR_SETTLEMENT,
    )
    start = datetime.now(UTC)
    ticks = itertools.count()

    def clock() -> datetime:
        return start + timedelta(seconds=next(ticks))

    opening = agent.open(
        session_id="preview",
        merchant_agent_id=_MERCHANT_ID,
        item={"sku": "preview"},
        currency=currency,
        max_rounds=MAX_ROUNDS,
        now=clock(),
    )
    result = rehearse(buyer=agent, merchant=merchant, arbiter=arbiter, opening=opening, clock=clock)
    rounds: list[Round] = []
    settled = False
    for entry in result.entries:
        envelope = entry.envelope
        payload = envelope["payload"]
        role = envelope["sender"]["role"]
        if role == "arbiter" or entry.type in ("session.open", "session.ack"):
            continue
        settled = settled or entry.type == "settle.reveal"
        move = {
            "offer.accept": "accepts",
            "settle.reveal": "reveals its limit",
            "session.close": "withdraws",
        }.get(entry.type) or str(payload["price"])
        number = int(payload.get("round") or rounds[-1].number)
        if not rounds or rounds[-1].number != number:
            rounds.append(Round(number))
        rounds[-1].moves.append((str(role), move))
    state = result.negotiation.state
    if state.final_price is not None:
        how = "settled by reveal at" if settled else "agreed at"
        outcome = f"{how} {plain(state.final_price)} {currency}"
    else:
        outcome = f"no deal: {state.close_reason}"
    return Run(buyer, where, rounds, state.final_price is not None, outcome)
