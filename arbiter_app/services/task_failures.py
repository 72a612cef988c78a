"""A failed task queued again: marked once, so that two operators pressing Retry together
queue it once."""

from __future__ import annotations

from django.utils import timezone

from arbiter_app.models import TaskFailure


def mark_task_retried(*, failure_id: int) -> bool:
    """Whether this call is the one that marks the failure retried; ``False`` when it was
    retried already (or is gone)."""
    marked = TaskFailure.objects.filter(pk=failure_id, retried_at__isnull=True).update(
        retried_at=timezone.now()
    )
    return bool(marked)
