"""The agent commands of ``oanp``: ``negotiate`` (a buyer), ``merchant`` (a long-running
merchant), ``merchants`` (the arbiter's directory) and ``mcp`` (the MCP tool server).

The network client and the MCP SDK are imported inside the commands, so that ``import
oanp.net.cli`` stays as light as the pure core. Private limits come from flags or a local JSON
file and stay in this process: only salted commitments reach the arbiter. So does a signing key
(``--signing-key``, :mod:`oanp.net.signing_keys`): its public half is registered with the
arbiter before the first envelope, and every envelope is signed with it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import signal
import time
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from oanp.agents.ids import new_ulid
from oanp.agents.parties import Agreed, BuyerAgent, Closed
from oanp.agents.strategies import (
    STRATEGIES,
    ParameterError,
    Strategy,
    canonical_name,
    strategy_named,
)
from oanp.net.arguments import (
    UsageError,
    buyer_vault,
    currency_code,
    limits_file,
    merchant_prices,
    merchant_vault,
    parse_amount,
    parse_issue,
    parse_item,
    parse_want,
)
from oanp.net.negotiators import Merchant, MerchantState, negotiate
from oanp.net.signing_keys import KeyFileError, read_key_file
from oanp.wire.commitments import Side, encode_salt
from oanp.wire.discovery import parse_query
from oanp.wire.errors import ProtocolError
from oanp.wire.settlement import NEVER_SETTLE, SettlePolicy
from oanp.wire.signing import SigningKey
from oanp.wire.transcript import describe_entry_json

#: Exit codes of ``oanp negotiate``: agreed, verification failed, bad input, closed.
EXIT_AGREED, EXIT_UNVERIFIED, EXIT_USAGE, EXIT_NO_AGREEMENT = 0, 1, 2, 3


def _now() -> datetime:
    return datetime.now(UTC)


def _new_salt() -> str:
    return encode_salt(secrets.token_bytes(32))


def _required(value: str | None, flag: str, variable: str) -> str:
    if not value:
        raise UsageError(f"{flag} (or {variable}) is required")
    return value


def _connection_flags(command: argparse.ArgumentParser, *, agent_id: bool = True) -> None:
    env = os.environ.get
    command.add_argument(
        "--server",
        default=env("OANP_SERVER", "http://127.0.0.1:8000"),
        help="the arbiter's base URL (OANP_SERVER)",
    )
    command.add_argument(
        "--api-key", default=env("OANP_API_KEY"), help="this agent's API key (OANP_API_KEY)"
    )
    if agent_id:
        command.add_argument(
            "--agent-id", default=env("OANP_AGENT_ID"), help="this agent's id (OANP_AGENT_ID)"
        )


def _signing_flag(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--signing-key",
        type=Path,
        default=os.environ.get("OANP_SIGNING_KEY") or None,
        metavar="FILE",
        help="sign every envelope with the private JWK in FILE (oanp keygen makes one), "
        "registering its public key first (OANP_SIGNING_KEY)",
    )


def signing_key(args: argparse.Namespace) -> SigningKey | None:
    """The key of ``--signing-key``, read before anything connects; none without the flag."""
    if args.signing_key is None:
        return None
    try:
        return read_key_file(args.signing_key)
    except KeyFileError as exc:
        raise UsageError(f"--signing-key {exc}") from None


def add_commands(commands: Any) -> None:
    """Register ``negotiate``, ``merchant``, ``merchants`` and ``mcp`` on the ``oanp``
    subparsers."""
    buy = commands.add_parser(
        "negotiate", help="negotiate one session as a buyer through an arbiter, then verify it"
    )
    _connection_flags(buy)
    _signing_flag(buy)
    buy.add_argument("--merchant", required=True, metavar="AGENT_ID")
    buy.add_argument(
        "--item", action="append", required=True, help="a JSON object, or key=value (repeatable)"
    )
    buy.add_argument("--currency", default="USD")
    buy.add_argument("--max-rounds", type=int, default=5)
    _strategy_flags(buy)
    buy.add_argument("--ceiling", help="true_ceiling: the most the buyer will ever pay")
    buy.add_argument("--budget", help="budget_cap: the soft target (default: the ceiling)")
    buy.add_argument("--urgency", help="committed with the limits (default: medium)")
    buy.add_argument("--limits", type=Path, metavar="FILE", help="JSON with the limits instead")
    _terms_flags(buy)
    buy.add_argument("--session-id", help="default: a new ULID")
    buy.add_argument("--profile", default="default/v0.1")
    buy.add_argument(
        "--issue",
        action="append",
        type=parse_issue,
        default=[],
        metavar="NAME=SPEC",
        help="negotiate this issue besides the price (profile terms/v0.1; repeatable): "
        "NAME=number:low|high:MIN..MAX[:DECIMALS] or NAME=choice:A,B,C, options from the "
        "buyer's best to the merchant's best",
    )
    buy.add_argument("--response-window", type=int, metavar="SECONDS")
    buy.add_argument(
        "--settle",
        type=settle_policy,
        default=NEVER_SETTLE,
        metavar="stuck|ROUND",
        help="open for settlement by reveal, and reveal the ceiling once the spread stops "
        "narrowing (stuck) or from round ROUND on; the merchant's reveal settles at the midpoint",
    )
    buy.add_argument("--save-log", type=Path, metavar="FILE", help="write the session's log")
    buy.add_argument("--quiet", action="store_true", help="print only the outcome")

    sell = commands.add_parser(
        "merchant", help="answer every session opened with this merchant, until stopped"
    )
    _connection_flags(sell)
    _signing_flag(sell)
    _strategy_flags(sell)
    sell.add_argument("--floor", help="floor_price: the least the merchant will ever take")
    sell.add_argument("--ideal", help="ideal_price: its list price, where it opens")
    sell.add_argument(
        "--currency",
        type=currency_code,
        default="USD",
        help="the currency of --floor and --ideal (default USD): sessions in any other are "
        "declined",
    )
    sell.add_argument(
        "--limits",
        type=Path,
        metavar="FILE",
        help="JSON with the limits instead: floor_price and ideal_price (in --currency), or a "
        'price list, {"limits": [{"item", "currency", "floor_price", "ideal_price"}, ...]}',
    )
    _terms_flags(sell)
    sell.add_argument(
        "--settle",
        type=settle_policy,
        default=NEVER_SETTLE,
        metavar="stuck|ROUND",
        help="in sessions opened for settlement, reveal the floor first once the spread stops "
        "narrowing (stuck) or from round ROUND on (a buyer's reveal is always answered)",
    )
    sell.add_argument(
        "--state",
        type=Path,
        required=True,
        metavar="FILE",
        help="where the inbox cursor and each session's salt are kept across restarts",
    )

    find = commands.add_parser(
        "merchants", help="list the merchant agents listed in the arbiter's directory"
    )
    _connection_flags(find, agent_id=False)
    find.add_argument(
        "--q",
        default="",
        metavar="TEXT",
        help="only those whose id, merchant, description or catalog holds TEXT (any case)",
    )
    find.add_argument("--json", action="store_true", help="print the listings as JSON")

    tools = commands.add_parser("mcp", help="serve the arbiter as MCP tools over stdio")
    _connection_flags(tools)
    _signing_flag(tools)
    tools.add_argument(
        "--role", choices=("buyer", "merchant"), default=os.environ.get("OANP_ROLE", "buyer")
    )
    tools.add_argument(
        "--state", type=Path, metavar="FILE", help="keep commitments' constraints and salts here"
    )
    tools.add_argument(
        "--limits",
        type=Path,
        metavar="FILE",
        help="this agent's limits, as negotiate and merchant read them: an offer or accept past "
        "its true_ceiling (buyer) or floor_price (merchant) is refused before it is sent",
    )
    tools.add_argument(
        "--currency",
        type=currency_code,
        default="USD",
        help="the currency of --limits and the approval price (default USD): in a session in "
        "any other, every offer and accept is refused before it is sent",
    )
    approval = tools.add_mutually_exclusive_group()
    approval.add_argument(
        "--approve-above",
        metavar="PRICE",
        help="(buyer) an accept above PRICE waits for a person's approval (MCP elicitation)",
    )
    approval.add_argument(
        "--approve-below",
        metavar="PRICE",
        help="(merchant) an accept below PRICE waits for a person's approval (MCP elicitation)",
    )
    # The vault readers' other flags: oanp mcp takes its limits from --limits alone.
    tools.set_defaults(
        ceiling=None, budget=None, urgency=None, floor=None, ideal=None, want=[], price_weight="1"
    )


def _terms_flags(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--want",
        action="append",
        type=parse_want,
        default=[],
        metavar="NAME=IDEAL..LIMIT[@WEIGHT]",
        help="in sessions with issues: this party's best and worst value of one (repeatable; "
        "sealed with the limits); an issue not named is taken as the other side offers it",
    )
    command.add_argument(
        "--price-weight", default="1", help="how much the price matters beside --want's weights"
    )


def _strategy_flags(command: argparse.ArgumentParser) -> None:
    command.add_argument("--strategy", default="reference", type=canonical_name, choices=STRATEGIES)
    command.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="tune the strategy (repeatable), e.g. exponent=0.5; see docs/agents.md",
    )


def tuned_strategy(args: argparse.Namespace, role: Side) -> Strategy:
    """``--strategy`` for ``role``, tuned by every ``--param NAME=VALUE``: the registry checks
    each name and value (:meth:`oanp.agents.strategies.NamedStrategy.parse`)."""
    parameters: dict[str, str] = {}
    for text in args.param:
        name, equals, value = text.partition("=")
        if not equals or not name:
            raise UsageError(f"--param {text!r}: expected NAME=VALUE")
        if name in parameters:
            raise UsageError(f"--param {name} is given twice")
        parameters[name] = value
    try:
        return strategy_named(args.strategy, role, parameters)
    except ParameterError as exc:
        raise UsageError(f"--param: {exc}") from None


def settle_policy(text: str) -> SettlePolicy:
    """``--settle stuck`` or ``--settle ROUND`` (an integer from 1)."""
    if text == "stuck":
        return SettlePolicy("stuck")
    try:
        return SettlePolicy("round", int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: say stuck, or the round to reveal from (1 or more)"
        ) from None


def run_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run one of the agent commands; 2 with a message on ``err`` for bad input."""
    try:
        if args.command == "negotiate":
            return negotiate_command(args, out, err)
        if args.command == "merchant":
            return merchant_command(args, out, err)
        if args.command == "merchants":
            return merchants_command(args, out, err)
        return mcp_command(args, err)
    except UsageError as exc:
        print(f"oanp {args.command}: {exc}", file=err)
        return EXIT_USAGE


