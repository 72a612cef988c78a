"""Admin pages. Entries are shown read-only: the log is append-only, in the database too."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from arbiter_app import services
from arbiter_app.models import (
    AgentCallback,
    AgentCredential,
    CallbackCursor,
    DeliveryAttempt,
    Entry,
    Handoff,
    HandoffTarget,
    Session,
    SigningKey,
)


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
    # The phases sessions are in, as before ``phase`` had choices: listing every choice would
    # offer EVALUATING, which no stored session is ever in.
    list_filter = (("phase", admin.AllValuesFieldListFilter), "close_reason", "profile")
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


# Outbound deliveries: configured with `configure_handoff` and the callback endpoint, so the
# admin shows them and retries handoffs, never edits them or shows a secret.

ATTEMPT_FIELDS = (
    "number",
    "started_at",
    "status_code",
    "latency_ms",
    "outcome",
    "response_excerpt",
    "error",
)


@admin.register(HandoffTarget)
class HandoffTargetAdmin(ReadOnly):
    list_display = ("merchant_agent_id", "endpoint", "updated_at", "disabled_at")
    search_fields = ("merchant_agent_id", "endpoint")
    exclude = ("api_key_encrypted", "webhook_secret_encrypted")


class HandoffAttemptInline(admin.TabularInline):
    model = DeliveryAttempt
    fk_name = "handoff"
    fields = ATTEMPT_FIELDS
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Handoff)
class HandoffAdmin(ReadOnly):
    list_display = (
        "session",
        "target",
        "state",
        "flagged",
        "attempts",
        "next_attempt_at",
        "delivered_at",
        "checkout_id",
    )
    list_filter = ("state", "flagged")
    search_fields = ("session__session_id", "target__merchant_agent_id", "checkout_id")
    inlines = (HandoffAttemptInline,)
    actions = ("redeliver",)

    @admin.action(description="Redeliver the selected handoffs")
    def redeliver(self, request: HttpRequest, queryset: QuerySet[Handoff]) -> None:
        for handoff in queryset:
            try:
                services.redeliver_handoff(handoff=handoff)
            except ValueError as refused:
                self.message_user(request, f"{handoff}: {refused}", messages.WARNING)


@admin.register(AgentCallback)
class AgentCallbackAdmin(ReadOnly):
    list_display = ("agent_id", "role", "url", "updated_at", "disabled_at", "disabled_reason")
    list_filter = ("role",)
    search_fields = ("agent_id", "url")
    exclude = ("secret_encrypted",)


@admin.register(CallbackCursor)
class CallbackCursorAdmin(ReadOnly):
    list_display = ("callback", "session", "delivered_seq", "attempts", "next_attempt_at")
    search_fields = ("callback__agent_id", "session__session_id")


@admin.register(DeliveryAttempt)
class DeliveryAttemptAdmin(ReadOnly):
    list_display = ("started_at", "handoff", "cursor", "seq", *ATTEMPT_FIELDS[:1], "status_code")
    list_filter = ("outcome", "status_code")
