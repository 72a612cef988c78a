"""Celery tasks of the dashboard side: thin, each calls one function."""

from __future__ import annotations

from celery import shared_task

from sessions_app import runner


@shared_task
def answer_session(session_id: str) -> int:
    return runner.answer(session_id)
