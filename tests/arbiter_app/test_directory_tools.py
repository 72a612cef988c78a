"""The directory from an agent's side, against a live arbiter: ``oanp merchants`` and the MCP
tool ``find_merchants``, both reading every page the arbiter links to."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from arbiter_app.api.views import MERCHANTS_PAGE_SIZE
from oanp.net import cli, commands
from tests.conftest import ROOT, LiveServer
from tests.support.factories.agents import Agent, list_merchant, make_agent

pytestmark = pytest.mark.django_db(transaction=True)

WAIT = 30.0
ROUTE = {"route": "SFO-JFK", "cabin": "economy"}


def oanp_merchants(server: LiveServer, agent: Agent, *flags: str) -> tuple[int, str, str]:
    """``oanp merchants`` in this process, with its own output streams."""
    args = cli._parser().parse_args(
        ["merchants", "--server", server.url, "--api-key", agent.api_key, *flags]
    )
    out, err = io.StringIO(), io.StringIO()
    code = commands.run_command(args, out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def directory(live_arbiter: LiveServer) -> list[str]:
    """More listed merchants than one page holds, one of them selling flights out of SFO."""
    names = [f"shop-{n:03d}" for n in range(MERCHANTS_PAGE_SIZE + 2)]
    for name in names:
        make_agent(name, "merchant")
        list_merchant(name, merchant=f"Shop {name[-3:]}", description="Souvenirs")
    make_agent("skyways-sfo", "merchant")
    list_merchant(
        "skyways-sfo",
        merchant="Skyways",
        description="Nonstop flights out of SFO, changes free, meals included on every route",
        currencies=["USD", "EUR"],
        catalog=[ROUTE, {"route": "SFO-LAX"}],
    )
    return sorted([*names, "skyways-sfo"])


def test_oanp_merchants_prints_every_page_as_a_table(
    live_arbiter: LiveServer, directory: list[str]
) -> None:
    buyer = make_agent("buyer-cli", "buyer")
    code, out, err = oanp_merchants(live_arbiter, buyer)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].split() == ["AGENT", "ID", "MERCHANT", "CURRENCIES", "ITEMS", "DESCRIPTION"]
    assert [line.split()[0] for line in lines[1:-1]] == directory
    assert lines[-1] == f"{len(directory)} merchant agents"
    skyways = next(line for line in lines if line.startswith("skyways-sfo"))
    assert skyways.split()[1:5] == ["Skyways", "USD", "EUR", "2"]
    # A long description is cut to the table's width.
    assert skyways.endswith("…")
    assert "every route" not in skyways


def test_oanp_merchants_searches_and_prints_json(
    live_arbiter: LiveServer, directory: list[str]
) -> None:
    buyer = make_agent("buyer-cli", "buyer")
    code, out, _ = oanp_merchants(live_arbiter, buyer, "--q", "sfo-JFK", "--json")
    assert code == 0
    [entry] = json.loads(out)
    assert entry["agent_id"] == "skyways-sfo"
    assert entry["catalog"] == [ROUTE, {"route": "SFO-LAX"}]
    code, out, _ = oanp_merchants(live_arbiter, buyer, "--q", "ferries")
    assert (code, out) == (0, "no merchant agent matches 'ferries'\n")
    code, out, _ = oanp_merchants(live_arbiter, buyer, "--json", "--q", "souvenirs")
    assert len(json.loads(out)) == len(directory) - 1


def test_oanp_merchants_refuses_bad_flags_and_reports_refusals(live_arbiter: LiveServer) -> None:
    buyer = make_agent("buyer-cli", "buyer")
    code, out, err = oanp_merchants(live_arbiter, buyer, "--q", "x" * 201)
    assert (code, out) == (2, "")
    assert err == "oanp merchants: --q must be at most 200 characters\n"
    code, _, err = oanp_merchants(live_arbiter, buyer, "--q", "tab\there")
    assert code == 2
    assert "control character U+0009" in err
    forged = Agent("nobody", "buyer", "oanp_abc_forged")
    code, out, err = oanp_merchants(live_arbiter, forged)
    assert (code, out) == (1, "")
    assert err.startswith("oanp merchants: the arbiter refused: unauthorized (401)")


def test_the_console_command_needs_a_key(live_arbiter: LiveServer) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "oanp.net.cli", "merchants", "--server", live_arbiter.url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=WAIT,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 2
    assert done.stderr == "oanp merchants: --api-key (or OANP_API_KEY) is required\n"


def _tool_json(result: Any) -> Any:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


def test_an_llm_finds_a_merchant_and_opens_a_session_with_it(
    live_arbiter: LiveServer, directory: list[str]
) -> None:
    buyer = make_agent("buyer-llm", "buyer")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "oanp.net.cli", "mcp", "--role", "buyer"],
        env={
            "OANP_SERVER": live_arbiter.url,
            "OANP_API_KEY": buyer.api_key,
            "OANP_AGENT_ID": buyer.agent_id,
            "PYTHONPATH": str(ROOT),
        },
        cwd=str(ROOT),
    )

    async def drive() -> dict[str, Any]:
        async with stdio_client(params) as streams, ClientSession(*streams) as mcp:
            await mcp.initialize()
            tools = {tool.name: tool for tool in (await mcp.list_tools()).tools}
            assert tools["find_merchants"].input_schema["properties"]["q"]["type"] == "string"
            everyone = _tool_json(await mcp.call_tool("find_merchants", {}))["merchants"]
            assert [m["agent_id"] for m in everyone] == directory
            [found] = _tool_json(await mcp.call_tool("find_merchants", {"q": "Nonstop"}))[
                "merchants"
            ]
            # Refused here with the API's code, before anything is sent.
            bad = await mcp.call_tool("find_merchants", {"q": "line\nbreak"})
            assert bad.is_error
            assert "schema_invalid" in bad.content[0].text
            assert "refused locally" in bad.content[0].text
            wrong = await mcp.call_tool("find_merchants", {"q": 42})
            assert wrong.is_error
            item = found["catalog"][0]
            sealed = _tool_json(
                await mcp.call_tool(
                    "make_commitment",
                    {"constraints": {"true_ceiling": 420, "budget_cap": 400}, "item": item},
                )
            )
            opened = _tool_json(
                await mcp.call_tool(
                    "open_session",
                    {
                        "merchant_agent_id": found["agent_id"],
                        "item": item,
                        "currency": found["currencies"][0],
                        "constraints_commit": sealed["constraints_commit"],
                    },
                )
            )
            return {"found": found, "opened": opened}

    result = anyio.run(drive)
    assert result["found"]["merchant"] == "Skyways"
    session = result["opened"]["session"]
    assert (session["merchant"]["agent_id"], session["currency"]) == ("skyways-sfo", "USD")
    assert session["item"] == ROUTE
