"""What the dashboard's lists filter sessions by: state, verdicts, time range. Verdicts are
counted on the session row as they are appended, so no filter reads entries."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Q

from arbiter_app.models import VERDICT_COUNTS
from oanp.machine import Phase
from oanp.profiles import VerdictStatus

#: The phases a stored session can be in: EVALUATING lasts only within the step ending a round.
STATES = tuple(phase.value for phase in Phase if phase is not Phase.EVALUATING)
FILTERS = ("state", "merchant", "agent", "verdict", "violation", "range", "q")
RANGES = {"1h": timedelta(hours=1), "24h": timedelta(days=1), "7d": timedelta(days=7)}

#: The filter of the sessions with a round judged each way, from the row's verdict counts.
JUDGED = {status: Q(**{f"{column}__gt": 0}) for status, column in VERDICT_COUNTS.items()}
VERDICTS = tuple(JUDGED)
VIOLATED = JUDGED[VerdictStatus.VIOLATED.value]
