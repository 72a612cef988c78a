"""The agent form's preview: the agent as the form stands, unsaved, against each reference
buyer, in whole sessions played in-process by :func:`oanp.agents.rehearsal.rehearse`.

Nothing is written and nothing reaches the arbiter: the sessions live in memory, under an
arbiter key made for the request and dropped with it. They take milliseconds, so they run in
the request. The limits are the ones typed in the form, else the sealed ones; they are used
here and never shown, though the prices played tell a good deal about them, which is why only
those who may change the agent may preview it.

The buyers: each strategy of :data:`oanp.agents.strategies.STRATEGIES` at its defaults, with its
ceiling (and budget) halfway between the merchant's floor and ideal price, so a deal is
possible; then a reference buyer whose ceiling is a tenth under the floor, so none is. Sessions
have the protocol's default of five rounds. The buyers open them for settlement by reveal but
never reveal first, so the agent's own settle policy shows, and answer its reveal as every
agent does.

An agent whose limits weigh issues besides the price (profile terms/v0.1) is played on them:
the buyers declare an issue per issue of its vault (:func:`oanp.agents.tradeoffs.issues_for`: the
vault names no domains, so each spans the agent's ideal and limit) and bring terms of their
own, see :func:`buyer_terms`. A price-only agent's sessions are price-only, as before.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from oanp.agents.parties import BuyerAgent, MerchantAgent
from oanp.agents.pricelist import PriceLimits, PriceList
from oanp.agents.rehearsal import rehearse
from oanp.agents.strategies import STRATEGIES
from oanp.agents.tradeoffs import MAX_WEIGHT, IssueLimits, TermsVault, issues_for
from oanp.agents.vaults import BuyerVault, MerchantVault
from oanp.wire.commitments import encode_salt
from oanp.wire.envelope import DEFAULT_MAX_ROUNDS
from oanp.wire.money import minor_units
from oanp.wire.settlement import SettlePolicy
from oanp.wire.signing import SigningKey
from oanp.wire.state import Arbiter
from oanp.wire.terms import ChoiceIssue, Issue
from oanp.wire.transcript import terms_text
from sessions_app.analytics import plain
from sessions_app.models import AgentProfile, Mode
from sessions_app.services import NoLimits
from sessions_app.vault import unseal

MAX_ROUNDS = DEFAULT_MAX_ROUNDS
#: The ceiling of the buyer that cannot meet the floor, as a share of the floor.
UNDER_FLOOR_SHARE = Decimal("0.9")
#: A buyer that opens for settlement and never reveals first: its first round to reveal in
#: comes after the session's last.
OPEN_FOR_SETTLEMENT = SettlePolicy("round", MAX_ROUNDS + 1)
_MERCHANT_ID, _BUYER_ID = "preview-merchant", "preview-buyer"


@dataclass(frozen=True)
class Round:
    """One round's moves, in order, as the table shows them: ``("buyer", "320", "")``,
    ``("merchant", "accepts", "")``; with issues, the terms the offer carried beside its
    price: ``("buyer", "320", "delivery_days 7, support basic")``."""

    number: int
    moves: list[tuple[str, str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class Run:
    buyer: str  # the buyer's strategy, by its registry name
    ceiling: str  # where the buyer's ceiling sits, in words: never a number
    rounds: list[Round]
    agreed: bool
    outcome: str
    #: With issues, the agreed terms, in words (``"delivery_days 7, support basic"``).
    terms: str = ""


@dataclass(frozen=True)
class Preview:
    currency: str
    max_rounds: int
    runs: list[Run]
    #: Whether the limits typed in the form were played (they are not kept: limits are never
    #: shown back), rather than the sealed ones.
    typed_limits: bool
    #: The names of the issues negotiated besides the price, in their declared order.
    issues: tuple[str, ...] = ()


def preview_form(data: Mapping[str, Any], prices: PriceList | None, typed: bool) -> Preview:
    """The preview of a valid agent form's ``cleaned_data``, with ``prices`` as the form
    leaves them (``typed``: the form changed the sealed ones).
    :class:`~sessions_app.services.NoLimits` when there are none."""
    if prices is None or not prices.limits:
        raise NoLimits("The preview plays the agent's limits: add a row with a floor and ideal.")
    return play(
        strategy=data["strategy"],
        parameters=data["parameters"],
        settle=data["settle"],
        limits=played_row(prices),
        terms=prices.terms,
        typed_limits=typed,
    )


def preview_saved(profile: AgentProfile) -> Preview:
    """The saved agent, as new sessions will meet it; :class:`~sessions_app.services.NoLimits`
    for an agent that is not hosted here or has no limits yet."""
    prices = unseal(profile.vault) if profile.vault else None
    if profile.mode != Mode.HOSTED or prices is None or not prices.limits:
        raise NoLimits("Only a hosted agent with its floor and ideal price set can be previewed.")
    return play(
        strategy=profile.strategy,
        parameters=profile.parameters,
        settle=profile.settle_policy(),
        limits=played_row(prices),
        terms=prices.terms,
    )


def played_row(prices: PriceList) -> PriceLimits:
    """The row the preview plays: the first "any item" row, else the first row; its sessions
    are in that row's currency."""
    return next((row for row in prices.limits if row.item is None), prices.limits[0])


