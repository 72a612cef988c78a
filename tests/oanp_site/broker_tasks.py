"""The task the broker's tests send: it notes its marker in a file, and does nothing else.

A worker loads it with ``--include tests.oanp_site.broker_tasks``; the file is named by
``OANP_BROKER_TEST_RECORD`` in the worker's environment, and ``OANP_BROKER_TEST_TASK_SECONDS``
(if set) is how long each task works first, so that a worker killed holds some. ``python -m
tests.oanp_site.broker_tasks PREFIX COUNT`` is a producer: it sends COUNT of them.
"""

import os
import time

from oanp_site.celery import app


@app.task(name="tests.broker.record")
def record(marker: str) -> None:
    time.sleep(float(os.environ.get("OANP_BROKER_TEST_TASK_SECONDS", "0")))
    # One short write to a file opened for appending: lines from concurrent tasks never mix.
    with open(os.environ["OANP_BROKER_TEST_RECORD"], "a", encoding="utf-8") as log:
        log.write(marker + "\n")


def publish(prefix: str, count: int) -> None:
    """Send ``count`` tasks marked ``<prefix>-0`` … ``<prefix>-<count - 1>``."""
    for number in range(count):
        record.delay(f"{prefix}-{number}")


if __name__ == "__main__":
    import sys

    import django

    django.setup()
    publish(sys.argv[1], int(sys.argv[2]))
