"""The protocol core stays a library anyone can embed: no Django, no network on import."""

from __future__ import annotations

import subprocess
import sys

import pytest

# The stdlib's socket module is not on the list: joserfc's imports load it without using it.
FORBIDDEN = ("django", "channels", "celery", "rest_framework", "httpx", "requests", "mcp")


def loaded_by(module: str, modules: tuple[str, ...] = ()) -> str:
    """What importing ``module`` in a fresh interpreter loads of the forbidden packages and
    of ``modules``, comma-separated ("" for nothing)."""
    probe = (
        f"import sys, {module}\n"
        f"loaded = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r}"
        f" or m in {modules!r})\n"
        "print(','.join(loaded))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


@pytest.mark.parametrize(
    "module",
    [
        "oanp.wire.machine",
        "oanp.audit.invariants",
        "oanp.audit",
        "oanp.agents.parties",
        "oanp.agents.rehearsal",
        "oanp.tlog",
    ],
)
def test_importing_the_core_loads_no_framework(module):
    assert loaded_by(module) == ""