def negotiate_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``oanp negotiate``: open a session as a buyer, answer it, verify the outcome."""
    from oanp.net.client import ArbiterClient

    agent_id = _required(args.agent_id, "--agent-id", "OANP_AGENT_ID")
    api_key = _required(args.api_key, "--api-key", "OANP_API_KEY")
    key = signing_key(args)
    vault = buyer_vault(args)
    item = parse_item(args.item)
    buyer = BuyerAgent(
        agent_id=agent_id,
        vault=vault,
        strategy=tuned_strategy(args, "buyer"),
        salt=_new_salt(),
        new_message_id=new_ulid,
        settle=args.settle,
    )
    try:
        opening = buyer.open(
            session_id=args.session_id or new_ulid(),
            merchant_agent_id=args.merchant,
            item=item,
            currency=args.currency,
            max_rounds=args.max_rounds,
            profile=args.profile,
            response_window_s=args.response_window,
            now=_now(),
            issues=args.issue or None,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None

    def show(entry: dict[str, Any]) -> None:
        if not args.quiet:
            print(describe_entry_json(entry), file=out, flush=True)

    def refused(error: ProtocolError) -> None:
        print(f"refused: {error}", file=err, flush=True)

    with ArbiterClient(args.server, api_key, signing_key=key) as client:
        if key is not None:
            try:
                client.register_signing_key()
            except ProtocolError as exc:
                print(f"oanp negotiate: the arbiter refused the signing key: {exc}", file=err)
                return EXIT_UNVERIFIED
        try:
            result = negotiate(
                client, buyer, opening, clock=_now, on_entry=show, on_refusal=refused
            )
        except ProtocolError as exc:
            print(f"oanp negotiate: the arbiter refused the session: {exc}", file=err)
            return EXIT_UNVERIFIED
    if args.save_log is not None:
        args.save_log.write_text(json.dumps(result.log, indent=1) + "\n", encoding="utf-8")
    outcome = result.outcome
    print(f"session {result.session_id}", file=out)
    agreement = result.agreement
    if isinstance(outcome, Agreed) and agreement is not None:
        signed = agreement["agreement"]
        print(
            f"AGREED at {agreement['final_price']} {agreement['currency']} with "
            f"{signed['merchant_agent_id']}, log of {signed['log_length']} entries, "
            f"digest {agreement['session_digest']}, {agreement['signature_alg']} kid "
            f"{agreement['kid']}",
            file=out,
        )
    elif isinstance(outcome, Closed):
        close = result.close or {}
        print(f"NO AGREEMENT: {outcome.reason} ({close.get('detail', '')})", file=out)
    verdict = "VERIFIED" if result.report.ok else "FAILED"
    print(f"{verdict} against the arbiter's JWKS: {result.report.summary()}", file=out)
    if not result.report.ok:
        for check in result.report.checks:
            print(check.line(), file=err)
        return EXIT_UNVERIFIED
    return EXIT_AGREED if isinstance(outcome, Agreed) else EXIT_NO_AGREEMENT


class _Stop(Exception):
    pass


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise _Stop


def merchant_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``oanp merchant``: follow the inbox and answer every session, until SIGTERM/SIGINT."""
    from oanp.net.client import UNREACHABLE, ArbiterClient

    agent_id = _required(args.agent_id, "--agent-id", "OANP_AGENT_ID")
    api_key = _required(args.api_key, "--api-key", "OANP_API_KEY")
    key = signing_key(args)
    vault = merchant_prices(args)
    strategy = tuned_strategy(args, "merchant")
    try:
        state = MerchantState.load(args.state, agent_id)
    except (OSError, ValueError) as exc:
        raise UsageError(f"--state: {exc}") from None

    def report(line: str) -> None:
        print(line, file=out, flush=True)

    def opened() -> None:
        report(f"merchant {agent_id} following its inbox (cursor {state.cursor or 'start'})")

    signal.signal(signal.SIGTERM, _raise_stop)
    with ArbiterClient(args.server, api_key, signing_key=key) as client:
        merchant = Merchant(
            client,
            agent_id=agent_id,
            vault=vault,
            strategy=strategy,
            state=state,
            clock=_now,
            new_salt=_new_salt,
            new_message_id=new_ulid,
            report=report,
            settle=args.settle,
        )
        while True:
            try:
                if key is not None:
                    # Before recover() sends anything; again after an outage, which the
                    # arbiter answers 200 for a key it holds.
                    client.register_signing_key()
                merchant.recover()
                merchant.follow(on_open=opened)
            except (_Stop, KeyboardInterrupt):
                report(f"merchant {agent_id} stopped")
                return 0
            except ProtocolError as exc:
                print(f"oanp merchant: {exc}", file=err)
                return 1
            except UNREACHABLE as exc:
                # The arbiter is unreachable: the state file holds everything; start over.
                report(f"merchant {agent_id}: {exc!r}; recovering in 1 s")
                time.sleep(1)


