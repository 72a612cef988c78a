"""The agents' side over a live arbiter: ``oanp negotiate`` against ``oanp merchant``, the
MCP tool server driven by the MCP SDK's own client, and a merchant killed mid-session.

Merchants run as real ``oanp merchant`` processes; buyers run the ``oanp negotiate`` command
in threads (its parser and runner, with their own output streams), one process is spawned
where the command line itself is the point.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from oanp.agents.strategies import STRATEGIES
from oanp.audit import verify_log
from oanp.net import cli, commands
from oanp.net.client import ArbiterClient
from tests.conftest import ROOT, LiveServer
from tests.support.factories.agents import SFO_JFK_ITEM, SFO_JFK_TRACE, Agent, make_agent
from tests.support.factories.terms import ISSUES
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

#: Every wait is bounded: a condition not met by then fails the test.
WAIT = 30.0


@dataclass
class MerchantProcess:
    """An ``oanp merchant`` subprocess; its output lines are collected as they come."""

    argv: list[str]
    lines: list[str] = field(default_factory=list)
    process: subprocess.Popen[str] | None = None
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def start(self) -> MerchantProcess:
        self.process = subprocess.Popen(
            self.argv,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        threading.Thread(target=self._read, args=(self.process,), daemon=True).start()
        self.wait_for(lambda line: "following its inbox" in line)
        return self

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()

    def wait_for(self, match: Callable[[str], bool], count: int = 1) -> None:
        with self._changed:
            met = self._changed.wait_for(
                lambda: sum(1 for line in self.lines if match(line)) >= count, WAIT
            )
        assert met, "merchant output:\n" + "\n".join(self.lines)

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


@pytest.fixture
def merchants(live_arbiter: LiveServer) -> Iterator[Callable[..., MerchantProcess]]:
    started: list[MerchantProcess] = []

    def start(
        agent: Agent, state: Path, *extra: str, strategy: str = "reference"
    ) -> MerchantProcess:
        argv = [
            sys.executable,
            "-m",
            "oanp.net.cli",
            "merchant",
            "--server",
            live_arbiter.url,
            "--api-key",
            agent.api_key,
            "--agent-id",
            agent.agent_id,
            "--floor",
            "280",
            "--ideal",
            "400",
            "--strategy",
            strategy,
            "--state",
            str(state),
            *extra,
        ]
        merchant = MerchantProcess(argv).start()
        started.append(merchant)
        return merchant

    yield start
    for merchant in started:
        merchant.stop()


@dataclass
class Run:
    code: int
    out: str
    err: str
    log: list[dict[str, Any]]


#: The buyer's limits of the published example: ceiling 420, budget 400.
LIMIT_FLAGS = ("--ceiling", "420", "--budget", "400")
#: A terms/v0.1 session's issues as the buyer declares them, and its wants on them: delivery
#: matters much to it (weight 2), support little (0.25). BUYER_TERMS of
#: tests/support/factories/terms.py, as flags.
BUYER_TERMS_FLAGS = (
    "--issue",
    "delivery_days=number:low:1..30",
    "--issue",
    "support=choice:premium,standard,none",
    "--want",
    "delivery_days=2..14@2",
    "--want",
    "support=premium..none@0.25",
)
#: The merchant's wants on those issues, the other way round: support matters, delivery little
#: (MERCHANT_TERMS there).
MERCHANT_TERMS_FLAGS = ("--want", "delivery_days=20..3@0.25", "--want", "support=none..standard@2")


def negotiate_argv(
    merchant_id: str,
    *flags: str,
    items: tuple[str, ...] = ("route=SFO-JFK", "date=2026-04-28"),
    server: str | None = None,
    buyer: Agent | None = None,
) -> list[str]:
    """``oanp negotiate``'s arguments: with ``merchant_id`` for ``items`` (the SFO→JFK flight
    unless told), on ``server`` with ``buyer``'s key and id where given (else the command takes
    them from its environment), then ``flags``."""
    argv = ["negotiate", "--merchant", merchant_id]
    for item in items:
        argv += ["--item", item]
    if server is not None:
        argv += ["--server", server]
    if buyer is not None:
        argv += ["--api-key", buyer.api_key, "--agent-id", buyer.agent_id]
    return [*argv, *flags]


def negotiate(server: str, buyer: Agent, merchant_id: str, tmp: Path, *extra: str) -> Run:
    """``oanp negotiate`` in this process, with its own output streams."""
    log_path = tmp / f"log-{threading.get_ident()}-{time.monotonic_ns()}.json"
    argv = negotiate_argv(
        merchant_id, "--save-log", str(log_path), *extra, server=server, buyer=buyer
    )
    args = cli._parser().parse_args(argv)
    out, err = io.StringIO(), io.StringIO()
    code = commands.run_command(args, out, err)
    log = json.loads(log_path.read_text()) if log_path.exists() else []
    return Run(code, out.getvalue(), err.getvalue(), log)


def bounded(work: Callable[[], None]) -> None:
    """Run ``work`` in a thread; fail, rather than hang, when it outlasts the wait."""
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(WAIT)
    assert not thread.is_alive(), "still waiting on the arbiter"


def merchant_envelopes(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["envelope"] for e in log if e["envelope"]["sender"]["role"] == "merchant"]


def assert_answered_once(log: list[dict[str, Any]]) -> None:
    """No merchant envelope twice: unique message ids, one ack, one move per round."""
    mine = merchant_envelopes(log)
    ids = Counter(e["message_id"] for e in mine)
    assert all(n == 1 for n in ids.values()), ids
    moves = Counter((e["type"], e["payload"].get("round")) for e in mine)
    assert all(n == 1 for n in moves.values()), moves
    rounds = Counter(e["payload"].get("round") for e in mine if e["type"] != "session.ack")
    assert all(n == 1 for n in rounds.values()), rounds


# 20 concurrent sessions ------------------------------------------------------------------


def test_twenty_negotiate_commands_against_two_merchant_processes(
    live_arbiter: LiveServer, merchants: Any, tmp_path: Path
) -> None:
    sellers = [make_agent("merchant-ref", "merchant"), make_agent("merchant-tft", "merchant")]
    merchants(sellers[0], tmp_path / "ref.json", strategy="reference")
    merchants(sellers[1], tmp_path / "tft.json", strategy="titfortat")
    buyers = [make_agent(f"buyer-{n}", "buyer") for n in range(4)]
    strategies = list(STRATEGIES)
    plans = []
    for n in range(20):
        # Every fifth buyer's ceiling is under the merchants' floor: no deal is possible.
        ceiling = "250" if n % 5 == 4 else str(400 + 5 * n)
        plans.append(
            (
                buyers[n % 4],
                sellers[n % 2].agent_id,
                "--strategy",
                strategies[n % len(strategies)],
                "--ceiling",
                ceiling,
                "--budget",
                str(min(int(ceiling), 380)),
                "--max-rounds",
                str(3 + n % 4),
            )
        )
    with ThreadPoolExecutor(max_workers=20) as pool:
        runs = list(
            pool.map(
                lambda plan: negotiate(live_arbiter.url, plan[0], plan[1], tmp_path, *plan[2:]),
                plans,
            )
        )
    jwks = ArbiterClient(live_arbiter.url).jwks()
    outcomes: Counter[str] = Counter()
    for run in runs:
        assert run.code in (commands.EXIT_AGREED, commands.EXIT_NO_AGREEMENT), run.out + run.err
        assert "VERIFIED against the arbiter's JWKS" in run.out, run.out
        last = run.log[-1]["envelope"]
        assert last["sender"]["role"] == "arbiter"
        if run.code == commands.EXIT_AGREED:
            assert last["type"] == "session.agree"
            assert "AGREED at" in run.out
            outcomes["agreed"] += 1
        else:
            assert last["type"] == "session.close"
            # A buyer declines a last counter beyond its ceiling by withdrawing (final answer).
            assert last["payload"]["reason"] in (
                "max_rounds_reached",
                "stalled",
                "withdrawn_by_buyer",
            )
            assert f"NO AGREEMENT: {last['payload']['reason']}" in run.out
            outcomes[last["payload"]["reason"]] += 1
        # Offline: the saved log and the published keys, nothing else.
        assert verify_log(run.log, jwks).ok
        assert_answered_once(run.log)
        assert last["payload"] is not None
        # The buyer's limits never crossed the wire: only the salted commitment did.
        assert "true_ceiling" not in json.dumps(run.log)
    assert outcomes["agreed"] >= 10, outcomes
    assert sum(outcomes.values()) == 20


def test_negotiate_settles_by_reveal_with_a_merchant_process(
    live_arbiter: LiveServer, merchants: Any, tmp_path: Path
) -> None:
    seller = make_agent("merchant-settle", "merchant")
    merchants(seller, tmp_path / "settle.json")
    buyer = make_agent("buyer-settle", "buyer")
    run = negotiate(
        live_arbiter.url,
        buyer,
        seller.agent_id,
        tmp_path,
        *LIMIT_FLAGS,
        "--settle",
        "2",
    )
    assert run.code == commands.EXIT_AGREED, run.out + run.err
    types = [e["envelope"]["type"] for e in run.log]
    assert types[-4:] == ["settle.reveal", "settle.reveal", "round.verdict", "session.agree"]
    agreement = run.log[-1]["envelope"]["payload"]["agreement"]
    # The merchant process answers with its floor (280): the midpoint of 420 and 280.
    assert agreement["settlement"] == {"rule": "midpoint/v0.1", "ceiling": 420, "floor": 280}
    assert agreement["final_price"] == 350
    assert verify_log(run.log, ArbiterClient(live_arbiter.url).jwks()).ok
    assert_answered_once(run.log)


def test_negotiate_trades_off_terms_with_a_merchant_process(
    live_arbiter: LiveServer, merchants: Any, tmp_path: Path
) -> None:
    """Profile terms/v0.1 between two processes: the buyer wants fast delivery and cares
    little for support, the merchant the other way round; they agree on terms within both
    sides' limits, and the log, with its signed final_terms, verifies."""
    seller = make_agent("merchant-terms", "merchant")
    merchants(seller, tmp_path / "terms.json", *MERCHANT_TERMS_FLAGS)
    buyer = make_agent("buyer-terms", "buyer")
    run = negotiate(
        live_arbiter.url,
        buyer,
        seller.agent_id,
        tmp_path,
        *LIMIT_FLAGS,
        *BUYER_TERMS_FLAGS,
    )
    assert run.code == commands.EXIT_AGREED, run.out + run.err
    opened = run.log[0]["envelope"]["payload"]
    assert opened["profile"] == "terms/v0.1"
    assert [i["name"] for i in opened["issues"]] == ["delivery_days", "support"]
    final = run.log[-1]["envelope"]["payload"]["agreement"]["final_terms"]
    assert 3 <= final["delivery_days"] <= 14
    assert final["support"] in ("standard", "none")
    assert "with delivery_days" in run.out  # the transcript prints each offer's terms
    verdicts = [
        e["envelope"]["payload"] for e in run.log if e["envelope"]["type"] == "round.verdict"
    ]
    assert all(v["status"] != "violated" for v in verdicts)
    assert verify_log(run.log, ArbiterClient(live_arbiter.url).jwks()).ok
    assert_answered_once(run.log)


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("--issue=days", "expected NAME=number"),
        ("--issue=Days=number:low:1..30", "name must be"),
        ("--issue=days=number:low:30..1", "less than its max"),
        ("--issue=support=choice:only", "options"),
        ("--want=days", "expected NAME=IDEAL..LIMIT"),
        ("--want=days=1..5@x", "days: the weight must be a number from 0 to 100"),
        ("--want=days=1..express", "both numbers (a number issue) or both options"),
        ("--want=days=5..5.0", "must differ"),
        ("--want=Days=1..5", "1-32 of a-z and _"),
    ],
)
def test_negotiate_refuses_malformed_issue_flags(flag: str, message: str) -> None:
    err = io.StringIO()
    with pytest.raises(SystemExit) as exit_, contextlib.redirect_stderr(err):
        cli._parser().parse_args(negotiate_argv("m", flag, items=("a=b",)))
    assert exit_.value.code == 2
    assert message in err.getvalue()


