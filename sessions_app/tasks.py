"""Celery tasks of the dashboard side: thin, each calls one function."""

from __future__ import annotations

from celery import shared_task

from sessions_app import exports, runner


@shared_task
def answer_session(session_id: str) -> int:
    return runner.answer(session_id)


@shared_task
def sweep_answers() -> int:
    return runner.sweep_answers()


@shared_task
def reveal_after_end(session_id: str) -> bool:
    return runner.reveal_after_end(session_id)


@shared_task
def sweep_reveals() -> int:
    return runner.sweep_reveals()


@shared_task
def run_export(export_id: int) -> None:
    exports.run(export_id=export_id)
