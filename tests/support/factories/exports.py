"""An export as the worker leaves it when done: both files stored, with their sizes."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.utils import timezone

from sessions_app.models import Export


def finished_export(user: User) -> Export:
    """A done range export of ``user``'s: a 2,048-byte bundle and a 300-byte summary."""
    export = Export.objects.create(
        requested_by=user, scope={"kind": "range", "preset": "24h"}, state=Export.State.DONE
    )
    export.bundle.save("size-test.json", ContentFile(b"x" * 2048), save=False)
    export.summary_csv.save("size-test.csv", ContentFile(b"y" * 300), save=False)
    export.finished_at = timezone.now()
    export.save()
    return export


def discard_files(export: Export) -> None:
    for stored in (export.bundle, export.summary_csv):
        default_storage.delete(stored.name)
