"""Whether a process still runs, for files named after the process that owns them (the
embedded broker's claims, the metrics folder's counters)."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True
