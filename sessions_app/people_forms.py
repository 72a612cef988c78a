"""The forms of the people pages: an organisation's name and kind, an invitation, a person's
role and organisation. Each checks what it can alone; what needs the database (a name taken,
the last admin) is the services', whose refusals the views put back on the form."""

from __future__ import annotations

from typing import Any

from django import forms

from sessions_app.forms import sentence
from sessions_app.models import MemberRole, Merchant, OrganisationKind
from sessions_app.people import MAX_NAME_CHARS, check_placement


class OrganisationForm(forms.Form):
    name = forms.CharField(label="Name", max_length=MAX_NAME_CHARS)
    kind = forms.ChoiceField(
        label="Kind",
        choices=OrganisationKind.choices,
        help_text="A merchant's agents sell; a buyer platform's agents buy.",
    )


class RenameForm(forms.Form):
    name = forms.CharField(label="Name", max_length=MAX_NAME_CHARS)


class PlacementForm(forms.Form):
    """A role, and the organisation it needs when it is a tenant's."""

    role = forms.ChoiceField(label="Role", choices=MemberRole.choices)
    organisation = forms.ModelChoiceField(
        label="Organisation",
        queryset=Merchant.objects.all(),
        required=False,
        empty_label="None (operators and admins)",
        help_text="Merchant managers and members belong to a merchant, "
        "buyer-platform members to a buyer platform.",
    )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if "role" in cleaned and "organisation" in cleaned:
            try:
                check_placement(cleaned["role"], cleaned["organisation"])
            except ValueError as refused:
                self.add_error("organisation", sentence(str(refused)))
        return cleaned


class InviteForm(PlacementForm):
    email = forms.EmailField(label="Email", max_length=254)

    field_order = ["email", "role", "organisation"]
