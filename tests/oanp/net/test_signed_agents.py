"""Signing agents over a live arbiter (docs/protocol.md §17): keys made by ``oanp keygen``,
``oanp negotiate --signing-key`` against an ``oanp merchant --signing-key`` process, and ``oanp
mcp --signing-key`` driven by the MCP SDK's client. Both owners require signatures, so an
unsigned envelope would be refused; every party entry of the log carries a signature that an
outside JOSE library (jwcrypto, over an outside JCS) verifies with the keys the arbiter lists
for its sender."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import anyio
import pytest
import rfc8785
from jwcrypto import jwk as outside_jwk
from jwcrypto import jws as outside_jws
from mcp import ClientSession, StdioServerParameters, stdio_client

from arbiter_app import services
from oanp.net import cli, commands
from tests.conftest import LiveServer
from tests.support.factories.agents import SFO_JFK_ITEM, Agent, make_agent
from tests.support.processes import ROOT
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

#: Every wait is bounded: a condition not met by then fails the test.
WAIT = 30.0


def keygen(path: Path, *flags: str) -> dict[str, Any]:
    """A key made by ``oanp keygen --out path``: the public JWK it prints."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(["keygen", "--out", str(path), *flags])
    assert code == 0, err.getvalue()
    public: dict[str, Any] = json.loads(out.getvalue())
    return public


def signing_agent(agent_id: str, role: str) -> Agent:
    """An agent whose owner requires every envelope of it signed."""
    agent = make_agent(agent_id, role)
    services.require_signatures(agent_id=agent_id, required=True)
    return agent


def published_keys(server: LiveServer, asker: Agent, agent_id: str) -> dict[str, dict[str, Any]]:
    """``agent_id``'s keys as ``GET /agents/{agent_id}/keys`` lists them, by kid."""
    with server.client(headers={"Authorization": f"Bearer {asker.api_key}"}) as http:
        response = http.get(f"/oanp/v0.1/agents/{agent_id}/keys")
    assert response.status_code == 200, response.text
    return {key["kid"]: key for key in response.json()["keys"]}


def signer(envelope: dict[str, Any], keys: dict[str, dict[str, Any]]) -> str:
    """The kid of ``keys`` whose key signed ``envelope``, checked by jwcrypto over the JCS
    bytes of the envelope without its signature; a signature it refuses fails the test."""
    header_b64, payload_b64, signature_b64 = envelope["signature"].split(".")
    assert payload_b64 == ""  # detached
    header = json.loads(base64.urlsafe_b64decode(header_b64 + "=" * (-len(header_b64) % 4)))
    assert set(header) == {"alg", "kid", "typ"}
    assert header["typ"] == "oanp-envelope+jws"
    key = keys[header["kid"]]
    content = rfc8785.dumps({k: v for k, v in envelope.items() if k != "signature"})
    payload = base64.urlsafe_b64encode(content).rstrip(b"=").decode()
    token = outside_jws.JWS()
    token.deserialize(f"{header_b64}.{payload}.{signature_b64}")
    token.allowed_algs = [header["alg"]]
    public = {k: v for k, v in key.items() if k not in ("registered_at", "retired_at")}
    token.verify(outside_jwk.JWK(**public))
    kid: str = header["kid"]
    return kid


def answer(result: Any) -> Any:
    """A tool's answer as JSON; an error fails the test."""
    assert not result.is_error, result.content
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


class MerchantProcess:
    """An ``oanp merchant`` subprocess; its output lines are collected as they come."""

    def __init__(self, argv: list[str]) -> None:
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def following(self) -> bool:
        """the merchant follows its inbox"""
        return any("following its inbox" in line for line in self.lines)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


@pytest.fixture
def merchant_processes() -> Iterator[list[MerchantProcess]]:
    started: list[MerchantProcess] = []
    yield started
    for merchant in started:
        merchant.stop()


