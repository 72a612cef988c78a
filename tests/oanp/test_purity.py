"""The protocol core stays a library anyone can embed: no Django, no network on import."""

from __future__ import annotations

import subprocess
import sys

import pytest

# The stdlib's socket module is not on the list: joserfc's imports load it without using it.
FORBIDDEN = ("django", "channels", "celery", "rest_framework", "httpx", "requests", "mcp")


@pytest.mark.parametrize(
    "module", ["oanp.machine", "oanp.invariants", "oanp.audit", "oanp.agents", "oanp.rehearsal"]
)
def test_importing_the_core_loads_no_framework(module):
    probe = (
        f"import sys, {module}\n"
        f"loaded = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})\n"
        "print(','.join(loaded))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""
