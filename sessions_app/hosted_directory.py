"""Whether a merchant agent is hosted, as this process read it within the last second.

Every buyer's move asks it after its commit (:mod:`sessions_app.hosted_agents`), so the answer
is kept per agent for :data:`REMEMBER_SECONDS` rather than read once per envelope. A profile
saved or deleted in this process is forgotten at once; one changed in another process is seen
within the second. A move that meanwhile found its merchant hosted when it no longer is queues
an answer that finds nothing to do; one that found it not hosted when it now is gets its answer
from the sweep (``sweep_answers``), within its grace.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from sessions_app.models import AgentProfile, Mode

#: How long a process trusts what it read of one agent.
REMEMBER_SECONDS = 1.0
#: Past this many agents, the memory starts over.
MAX_AGENTS = 10_000


@dataclass(frozen=True, slots=True)
class Hosting:
    """A hosted merchant agent, as far as its answers and reveals go."""

    reveal_after_end: bool


_lock = threading.Lock()
_read: dict[str, tuple[float, Hosting | None]] = {}


def hosting(agent_id: str) -> Hosting | None:
    """The hosting of ``agent_id``, or ``None`` when it is not a hosted agent."""
    now = time.monotonic()
    with _lock:
        hit = _read.get(agent_id)
    if hit is not None and hit[0] > now:
        return hit[1]
    found = (
        AgentProfile.objects.filter(agent_id=agent_id, mode=Mode.HOSTED)
        .values_list("reveal_after_end", flat=True)
        .first()
    )
    answer = None if found is None else Hosting(reveal_after_end=found)
    with _lock:
        if len(_read) >= MAX_AGENTS:
            _read.clear()
        _read[agent_id] = (now + REMEMBER_SECONDS, answer)
    return answer


def forget(sender: Any, *, instance: AgentProfile, **_: Any) -> None:
    """Receiver of ``post_save`` and ``post_delete`` of :class:`AgentProfile`."""
    with _lock:
        _read.pop(instance.agent_id, None)