def test_negotiate_and_merchant_sign_every_envelope_with_their_key_files(
    live_arbiter: LiveServer,
    merchant_processes: list[MerchantProcess],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    buyer = signing_agent("buyer-signing", "buyer")
    seller = signing_agent("merchant-signing", "merchant")
    buyer_public = keygen(tmp_path / "buyer.jwk")
    seller_public = keygen(tmp_path / "merchant.jwk", "--alg", "ES256")
    connection = ["--server", live_arbiter.url]
    merchant = MerchantProcess(
        [
            sys.executable,
            "-m",
            "oanp.net.cli",
            "merchant",
            *connection,
            "--api-key",
            seller.api_key,
            "--agent-id",
            seller.agent_id,
            "--floor",
            "280",
            "--ideal",
            "400",
            "--state",
            str(tmp_path / "merchant-state.json"),
            "--signing-key",
            str(tmp_path / "merchant.jwk"),
        ]
    )
    merchant_processes.append(merchant)
    wait_for(merchant.following, WAIT, message=lambda: "\n".join(merchant.lines))

    log_path = tmp_path / "log.json"
    argv = [
        "negotiate",
        *connection,
        "--api-key",
        buyer.api_key,
        "--agent-id",
        buyer.agent_id,
        "--merchant",
        seller.agent_id,
        "--item",
        json.dumps(SFO_JFK_ITEM),
        "--ceiling",
        "420",
        "--budget",
        "400",
        "--signing-key",
        str(tmp_path / "buyer.jwk"),
        "--save-log",
        str(log_path),
    ]
    codes: list[int] = []
    # In a thread, so that a negotiation stuck on the arbiter fails the test, not hangs it.
    thread = threading.Thread(target=lambda: codes.append(cli.main(argv)), daemon=True)
    thread.start()
    thread.join(WAIT)
    printed = capsys.readouterr()
    assert not thread.is_alive(), "still negotiating:\n" + printed.out + printed.err
    assert codes == [commands.EXIT_AGREED], printed.out + printed.err
    assert "VERIFIED against the arbiter's JWKS" in printed.out

    log = json.loads(log_path.read_text())
    assert log[-1]["envelope"]["type"] == "session.agree"
    published = {
        agent.agent_id: published_keys(live_arbiter, buyer, agent.agent_id)
        for agent in (buyer, seller)
    }
    # Each command registered the public key keygen printed, and nothing more.
    assert list(published[buyer.agent_id]) == [buyer_public["kid"]]
    assert list(published[seller.agent_id]) == [seller_public["kid"]]
    party_entries = [e for e in log if e["envelope"]["sender"]["role"] != "arbiter"]
    assert {e["envelope"]["sender"]["role"] for e in party_entries} == {"buyer", "merchant"}
    assert len(party_entries) >= 5
    for entry in party_entries:
        envelope = entry["envelope"]
        sender = envelope["sender"]["agent_id"]
        assert (
            signer(envelope, published[sender])
            == (buyer_public if sender == buyer.agent_id else seller_public)["kid"]
        )


def test_the_mcp_server_registers_its_key_and_signs_what_the_tools_send(
    live_arbiter: LiveServer, tmp_path: Path
) -> None:
    buyer = signing_agent("buyer-mcp-signing", "buyer")
    seller = make_agent("merchant-mcp-signing", "merchant")
    public = keygen(tmp_path / "buyer.jwk", "--alg", "ES256")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "oanp.net.cli", "mcp", "--role", "buyer"],
        env={
            "OANP_SERVER": live_arbiter.url,
            "OANP_API_KEY": buyer.api_key,
            "OANP_AGENT_ID": buyer.agent_id,
            "OANP_SIGNING_KEY": str(tmp_path / "buyer.jwk"),
            "PYTHONPATH": str(ROOT),
        },
        cwd=str(ROOT),
    )

    async def drive() -> list[dict[str, Any]]:
        async with stdio_client(params) as streams, ClientSession(*streams) as mcp:
            await mcp.initialize()
            sealed = answer(
                await mcp.call_tool(
                    "make_commitment",
                    {"constraints": {"true_ceiling": 420}, "item": SFO_JFK_ITEM, "max_rounds": 5},
                )
            )
            opened = answer(
                await mcp.call_tool(
                    "open_session",
                    {
                        "merchant_agent_id": seller.agent_id,
                        "item": SFO_JFK_ITEM,
                        "currency": "USD",
                        "constraints_commit": sealed["constraints_commit"],
                    },
                )
            )
            session_id = opened["session_id"]
            answer(await mcp.call_tool("withdraw", {"session_id": session_id}))
            resource = await mcp.read_resource(f"oanp://sessions/{session_id}/log")
            entries: list[dict[str, Any]] = json.loads(resource.contents[0].text)["entries"]
            return entries

    log = anyio.run(drive)
    keys = published_keys(live_arbiter, seller, buyer.agent_id)
    assert list(keys) == [public["kid"]]
    mine = [e["envelope"] for e in log if e["envelope"]["sender"]["role"] == "buyer"]
    assert [e["type"] for e in mine] == ["session.open", "session.close"]
    assert [signer(envelope, keys) for envelope in mine] == [public["kid"]] * 2
