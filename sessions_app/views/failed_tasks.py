"""The failed background tasks, for operators and admins: each with its error in words, and
Retry, after a confirmation, for those safe to run again (:mod:`sessions_app.task_failures`)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from sessions_app import task_failures
from sessions_app.tenancy import scope_or_denied
from sessions_app.views import refusal


@login_required
@require_GET
def failed_task_list(request: HttpRequest) -> HttpResponse:
    scope = scope_or_denied(request)
    return render(
        request,
        "sessions_app/failed_tasks.html",
        {
            "scope": scope,
            "failed": task_failures.failed_tasks(scope),
            "days": task_failures.LISTED_DAYS,
        },
    )


@login_required
@require_POST
def failed_task_retry(request: HttpRequest, pk: int) -> HttpResponse:
    """Without ``confirm``, the page asking to confirm; with it, the retry. A failure that
    cannot be retried answers 400 on the same page, saying why, and nothing is queued."""
    scope = scope_or_denied(request)
    found = task_failures.failed_task(scope, pk)
    error = found.refusal
    if not error and request.POST.get("confirm") == "yes":
        try:
            task_failures.retry(actor=request.user, scope=scope, failure_id=pk)
        except task_failures.RetryRefused as refused:
            error = str(refused)
        else:
            messages.success(request, f"The {found.short_name} task is queued again.")
            return redirect("failed-tasks")
    return render(
        request,
        "sessions_app/failed_task_retry.html",
        {"scope": scope, "task": found, "form": refusal(error) if error else None},
        status=400 if error else 200,
    )