def test_negotiate_command_line_prints_rounds_and_refuses_bad_limits(
    live_arbiter: LiveServer, merchants: Any, tmp_path: Path
) -> None:
    seller = make_agent("merchant-cli", "merchant")
    merchants(seller, tmp_path / "cli.json")
    buyer = make_agent("buyer-cli", "buyer")
    limits = tmp_path / "limits.json"
    limits.write_text(json.dumps({"true_ceiling": 420, "budget_cap": 400}))
    # The item as one JSON object; the key and the agent id from the environment.
    item = json.dumps(SFO_JFK_ITEM)
    argv = negotiate_argv(seller.agent_id, items=(item,), server=live_arbiter.url)
    base = [sys.executable, "-m", "oanp.net.cli", *argv]
    env = {"OANP_API_KEY": buyer.api_key, "OANP_AGENT_ID": buyer.agent_id}
    done = subprocess.run(
        [*base, "--limits", str(limits)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=WAIT,
        env={**_environ(), **env},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    kinds = [line.split()[2] for line in lines if line.startswith("#")]
    assert kinds == SFO_JFK_TRACE
    assert any(line.startswith("AGREED at 340 USD with merchant-cli") for line in lines)
    # The ceiling stays home; digits inside hashes, keys and ids are not a price.
    assert not re.search(r"(?<![\w-])420(?![\w-])", done.stdout)
    bad = subprocess.run(
        [*base, "--ceiling", "300", "--budget", "350"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=WAIT,
        env={**_environ(), **env},
    )
    assert bad.returncode == 2
    assert "budget_cap must not exceed true_ceiling" in bad.stderr


def _environ() -> dict[str, str]:
    return dict(os.environ)


# A merchant killed mid-session -------------------------------------------------------------


def test_a_merchant_killed_mid_session_finishes_on_restart_answering_nothing_twice(
    live_arbiter: LiveServer, merchants: Any, tmp_path: Path
) -> None:
    seller = make_agent("merchant-crash", "merchant")
    buyer = make_agent("buyer-patient", "buyer")
    state = tmp_path / "crash" / "state.json"
    first = merchants(seller, state, strategy="boulware")
    # Boulware against Boulware with ten rounds: long sessions, so the kill lands inside them.
    extra = ("--strategy", "boulware", "--ceiling", "420", "--budget", "380", "--max-rounds", "10")
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [
            pool.submit(negotiate, live_arbiter.url, buyer, seller.agent_id, tmp_path, *extra)
            for _ in range(4)
        ]
        first.wait_for(lambda line: "sent offer.counter round 2" in line, count=2)
        first.kill()
        finished_before = sum(1 for line in first.lines if "finished" in line)
        assert finished_before < 4, "\n".join(first.lines)
        second = merchants(seller, state, strategy="boulware")
        runs = [future.result(timeout=WAIT) for future in futures]
    for run in runs:
        assert run.code in (commands.EXIT_AGREED, commands.EXIT_NO_AGREEMENT), run.out + run.err
        assert "VERIFIED" in run.out
        assert_answered_once(run.log)
    # The restarted merchant never tried to answer what the first one had answered.
    assert not [line for line in second.lines if "refused" in line], second.lines

    def all_noted_finished() -> bool:
        """the merchant's state file holding every session finished, nothing left to send:
        it learns of each end from its inbox, after the buyer's command has returned"""
        saved = json.loads(state.read_text())["sessions"].values()
        return all(record["finished"] and record["outbox"] == [] for record in saved)

    wait_for(all_noted_finished, WAIT)


def test_a_merchant_stopped_between_sending_and_noting_it_resends_the_same_bytes(
    live_arbiter: LiveServer, tmp_path: Path
) -> None:
    """The narrowest crash window, made deterministic: the envelope reached the arbiter but
    the outbox was not cleared. The next run sends the very same envelope; the arbiter
    answers it as a replay (200), and nothing enters the log twice."""
    from datetime import UTC, datetime
    from decimal import Decimal

    from oanp.agents.strategies import ReferenceMerchant
    from oanp.agents.vaults import MerchantVault
    from oanp.net.negotiators import Merchant, MerchantState
    from oanp.wire.commitments import encode_salt

    seller = make_agent("merchant-window", "merchant")
    buyer = make_agent("buyer-window", "buyer")
    replays: list[tuple[str, bool]] = []

    class Crash(Exception):
        pass

    class CrashAfterSend:
        def __init__(self, client: ArbiterClient, crash_on: str | None) -> None:
            self.client, self.crash_on = client, crash_on

        def __getattr__(self, name: str) -> Any:
            return getattr(self.client, name)

        def submit(self, envelope: Any) -> Any:
            answer = self.client.submit(envelope)
            replays.append((envelope["message_id"], answer.repeated))
            if envelope["type"] == self.crash_on:
                raise Crash
            return answer

    state_path = tmp_path / "window.json"
    salts = iter([encode_salt(b"\x07" * 32)])
    counter = iter(range(10_000))

    def merchant(api: Any) -> Merchant:
        return Merchant(
            api,
            agent_id=seller.agent_id,
            vault=MerchantVault(floor_price=Decimal(280), ideal_price=Decimal(400)),
            strategy=ReferenceMerchant(),
            state=MerchantState.load(state_path, seller.agent_id),
            clock=lambda: datetime.now(UTC),
            new_salt=lambda: next(salts),
            new_message_id=lambda: f"m-{next(counter)}",
        )

    client = ArbiterClient(live_arbiter.url, seller.api_key)
    done = threading.Event()
    result: list[Run] = []

    def buy() -> None:
        result.append(negotiate(live_arbiter.url, buyer, seller.agent_id, tmp_path, *LIMIT_FLAGS))
        done.set()

    threading.Thread(target=buy, daemon=True).start()
    crashing = merchant(CrashAfterSend(client, "offer.counter"))
    crashed: list[Crash] = []

    def crash() -> None:
        try:
            crashing.follow()
        except Crash as exc:
            crashed.append(exc)

    bounded(crash)
    assert crashed
    saved = json.loads(state_path.read_text())
    [record] = saved["sessions"].values()
    assert [e["type"] for e in record["outbox"]] == ["offer.counter"]
    # A new run from the state file alone: it resends, then follows on.
    resumed = merchant(CrashAfterSend(client, None))
    resumed.recover()
    # The arbiter's idempotent replay of the very same envelope. (The buyer may have moved
    # meanwhile, so the resumed merchant may also have sent its next move after it.)
    resent = record["outbox"][0]["message_id"]
    assert [replayed for sent, replayed in replays if sent == resent] == [False, True]

    def follow() -> None:
        for event in client.inbox(cursor=resumed.state.cursor):
            resumed.handle(event.json())
            resumed.state.cursor = event.id
            resumed.state.save()
            if done.is_set() or all(r.finished for r in resumed.state.sessions.values()):
                return

    bounded(follow)
    assert done.wait(WAIT)
    [run] = result
    assert run.code == commands.EXIT_AGREED, run.out + run.err
    assert_answered_once(run.log)


# The MCP tool server -----------------------------------------------------------------------


def _tool_json(result: Any) -> Any:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


async def call(mcp: ClientSession, name: str, **arguments: Any) -> Any:
    """What the tool ``name`` answers ``arguments`` with; an error fails the test."""
    return _tool_json(await mcp.call_tool(name, arguments))


async def commit_to_limits(mcp: ClientSession) -> str:
    """The buyer's ``constraints_commit`` to ceiling 420 and budget 400, for the SFO→JFK
    flight in at most five rounds."""
    limits = {"true_ceiling": 420, "budget_cap": 400}
    sealed = await call(mcp, "make_commitment", constraints=limits, item=SFO_JFK_ITEM, max_rounds=5)
    commitment: str = sealed["constraints_commit"]
    return commitment


async def open_session(mcp: ClientSession, merchant: Agent, commitment: str, **fields: Any) -> str:
    """A session opened through the tool with ``merchant`` for the SFO→JFK flight in USD,
    ``fields`` besides: its id."""
    opened = await call(
        mcp,
        "open_session",
        merchant_agent_id=merchant.agent_id,
        item=SFO_JFK_ITEM,
        currency="USD",
        constraints_commit=commitment,
        **fields,
    )
    session_id: str = opened["session_id"]
    return session_id


def mcp_buyer(server: LiveServer, buyer: Agent, tmp_path: Path) -> StdioServerParameters:
    """``oanp mcp`` as a buyer's tool server over stdio, its state in ``tmp_path``."""
    return StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "oanp.net.cli",
            "mcp",
            "--role",
            "buyer",
            "--state",
            str(tmp_path / "mcp.json"),
        ],
        env={
            "OANP_SERVER": server.url,
            "OANP_API_KEY": buyer.api_key,
            "OANP_AGENT_ID": buyer.agent_id,
            "PYTHONPATH": str(ROOT),
        },
        cwd=str(ROOT),
    )


def test_mcp_settle_and_reveal(live_arbiter: LiveServer, merchants: Any, tmp_path: Path) -> None:
    seller = make_agent("merchant-mcp-settle", "merchant")
    merchants(seller, tmp_path / "mcp-settle-merchant.json")
    params = mcp_buyer(live_arbiter, make_agent("buyer-llm-settle", "buyer"), tmp_path)

    async def drive() -> dict[str, Any]:
        async with stdio_client(params) as streams, ClientSession(*streams) as mcp:
            await mcp.initialize()
            tools = {tool.name for tool in (await mcp.list_tools()).tools}
            assert {"settle", "reveal"} <= tools
            commitment = await commit_to_limits(mcp)
            session_id = await open_session(mcp, seller, commitment, settlement=True)
            early = await mcp.call_tool("reveal", {"session_id": session_id})
            assert early.is_error
            assert "reveal_too_early" in early.content[0].text
            for _ in range(20):
                waited = await call(mcp, "wait_for_events", session_id=session_id, timeout_s=10)
                session = waited["session"]
                if session["your_turn"] and session["round"] == 1:
                    await call(mcp, "propose", session_id=session_id, round=1, price=320)
                elif session["your_turn"] and session["round"] == 2:
                    await call(mcp, "settle", session_id=session_id)
                elif session["outcome"] is not None:
                    break
            revealed = await call(mcp, "reveal", session_id=session_id)
            summary = (await call(mcp, "read_session", session_id=session_id))["summary"]
            return {"summary": summary, "revealed": revealed}

    result = anyio.run(drive)
    assert result["summary"]["outcome"] == {
        "result": "agreed",
        "final_price": 350,
        "close_reason": None,
    }
    assert result["revealed"]["opens"] is True


def test_mcp_server_negotiates_a_whole_session_over_stdio(
    live_arbiter: LiveServer, merchants: Any, tmp_path: Path
) -> None:
    seller = make_agent("merchant-mcp", "merchant")
    merchants(seller, tmp_path / "mcp-merchant.json")
    buyer = make_agent("buyer-llm", "buyer")
    params = mcp_buyer(live_arbiter, buyer, tmp_path)

    async def drive() -> dict[str, Any]:
        async with stdio_client(params) as streams, ClientSession(*streams) as mcp:
            await mcp.initialize()
            tools = {tool.name for tool in (await mcp.list_tools()).tools}
            assert {
                "make_commitment",
                "open_session",
                "propose",
                "counter",
                "accept",
                "withdraw",
                "read_session",
                "wait_for_events",
            } <= tools
            sealed = _tool_json(
                await mcp.call_tool(
                    "make_commitment",
                    {
                        "constraints": {"true_ceiling": 420, "budget_cap": 400},
                        "item": SFO_JFK_ITEM,
                        "max_rounds": 5,
                    },
                )
            )
            commitment = sealed["constraints_commit"]
            assert commitment.startswith("sha256:")
            # The ceiling stays home; a hash's hex digits may spell anything.
            assert set(sealed) == {"constraints_commit"}
            assert not re.search(r"(?<![\w-])420(?![\w-])", json.dumps(sealed))
            opened = _tool_json(
                await mcp.call_tool(
                    "open_session",
                    {
                        "merchant_agent_id": seller.agent_id,
                        "item": SFO_JFK_ITEM,
                        "currency": "USD",
                        "constraints_commit": commitment,
                    },
                )
            )
            session_id = opened["session_id"]
            # Refused here, with the API's code, before anything is sent.
            bad = await mcp.call_tool(
                "propose", {"session_id": session_id, "round": 1, "price": -5}
            )
            assert bad.is_error
            assert "schema_invalid" in bad.content[0].text
            # The arbiter's refusals come back with its code too: not the buyer's turn yet,
            # or (when the merchant was quick) a wrong round.
            early = await mcp.call_tool(
                "propose", {"session_id": session_id, "round": 2, "price": 300}
            )
            assert early.is_error
            assert any(c in early.content[0].text for c in ("out_of_turn", "wrong_round"))
            # An LLM's simple policy: open at 320, add 20 a round, accept a counter <= 360.
            bid, standing = 320, None
            for _ in range(20):
                waited = _tool_json(
                    await mcp.call_tool(
                        "wait_for_events", {"session_id": session_id, "timeout_s": 10}
                    )
                )
                for event in waited["events"]:
                    if event["type"] == "offer.counter":
                        standing = event["payload"]["price"]
                session = waited["session"]
                if session["outcome"] is not None:
                    break
                if not session["your_turn"]:
                    continue
                round_ = session["round"]
                if standing is not None and standing <= 360:
                    await mcp.call_tool(
                        "accept", {"session_id": session_id, "round": round_, "price": standing}
                    )
                else:
                    _tool_json(
                        await mcp.call_tool(
                            "propose", {"session_id": session_id, "round": round_, "price": bid}
                        )
                    )
                    bid += 20
            summary = _tool_json(await mcp.call_tool("read_session", {"session_id": session_id}))
            resource = await mcp.read_resource(f"oanp://sessions/{session_id}/log")
            log = json.loads(resource.contents[0].text)["entries"]
            return {"summary": summary["summary"], "log": log}

    result = anyio.run(drive)
    outcome = result["summary"]["outcome"]
    assert outcome == {"result": "agreed", "final_price": 340, "close_reason": None}
    jwks = ArbiterClient(live_arbiter.url).jwks()
    assert verify_log(result["log"], jwks).ok
    assert_answered_once(result["log"])
    assert "true_ceiling" not in json.dumps(result["log"])


def test_mcp_server_negotiates_terms_over_stdio(
    live_arbiter: LiveServer, merchants: Any, tmp_path: Path
) -> None:
    """A terms/v0.1 session through the tools: open with issues, offers with terms, the view
    showing each side's standing terms and issues_open, an accept that repeats the standing
    terms, against a merchant process that trades off its own (support matters more to it)."""
    seller = make_agent("merchant-mcp-terms", "merchant")
    merchants(seller, tmp_path / "mcp-terms-merchant.json", *MERCHANT_TERMS_FLAGS)
    params = mcp_buyer(live_arbiter, make_agent("buyer-llm-terms", "buyer"), tmp_path)

    async def drive() -> dict[str, Any]:
        async with stdio_client(params) as streams, ClientSession(*streams) as mcp:
            await mcp.initialize()
            commitment = await commit_to_limits(mcp)
            malformed = await mcp.call_tool(
                "open_session",
                {
                    "merchant_agent_id": seller.agent_id,
                    "item": SFO_JFK_ITEM,
                    "currency": "USD",
                    "constraints_commit": commitment,
                    "issues": [{"name": "price", "kind": "number"}],
                },
            )
            assert malformed.is_error
            assert "schema_invalid (400, refused locally)" in malformed.content[0].text
            session_id = await open_session(mcp, seller, commitment, max_rounds=5, issues=ISSUES)
            views: list[dict[str, Any]] = []
            accepted = None
            # An LLM's simple policy: 20 more and 3 days slower a round, standard support
            # from round 2, accept a counter at most 380 that delivers within 14 days.
            for _ in range(30):
                waited = await call(mcp, "wait_for_events", session_id=session_id, timeout_s=10)
                session = waited["session"]
                views.append(session["terms"])
                if session["outcome"] is not None:
                    break
                if not session["your_turn"]:
                    continue
                # The price to accept as the view says it on the buyer's turn: the events of
                # one wait may stop short of the counter the view already stands on.
                countered = session["allowed"]["accept_price"]
                round_, theirs = session["round"], session["terms"]["theirs"]
                if round_ == 1:
                    # Terms are required in such a session: the arbiter says which.
                    bare = await mcp.call_tool(
                        "propose", {"session_id": session_id, "round": 1, "price": 320}
                    )
                    assert bare.is_error
                    assert "bad_terms" in bare.content[0].text
                if (
                    countered is not None
                    and theirs["delivery_days"] <= 14
                    and (countered <= 380 or round_ == 5)
                ):
                    accepted = await call(
                        mcp, "accept", session_id=session_id, round=round_, price=countered
                    )
                    continue
                await call(
                    mcp,
                    "propose",
                    session_id=session_id,
                    round=round_,
                    price=320 + 20 * (round_ - 1),
                    terms={
                        "delivery_days": 2 + 3 * (round_ - 1),
                        "support": "premium" if round_ == 1 else "standard",
                    },
                )
            read = await call(mcp, "read_session", session_id=session_id)
            resource = await mcp.read_resource(f"oanp://sessions/{session_id}/log")
            log = json.loads(resource.contents[0].text)["entries"]
            return {"read": read, "log": log, "views": views, "accepted": accepted}

    result = anyio.run(drive)
    log, views = result["log"], result["views"]
    assert result["read"]["summary"]["outcome"]["result"] == "agreed"
    agreement = log[-1]["envelope"]["payload"]["agreement"]
    last_counter = [e for e in log if e["envelope"]["type"] == "offer.counter"][-1]["envelope"]
    # The accept was sent without terms: the tool repeated the merchant's standing ones.
    assert (
        result["accepted"]["entry"]["envelope"]["payload"]["terms"]
        == last_counter["payload"]["terms"]
    )
    assert agreement["final_terms"] == last_counter["payload"]["terms"]
    assert agreement["final_terms"]["delivery_days"] <= 14
    assert result["read"]["terms"]["issues_open"] == 0
    # Before any offer every issue is open and nobody stands on terms; later both do.
    assert views[0] == {"issues": ISSUES, "yours": None, "theirs": None, "issues_open": 2}
    assert any(v["yours"] and v["theirs"] for v in views)
    assert verify_log(log, ArbiterClient(live_arbiter.url).jwks()).ok
    assert_answered_once(log)


def test_a_merchant_process_declines_a_currency_it_holds_no_limits_in(
    live_arbiter: LiveServer, merchants: Any, tmp_path: Path
) -> None:
    seller = make_agent("merchant-usd", "merchant")
    merchant = merchants(seller, tmp_path / "usd.json")  # --floor 280 --ideal 400, in USD
    buyer = make_agent("buyer-yen", "buyer")
    run = negotiate(
        live_arbiter.url, buyer, seller.agent_id, tmp_path, *LIMIT_FLAGS, "--currency", "JPY"
    )
    assert run.code == commands.EXIT_NO_AGREEMENT, run.out + run.err
    assert "withdrawn_by_merchant" in run.out
    # Before any ack or counter: 280 is no yen floor.
    assert [e["type"] for e in merchant_envelopes(run.log)] == ["session.close"]
    merchant.wait_for(lambda line: "declined, it holds no limits in JPY" in line)
