"""The broker section's task and its producer.

The worker loads the task with ``--include bench.broker_tasks``; each run notes its phase, its
number, when it was sent and when it started in the file ``OANP_BENCH_BROKER_RECORD`` names.
``python -m bench.broker_tasks PHASE COUNT INTERVAL_S`` sends COUNT of them, INTERVAL_S apart
(0: as fast as it can), and prints how long sending took as one JSON line.
"""

import json
import os
import sys
import time

from oanp_site.celery import app


@app.task(name="bench.broker.mark")
def mark(phase: str, number: int, sent_at: float) -> None:
    started_at = time.time()
    # One short write to a file opened for appending: lines from concurrent tasks never mix.
    with open(os.environ["OANP_BENCH_BROKER_RECORD"], "a", encoding="utf-8") as record:
        record.write(f"{phase} {number} {sent_at!r} {started_at!r}\n")


def send(phase: str, count: int, interval_s: float) -> float:
    """Send the tasks; the seconds it took."""
    start = time.perf_counter()
    for number in range(count):
        if interval_s:
            # Paced against the start, so that a slow send does not stretch the whole run.
            time.sleep(max(0.0, start + number * interval_s - time.perf_counter()))
        mark.delay(phase, number, time.time())
    return time.perf_counter() - start


if __name__ == "__main__":
    import django

    django.setup()
    phase, count, interval_s = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    print(json.dumps({"send_s": send(phase, count, interval_s)}))
