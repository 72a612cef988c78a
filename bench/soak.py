"""soak: faults a deployment meets, played on a whole one (``make soak``, ``python -m bench
--soak``), with the figures that say whether it kept its promises.

One deployment on this machine (:mod:`bench.deployment`): a fresh PostgreSQL database of the
soak's own, a Redis server of its own that keeps nothing, and the Procfile's processes (web,
timers, hosted, worker, beat) under ``make serve``'s supervisor, on the product's settings but
for the rate limit (raised, so that the steady buyer is never refused) and loopback callback
targets (allowed, so that the slow merchant can live on this machine). Three scenarios in turn:

- Redis blips under load: a buyer opens sessions over HTTP at a steady pace, each with a short
  deadline that only the timers close (the merchant never answers); Redis is killed several
  times for a few seconds, and started again with nothing of what it held. Then: how often a
  process was started again, sessions opened, closed and left open, the lateness of the
  deadlines that fell around the outages and of all of them, and the HTTP answers the buyer got
  while Redis was away.
- A slow merchant: an agent's callback answering each POST after 9 s (under the 10 s delivery
  timeout) is owed a dozen deliveries, while another buyer opens 20 sessions with 10 s
  deadlines. Before each kind of work had its own queue, those timers waited behind the
  deliveries on the worker's threads and fired 44.5 to 45.1 s late.
- A crowd of 1,000 deadlines at one instant, on the Procfile's timers worker.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from bench.deployment import WORKERS, Deployment, RedisServer, procfile, redis_server
from bench.drive import (
    Opened,
    Pace,
    SlowReceiver,
    Window,
    headers,
    lateness_s,
    open_sessions,
    spread,
    statuses,
)
from bench.report import Options, Row, Section, SectionResult, judged
from bench.service import bench_database, fresh_database, prepare, server_environment
from tests.support.processes import ROOT, free_port, run_json
from tests.support.waiting import wait_for

TITLE = "faults a deployment meets: Redis killed under load, a slow merchant, a crowd of deadlines"
#: Deadlines due from an outage's start to this long after Redis answered again count as
#: falling around it: the time the workers take to find the broker again and re-arm.
AROUND_S = 10.0
#: How long past the last deadline the soak waits for every session to close: the timer sweep
#: (every 30 s by default) backs up any timer task that was lost.
CLOSE_WAIT_S = 60.0
#: What the probe measured before each kind of work had a queue of its own.
PROBE_LATE_S = "44.5–45.1 s"


@dataclass(frozen=True)
class Size:
    #: Daphne processes of the web; None for the Procfile's default (two per core).
    web_concurrency: int | None
    rate_per_s: float
    deadline_s: float
    blips: int
    outage_s: float
    gap_s: float
    lead_in_s: float
    slow_delay_s: float
    slow_sessions: int
    bystanders: int
    bystander_deadline_s: float
    crowd: int
    crowd_lead_s: float


FULL = Size(
    web_concurrency=None,
    rate_per_s=4,
    deadline_s=5,
    blips=3,
    outage_s=6,
    gap_s=20,
    lead_in_s=10,
    slow_delay_s=9,
    slow_sessions=12,
    bystanders=20,
    bystander_deadline_s=10,
    crowd=1_000,
    crowd_lead_s=20,
)
QUICK = Size(
    web_concurrency=1,
    rate_per_s=3,
    deadline_s=2,
    blips=1,
    outage_s=2,
    gap_s=4,
    lead_in_s=2,
    slow_delay_s=2,
    slow_sessions=4,
    bystanders=4,
    bystander_deadline_s=3,
    crowd=30,
    crowd_lead_s=3,
)


def say(message: str) -> None:
    print(f"bench: soak: {message}", file=sys.stderr, flush=True)


def closes(env: dict[str, str], prefix: str) -> dict[str, Any]:
    found: dict[str, Any] = run_json(env, "bench.jobs", "closes", prefix)
    return found


def all_closed(env: dict[str, str], prefix: str, last_due: datetime) -> dict[str, Any]:
    """The sessions of ``prefix`` once none is open, waiting at most :data:`CLOSE_WAIT_S`
    past ``last_due``; as they stand then, if some are still open."""
    time.sleep(max(0.0, (last_due - datetime.now(UTC)).total_seconds()) + 1)
    give_up = time.monotonic() + CLOSE_WAIT_S
    while (found := closes(env, prefix))["open"] and time.monotonic() < give_up:
        time.sleep(2)
    return found


def accepted(opened: Iterable[Opened]) -> list[Opened]:
    return [o for o in opened if o.status == "201"]


def held(outages: Iterable[Window], moment: datetime) -> bool:
    return any(w.holds(moment) for w in outages)


def reconnected_s(connections: Iterable[datetime], outage: Window) -> float | None:
    """How long after Redis answered again a worker connected to it; None if it never did.
    Redis is asked every 50 ms, so a worker may connect just before it is seen to answer: 0."""
    after = [c for c in connections if c >= outage.start]
    return max(0.0, round((min(after) - outage.end).total_seconds(), 2)) if after else None


# Redis blips under load ------------------------------------------------------------------------


def blips(
    deployment: Deployment, redis: RedisServer, pair: dict[str, str], size: Size
) -> dict[str, Any]:
    outages: list[Window] = []
    pace = Pace(deployment.url, pair, tag="blip", rate=size.rate_per_s, deadline_s=size.deadline_s)
    with pace:
        time.sleep(size.lead_in_s)
        for number in range(size.blips):
            down = datetime.now(UTC)
            redis.kill()
            say(f"Redis killed ({number + 1} of {size.blips})")
            time.sleep(size.outage_s)
            redis.start()
            outages.append(Window(down, datetime.now(UTC)))
            time.sleep(size.gap_s)
    opened = pace.opened
    taken = accepted(opened)
    found = all_closed(deployment.env, "blip-", max(o.due for o in taken))
    late = lateness_s(taken, found["closes"])
    around = [
        late[o.session_id]
        for o in taken
        if o.session_id in late
        and any(w.start <= o.due <= w.end + timedelta(seconds=AROUND_S) for w in outages)
    ]
    during = [o for o in opened if held(outages, o.sent_at)]
    away = [late[o.session_id] for o in taken if o.session_id in late and held(outages, o.due)]
    back = {
        name: [reconnected_s(deployment.connected(name), w) for w in outages] for name in WORKERS
    }
    return {
        "outages": len(outages),
        "down_s": size.outage_s,
        "outage_s": [round((w.end - w.start).total_seconds(), 2) for w in outages],
        "gap_s": size.gap_s,
        "rate_per_s": size.rate_per_s,
        "deadline_s": size.deadline_s,
        "opened": len(opened),
        "accepted": len(taken),
        "sessions": found["sessions"],
        "closed": len(found["closes"]),
        "left_open": found["open"],
        "close_reasons": found["reasons"],
        "statuses": statuses(opened),
        "statuses_during_outages": statuses(during),
        "lateness_around_blips": spread(around),
        "lateness_due_while_away": spread(away),
        "worker_back_after_redis_s": back,
        "lateness_all": spread(list(late.values())),
    }


# A slow merchant -------------------------------------------------------------------------------


def slow_merchant(
    deployment: Deployment, slow: dict[str, str], bystander: dict[str, str], size: Size
) -> dict[str, Any]:
    url = deployment.url
    with SlowReceiver(size.slow_delay_s) as receiver:
        registered = httpx.put(
            f"{url}/oanp/v0.1/callback",
            content=json.dumps({"url": receiver.url}),
            headers=headers(slow["buyer_key"]),
            timeout=30,
        )
        if registered.status_code != 200:
            raise RuntimeError(f"the callback was refused: {registered.text}")
        started = time.monotonic()
        # Each opening is an entry of the slow buyer's: one delivery to its callback. Their
        # deadlines lie past the scenario, so no close adds another.
        owed = open_sessions(url, slow, (f"slow-{n:03d}" for n in range(size.slow_sessions)), 3600)
        waiting = open_sessions(
            url,
            bystander,
            (f"by-{n:03d}" for n in range(size.bystanders)),
            size.bystander_deadline_s,
        )
        found = all_closed(deployment.env, "by-", max(o.due for o in accepted(waiting)))
        wait_for(
            lambda: receiver.received >= len(accepted(owed)),
            size.slow_sessions * size.slow_delay_s + CLOSE_WAIT_S,
            interval=0.5,
            error=RuntimeError,
            message=lambda: f"{receiver.received} of {len(owed)} deliveries arrived",
        )
    late = lateness_s(accepted(waiting), found["closes"])
    return {
        "delay_s": size.slow_delay_s,
        "slow_sessions": len(accepted(owed)),
        "deliveries": receiver.received,
        "most_in_flight": receiver.most_in_flight,
        "delivered_s": round(receiver.last_answered_at - started, 2),
        "bystanders": len(accepted(waiting)),
        "bystander_deadline_s": size.bystander_deadline_s,
        "bystanders_left_open": found["open"],
        "lateness": spread(list(late.values())),
    }


# The deployment and the section ----------------------------------------------------------------


def measure(size: Size, name: str) -> dict[str, Any]:
    database = bench_database(name)
    port = free_port()
    folder = ROOT / "var" / f"soak-{os.getpid()}"
    with redis_server() as redis, fresh_database(database) as version:
        env = {
            **server_environment(database, port),
            "REDIS_URL": redis.url,
            "OANP_ALLOW_PRIVATE_TARGETS": "true",
        }
        if size.web_concurrency is not None:
            env["WEB_CONCURRENCY"] = str(size.web_concurrency)
        load, slow, bystander = prepare(env, 3)
        try:
            with procfile(env, port, folder) as deployment:
                say("Redis blips under load")
                figures: dict[str, Any] = {"blips": blips(deployment, redis, load, size)}
                say("a slow merchant")
                figures["slow_merchant"] = slow_merchant(deployment, slow, bystander, size)
                say(f"a crowd of {size.crowd} deadlines")
                crowd = run_json(
                    deployment.env,
                    "bench.jobs",
                    "timers-lateness",
                    str(size.crowd),
                    "0",
                    str(size.crowd_lead_s),
                    "crowd",
                )
                figures["crowd"] = {
                    "sessions": crowd["sessions"],
                    "closed": crowd["closed"],
                    "lead_s": size.crowd_lead_s,
                    "armed_after_due": crowd["armed_after_first_due"],
                    "lateness": spread(crowd["lateness_s"]),
                    "all_seen_closed_ms": crowd["all_seen_closed_s"] * 1000,
                }
                figures["processes"] = {
                    "restarts": deployment.restarts(),
                    "alive_at_end": deployment.alive(),
                    "status": deployment.status()["processes"],
                }
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    figures["deployment"] = {
        "procfile": (ROOT / "Procfile").read_text().splitlines(),
        "web_processes": size.web_concurrency or "the Procfile's default, two per core",
        "postgresql": version,
        "redis": "a redis-server of the soak's own, --save '' (a restart loses everything)",
    }
    return figures


def _ms(spread_: dict[str, Any]) -> str:
    if not spread_["count"]:
        return "none"
    return " / ".join(f"{spread_[k]:,.0f}" for k in ("p50_ms", "p99_ms", "max_ms")) + " ms"


def _seconds(value: float | None) -> str:
    return "never" if value is None else f"{value:.1f}"


def _counts(counted: dict[str, int]) -> str:
    return ", ".join(f"{key}: {value}" for key, value in counted.items()) or "none"


def rows_for(figures: dict[str, Any]) -> list[Row]:
    restarts = figures["processes"]["restarts"]
    restarted = sum(restarts.values())
    blip = figures["blips"]
    slow = figures["slow_merchant"]
    crowd = figures["crowd"]
    outages = f"Redis killed {blip['outages']}× for {blip['down_s']:g} s"
    during = blip["statuses_during_outages"]
    return [
        Row(
            f"{outages} under load: processes started again",
            str(restarted),
            f"each process: {_counts(restarts)}; every one running at the end: "
            f"{'yes' if figures['processes']['alive_at_end'] else 'no'}",
            judged("none", restarted == 0 and figures["processes"]["alive_at_end"]),
        ),
        Row(
            f"{outages}: sessions opened / closed / left open",
            f"{blip['accepted']} / {blip['closed']} / {blip['left_open']}",
            f"opened over HTTP at {blip['rate_per_s']:g}/s with {blip['deadline_s']:g} s "
            f"deadlines, closed by the timers ({_counts(blip['close_reasons'])}); "
            f"{blip['opened'] - blip['accepted']} openings refused",
            judged("none left open", blip["left_open"] == 0),
        ),
        Row(
            f"{outages}: deadline lateness around the outages, p50 / p99 / max",
            _ms(blip["lateness_around_blips"]),
            f"{blip['lateness_around_blips']['count']} deadlines due from a kill to "
            f"{AROUND_S:g} s after Redis was back; of them the "
            f"{blip['lateness_due_while_away']['count']} due while it was away: "
            f"{_ms(blip['lateness_due_while_away'])}; all {blip['lateness_all']['count']}: "
            f"{_ms(blip['lateness_all'])}",
        ),
        Row(
            f"{outages}: the workers connected again, seconds after Redis answered",
            "; ".join(
                f"{name} {', '.join(_seconds(s) for s in each)}"
                for name, each in blip["worker_back_after_redis_s"].items()
            ),
            "a worker tries a lost broker again every second or two (oanp_site.celery.Consumer; "
            "Celery's own steps, 2, 4, 6 s …, could miss Redis's return by most of one); the "
            "timers worker re-arms its timers from the database once connected",
        ),
        Row(
            f"{outages}: answers to openings sent while Redis was away",
            _counts(during),
            f"the whole run: {_counts(blip['statuses'])}",
            judged("no 500", "500" not in during),
        ),
        Row(
            f"slow merchant: lateness of {slow['bystanders']} sessions' "
            f"{slow['bystander_deadline_s']:g} s deadlines, p50 / p99 / max",
            _ms(slow["lateness"]),
            f"meanwhile {slow['deliveries']} callback deliveries to a receiver answering each "
            f"after {slow['delay_s']:g} s; before the queues were split: {PROBE_LATE_S} late",
        ),
        Row(
            "slow merchant: its deliveries in flight at once, at most",
            str(slow["most_in_flight"]),
            f"the bound per target (OANP_DELIVERIES_PER_TARGET) 2; all {slow['deliveries']} "
            f"delivered in {slow['delivered_s']:g} s",
            judged("≤ 2", slow["most_in_flight"] <= 2),
        ),
        Row(
            f"{crowd['sessions']:,} deadlines at one instant on the timers worker: "
            "lateness p50 / p99 / max",
            _ms(crowd["lateness"]),
            f"by each close's own timestamp; all {crowd['closed']:,} closes committed and "
            f"seen {crowd['all_seen_closed_ms']:,.0f} ms after the instant; the Procfile's "
            "timers worker (threads pool, 4 threads)",
        ),
    ]


def notes_for(size: Size) -> list[str]:
    web = (
        "its default of two Daphne processes per core"
        if size.web_concurrency is None
        else f"{size.web_concurrency} Daphne process(es)"
    )
    return [
        "One deployment on this machine: the Procfile's processes under make serve's "
        f"supervisor (web, timers, hosted, worker, beat; the web {web}), a fresh PostgreSQL "
        "database, and a Redis server of the soak's own that keeps nothing, "
        "so each restart finds it empty: the timer tasks the timers worker held are gone and "
        "it re-arms them from the database when it connects again. Processes started again "
        "are the supervisor's restarts and the Daphne processes the web started again.",
        f"Blips: a buyer opens sessions over HTTP at {size.rate_per_s:g}/s, each with a "
        f"{size.deadline_s:g} s deadline and a merchant that never answers, from "
        f"{size.lead_in_s:g} s before the first kill to {size.gap_s:g} s after the last "
        f"restart; Redis is down {size.outage_s:g} s each time, {size.gap_s:g} s apart. "
        "Lateness is the arbiter's close entry's received_at (the clock its transaction read "
        "before writing its batch) less the deadline the session was opened with. An answer "
        "counts as sent while Redis was away when its request "
        "left between a kill and the restart's first answer.",
        f"Slow merchant: the receiver is one agent's callback; {size.slow_sessions} sessions "
        "of that agent are opened (each opening one delivery), then another buyer opens "
        f"{size.bystanders} sessions with {size.bystander_deadline_s:g} s deadlines.",
        f"Crowd: bench.jobs timers-lateness opens {size.crowd:,} sessions through the "
        "arbiter's own service, all due at the same instant, each armed with its timer task "
        f"as in production, {size.crowd_lead_s:g} s ahead of the instant; the Procfile's "
        "timers worker closes them, the first tasks to fire closing every due session in "
        "batches. Besides each close's own timestamp, the job (polling every 50 ms) saw the "
        "last close committed.",
    ]


def run(options: Options) -> SectionResult:
    size = QUICK if options.quick else FULL
    name = f"oanp_soak_quick_{os.getpid()}" if options.quick else "oanp_soak"
    figures = measure(size, name)
    return SectionResult("soak", TITLE, figures, rows_for(figures), notes_for(size))


SECTION = Section("soak", TITLE, run)
