"""The arbiter's Prometheus metrics, counted where things happen.

Counters and histograms are prometheus-client's multiprocess kind: each server, worker and
beat process writes its own file under ``PROMETHEUS_MULTIPROC_DIR`` and a scrape of
``/metrics`` (:mod:`arbiter_app.health`) adds them up. Figures that are a fact of the database
or the broker (sessions by phase, queue depth) are read at scrape time instead.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from prometheus_client import Counter, Gauge, Histogram, values

# Settings name the folder before this import; a process that imported prometheus-client
# earlier would count only for itself, silently. Say so at start instead.
if values.ValueClass is values.MutexValue:
    raise ImproperlyConfigured(
        "prometheus-client was imported before PROMETHEUS_MULTIPROC_DIR was set; "
        "this process's counters would never reach /metrics"
    )

ENVELOPES = Counter(
    "oanp_envelopes",
    "Party envelopes received, by type and outcome (accepted, replayed, refused).",
    ["type", "outcome"],
)
REFUSALS = Counter(
    "oanp_refusals", "HTTP requests refused with a problem document, by its code.", ["code"]
)
VERDICTS = Counter("oanp_verdicts", "Round verdicts issued, by status.", ["status"])
TIMER_LATENESS = Histogram(
    "oanp_timer_lateness_seconds",
    "How long after its due time a timer closed its session.",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900),
)
DELIVERIES = Counter(
    "oanp_deliveries",
    "Outbound POSTs, by kind (handoff: ACP checkout; callback: an agent's entry) and outcome "
    "(delivered, retry, rejected, gone; abandoned: the worker stopped before an answer).",
    ["kind", "outcome"],
)
REQUEST_SECONDS = Histogram(
    "oanp_request_duration_seconds",
    "Time to answer an HTTP request (for an event stream: to its first byte), by route.",
    ["method", "route", "status"],
)
TASKS = Counter("oanp_tasks", "Background tasks run, by task and outcome.", ["task", "outcome"])
INTEGRITY_MISMATCHES = Gauge(
    "oanp_integrity_mismatches",
    "Open integrity alarms: sessions whose row and log disagreed at the last check.",
    # Set by whichever worker ran the last check; that value stands until the next one.
    multiprocess_mode="mostrecent",
)


def at_zero(counter: Counter, **values: Iterable[str]) -> None:
    """Create every child of ``counter`` over the label ``values`` given, each at zero.

    A child otherwise appears at its first count, so ``rate`` and ``increase`` miss that first
    event (there is no earlier sample to compare it with) and an alert on it never fires; in
    multiprocess mode creating the child writes its zero to this process's file, which the
    scrape adds up like any other."""
    names = list(values)
    for combination in itertools.product(*values.values()):
        counter.labels(**dict(zip(names, combination, strict=True)))


def count_envelope(type_: str, outcome: str) -> None:
    ENVELOPES.labels(type=type_, outcome=outcome).inc()


def count_verdicts(*, entries: Sequence[dict[str, Any]], **kwargs: Any) -> None:
    """A receiver of ``entries_committed``: verdicts count once they are committed."""
    for entry in entries:
        envelope = entry["envelope"]
        if envelope["type"] == "round.verdict":
            VERDICTS.labels(status=envelope["payload"]["status"]).inc()