def play(
    *,
    strategy: str,
    parameters: Mapping[str, object],
    settle: SettlePolicy,
    limits: PriceLimits,
    terms: TermsVault | None = None,
    typed_limits: bool = False,
) -> Preview:
    """A merchant playing ``strategy`` tuned by ``parameters`` and settling by ``settle``,
    on ``limits`` (and weighing issues by ``terms``), against each preview
    buyer. :class:`~sessions_app.services.NoLimits` for terms no session can declare."""
    issues: tuple[Issue, ...] = ()
    if terms is not None and terms.issues:
        try:
            issues = issues_for("merchant", terms)
        except ValueError as unfit:
            raise NoLimits(f"The preview cannot play the limits on issues: {unfit}.") from None
    theirs = buyer_terms(issues, terms) if terms is not None and issues else None
    floor, ideal, currency = limits.floor_price, limits.ideal_price, limits.currency
    unit = Decimal(1).scaleb(-minor_units(currency))
    halfway = ((floor + ideal) / 2).quantize(unit, rounding=ROUND_FLOOR)
    buyers = [(name, halfway, "halfway between floor and ideal") for name in STRATEGIES]
    under = (floor * UNDER_FLOOR_SHARE).quantize(unit, rounding=ROUND_FLOOR)
    if under > 0:
        buyers.append(("reference", under, "a tenth under the floor"))
    arbiter = Arbiter(
        "preview", SigningKey.from_cryptography(Ed25519PrivateKey.generate()), "urn:preview"
    )
    runs = [
        _run(
            arbiter,
            buyer=name,
            ceiling=ceiling,
            where=where,
            merchant=MerchantAgent(
                agent_id=_MERCHANT_ID,
                vault=MerchantVault(floor_price=floor, ideal_price=ideal, terms=terms),
                strategy=STRATEGIES[strategy].build("merchant", parameters),
                salt=_salt(),
                new_message_id=_ids("m"),
                settle=settle,
            ),
            currency=currency,
            issues=issues,
            terms=theirs,
        )
        for name, ceiling, where in buyers
    ]
    return Preview(currency, MAX_ROUNDS, runs, typed_limits, tuple(i.name for i in issues))


def buyer_terms(issues: tuple[Issue, ...], merchant: TermsVault) -> TermsVault:
    """The preview buyers' terms, on ``issues`` as :func:`oanp.agents.tradeoffs.issues_for` declares
    them for the ``merchant``'s: on each, the ideal at the buyer's best end and the limit
    halfway to the merchant's, rounded towards the merchant's end so that it never falls on
    the ideal (two options: the buyer takes either). As the ceiling halfway between floor and
    ideal, this leaves the merchant room, so a deal is possible.

    The price weighs as much as the merchant's, each issue the merchant's weight mirrored
    about it (a weight w of the merchant's becomes p²/w, p the price's): what the merchant
    cares about less than the price, the buyer cares about more, by as much, so each side's
    plan gives early what the other values most, and the trade-offs the merchant's weights
    make show in the moves. Weights equal to the price's stay equal; an issue the merchant is
    indifferent to (weight 0) is one the buyer wants as much as any weight can say."""
    price = merchant.price_weight
    limits = []
    for issue in issues:
        own = merchant.of(issue.name)
        assert own is not None  # the issues were declared from this very vault
        weight = min(price * price / own.weight, MAX_WEIGHT) if own.weight else MAX_WEIGHT
        ideal: Decimal | str
        limit: Decimal | str
        if isinstance(issue, ChoiceIssue):
            # Options run from the buyer's best; halfway, the later of two middles.
            ideal, limit = issue.options[0], issue.options[len(issue.options) // 2]
        else:
            low_best = issue.buyer_prefers == "low"
            ideal = issue.low if low_best else issue.high
            step = Decimal(1).scaleb(-issue.decimals)
            halfway = (issue.low + issue.high) / 2
            limit = halfway.quantize(step, rounding=ROUND_CEILING if low_best else ROUND_FLOOR)
        limits.append(IssueLimits(issue.name, weight, ideal, limit))
    return TermsVault(price, tuple(limits))


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
    issues: tuple[Issue, ...] = (),
    terms: TermsVault | None = None,
) -> Run:
    agent = BuyerAgent(
        agent_id=_BUYER_ID,
        vault=BuyerVault(true_ceiling=ceiling, budget_cap=ceiling, terms=terms),
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
        issues=[issue.as_json() for issue in issues] or None,
    )
    result = rehearse(buyer=agent, merchant=merchant, arbiter=arbiter, opening=opening, clock=clock)
    rounds: list[Round] = []
    settled = False
    final_terms: Mapping[str, object] | None = None
    for entry in result.entries:
        envelope = entry.envelope
        payload = envelope["payload"]
        role = envelope["sender"]["role"]
        if entry.type == "session.agree":
            final_terms = payload["agreement"].get("final_terms")
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
        # An accept repeats the standing terms: the offer it takes shows them already.
        offered = entry.type in ("offer.propose", "offer.counter")
        carried = _terms_text(issues, payload.get("terms")) if offered else ""
        rounds[-1].moves.append((str(role), move, carried))
    state = result.negotiation.state
    agreed = state.final_price is not None
    if state.final_price is not None:
        how = "settled by reveal at" if settled else "agreed at"
        outcome = f"{how} {plain(state.final_price)} {currency}"
    else:
        outcome = f"no deal: {state.close_reason}"
    return Run(buyer, where, rounds, agreed, outcome, _terms_text(issues, final_terms))


def _terms_text(issues: tuple[Issue, ...], terms: Mapping[str, object] | None) -> str:
    """Terms as the table shows them, in the declared order: ``delivery_days 7, support
    basic``; nothing for a price-only session or a move without terms."""
    if not issues or terms is None:
        return ""
    return terms_text({issue.name: terms[issue.name] for issue in issues})
