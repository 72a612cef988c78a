"""At most one open invitation (neither accepted nor revoked) per address. Two that two admins
made at once before this are closed first, the older revoked, so the constraint can be made."""

from typing import Any

import django.db.models.functions.text
from django.db import migrations, models
from django.db.models import Max
from django.db.models.functions import Lower
from django.utils import timezone


def close_doubles(apps: Any, schema_editor: Any) -> None:
    invitation = apps.get_model("sessions_app", "Invitation")
    # On the connection migrating (``migrate --database owner``): another would wait on it.
    rows = invitation.objects.using(schema_editor.connection.alias)
    open_ones = rows.filter(accepted_at__isnull=True, revoked_at__isnull=True)
    newest = open_ones.annotate(address=Lower("email")).values("address").annotate(keep=Max("pk"))
    for row in newest:
        open_ones.filter(email__iexact=row["address"]).exclude(pk=row["keep"]).update(
            revoked_at=timezone.now()
        )


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0008_platform_agents"),
    ]

    operations = [
        migrations.RunPython(close_doubles, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="invitation",
            constraint=models.UniqueConstraint(
                django.db.models.functions.text.Lower("email"),
                condition=models.Q(("accepted_at__isnull", True), ("revoked_at__isnull", True)),
                name="one_open_invitation_per_address",
            ),
        ),
    ]
