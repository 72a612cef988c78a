"""Celery tasks of the dashboard side: thin, each calls one function."""

from __future__ import annotations

from celery import shared_task

from sessions_app import exports, hosted_agents
from sessions_app.queue import ANSWER_SESSION, REVEAL_AFTER_END, RUN_EXPORT


@shared_task(name=ANSWER_SESSION)
def answer_session(session_id: str) -> int:
    return hosted_agents.answer(session_id)


@shared_task
def sweep_answers() -> int:
    return hosted_agents.sweep_answers()


@shared_task(name=REVEAL_AFTER_END)
def reveal_after_end(session_id: str) -> bool:
    return hosted_agents.reveal_after_end(session_id)


@shared_task
def sweep_reveals() -> int:
    return hosted_agents.sweep_reveals()


@shared_task(name=RUN_EXPORT)
def run_export(export_id: int) -> None:
    exports.run(export_id=export_id)
