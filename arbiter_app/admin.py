"""Admin pages. Entries are shown read-only: the log is append-only, in the database too."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from arbiter_app import services
from arbiter_app.models import AgentCredential, Entry, Session, SigningKey


class ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(AgentCredential)
class AgentCredentialAdmin(ReadOnly):
    list_display = ("agent_id", "role", "prefix", "label", "created_at", "revoked_at")
    list_filter = ("role",)
    search_fields = ("agent_id", "prefix", "label")
    exclude = ("digest",)
    actions = ("revoke",)

    @admin.action(description="Revoke the selected API keys")
    def revoke(self, request: HttpRequest, queryset: QuerySet[AgentCredential]) -> None:
        for credential in queryset:
            services.revoke_credential(credential=credential)


class EntryInline(admin.TabularInline):
    model = Entry
    fields = ("seq", "type", "sender_role", "sender_agent_id", "received_at", "entry_hash")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Session)
class SessionAdmin(ReadOnly):
    list_display = (
        "session_id",
        "buyer_agent_id",
        "merchant_agent_id",
        "phase",
        "round",
        "final_price",
        "close_reason",
        "opened_at",
    )
    list_filter = ("phase", "close_reason", "profile")
    search_fields = ("session_id", "buyer_agent_id", "merchant_agent_id")
    inlines = (EntryInline,)


@admin.register(Entry)
class EntryAdmin(ReadOnly):
    list_display = ("session", "seq", "type", "sender_agent_id", "received_at")
    list_filter = ("type",)
    search_fields = ("session__session_id", "message_id")
    exclude = ("answer",)


@admin.register(SigningKey)
class SigningKeyAdmin(ReadOnly):
    list_display = ("kid", "alg", "state", "activated_at", "retiring_at", "retired_at")
    list_filter = ("state", "alg")
    exclude = ("private_jwk_encrypted",)