#: How much of a description fits on a line of the table.
DESCRIPTION_WIDTH = 60
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f]")


def _cell(text: str, width: int | None = None) -> str:
    # A terminal must not run what an arbiter sends: control characters become blanks.
    text = " ".join(_UNPRINTABLE.sub(" ", text).split())
    if width is not None and len(text) > width:
        return text[: width - 1] + "…"
    return text


def merchant_table(listings: list[dict[str, Any]]) -> list[str]:
    """The directory as lines of a table: agent id, merchant, currencies, catalog items,
    the description's start."""
    rows = [("AGENT ID", "MERCHANT", "CURRENCIES", "ITEMS", "DESCRIPTION")]
    rows += [
        (
            _cell(str(entry.get("agent_id", ""))),
            _cell(str(entry.get("merchant", ""))),
            _cell(" ".join(map(str, entry.get("currencies", [])))),
            str(len(entry.get("catalog", []))),
            _cell(str(entry.get("description", "")), DESCRIPTION_WIDTH),
        )
        for entry in listings
    ]
    # Every column as wide as its widest cell, but the last, which ends the line.
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return [
        "  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[-1]])
        for row in rows
    ]


def merchants_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``oanp merchants``: the listed merchant agents matching ``--q``, every page of them."""
    from oanp.net.client import UNREACHABLE, ArbiterClient

    api_key = _required(args.api_key, "--api-key", "OANP_API_KEY")
    try:
        query = parse_query(args.q)
    except ProtocolError as exc:
        raise UsageError(f"--q {exc.errors[0].message}") from None
    with ArbiterClient(args.server, api_key) as client:
        try:
            listings = client.merchants(query or None)
        except ProtocolError as exc:
            print(f"oanp merchants: the arbiter refused: {exc}", file=err)
            return EXIT_UNVERIFIED
        except UNREACHABLE as exc:
            print(f"oanp merchants: the arbiter is unreachable: {exc!r}", file=err)
            return EXIT_UNVERIFIED
    if args.json:
        print(json.dumps(listings, indent=1, ensure_ascii=False), file=out)
        return 0
    if not listings:
        matching = f" matches {query!r}" if query else " is listed"
        print(f"no merchant agent{matching}", file=out)
        return 0
    for line in merchant_table(listings):
        print(line.rstrip(), file=out)
    count = len(listings)
    print(f"{count} merchant agent{'' if count == 1 else 's'}", file=out)
    return 0


def mcp_command(args: argparse.Namespace, err: TextIO) -> int:
    """``oanp mcp``: the MCP tool server over stdio, held to ``--limits`` and asking a person
    before an accept past ``--approve-above`` or ``--approve-below``, signing every envelope
    with ``--signing-key``'s key when given."""
    from oanp.net.mcp import serve

    api_key = _required(args.api_key, "--api-key", "OANP_API_KEY")
    agent_id = _required(args.agent_id, "--agent-id", "OANP_AGENT_ID")
    key = signing_key(args)
    limit, approval = mcp_limit(args), mcp_approval(args)
    try:
        serve(
            server=args.server,
            api_key=api_key,
            agent_id=agent_id,
            role=args.role,
            state_path=args.state,
            limit=limit,
            approval=approval,
            limit_currency=args.currency,
            signing_key=key,
        )
    except ProtocolError as exc:
        # Only the key's registration reaches the arbiter before the tools serve; once they
        # do, a refusal is a tool's result, never raised out of the server.
        print(f"oanp mcp: the arbiter refused the signing key: {exc}", file=err)
        return EXIT_UNVERIFIED
    return 0


def mcp_limit(args: argparse.Namespace) -> Decimal | None:
    """The hard limit of ``oanp mcp --limits``: the buyer's true_ceiling or the merchant's
    floor_price, read and checked as ``negotiate`` and ``merchant`` read the file."""
    if args.limits is None:
        return None
    if args.role == "buyer":
        return buyer_vault(args).true_ceiling
    if "limits" in limits_file(args.limits):
        # A price list's floor depends on each session's currency and item, and the guard
        # holds one limit for every session: only oanp merchant reads one.
        raise UsageError(
            f"--limits {args.limits}: oanp mcp takes one floor_price and ideal_price, "
            "not a price list"
        )
    return merchant_vault(args).floor_price


def mcp_approval(args: argparse.Namespace) -> Decimal | None:
    """The approval threshold of ``oanp mcp``: ``--approve-above`` for a buyer, whose accepts
    above it wait for a person, ``--approve-below`` for a merchant."""
    buyer = args.role == "buyer"
    if (args.approve_below if buyer else args.approve_above) is not None:
        raise UsageError("a buyer's threshold is --approve-above, a merchant's --approve-below")
    threshold = args.approve_above if buyer else args.approve_below
    return None if threshold is None else parse_amount(threshold, "the approval threshold")
