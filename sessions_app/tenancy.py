"""Who may see and do what on the dashboard: :class:`Scope`, the one home of the tenant and
role rules, and the guards that refuse (403) whoever the rules leave out.

A member of an organisation is confined to it: a merchant manager to its merchant's agents
(which it changes), their sessions and its exports; a merchant member sees the same and changes
nothing; a buyer-platform member to its own buyer agents and their sessions. An operator sees
every session and acts on live ones (terminate, redeliver) but changes no agent and exports
nothing; an admin may do everything, people and organisations included. Reads narrow what
they return to a scope (the selectors, the exports); actions and pages call a guard first, so
no view or command skips the check.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from sessions_app.models import (
    TENANT_ROLES,
    AgentProfile,
    MemberRole,
    Membership,
    PlatformAgent,
)


@dataclass(frozen=True)
class Scope:
    """What one dashboard user may see and do."""

    role: str
    #: The organisation it is confined to (a merchant or a buyer platform); ``None``: none.
    merchant_id: int | None
    #: The organisation's agents, whose sessions are visible; ``None`` means every session.
    agent_ids: list[str] | None
    #: The side of a session ``agent_ids`` sit on: a buyer platform's agents buy.
    side: str = "merchant"

    @property
    def is_buyer_side(self) -> bool:
        return self.side == "buyer"

    @property
    def merchant_agent_ids(self) -> list[str] | None:
        """The merchant agents whose deliveries are visible: none of a buyer platform's, since
        a handoff goes to the merchant's own system."""
        return [] if self.is_buyer_side else self.agent_ids

    @property
    def role_label(self) -> str:
        """The role as people read it ("Merchant member"), not as it is stored."""
        return str(MemberRole(self.role).label)

    @property
    def is_tenant(self) -> bool:
        """Confined to one organisation's agents, sessions and exports."""
        return self.role in TENANT_ROLES

    @property
    def is_admin(self) -> bool:
        return self.role == MemberRole.ADMIN

    @property
    def is_staff_role(self) -> bool:
        """Sees every tenant, the background work included, and acts on sessions."""
        return self.role in (MemberRole.OPERATOR, MemberRole.ADMIN)

    @property
    def may_manage_agents(self) -> bool:
        return self.role in (MemberRole.MERCHANT_MANAGER, MemberRole.ADMIN)

    @property
    def may_manage_buyer_agents(self) -> bool:
        return self.role in (MemberRole.BUYER_MEMBER, MemberRole.ADMIN)

    @property
    def may_export(self) -> bool:
        # Operators watch sessions; exporting them is an admin's job, or a merchant's for its own.
        return self.role in (
            MemberRole.ADMIN,
            MemberRole.MERCHANT_MANAGER,
            MemberRole.MERCHANT_MEMBER,
        )


def scope_of(user: AbstractBaseUser | AnonymousUser) -> Scope | None:
    """What ``user`` may see; ``None`` for a user with no membership (sees nothing)."""
    membership = Membership.objects.filter(user_id=user.pk).first()
    if membership is None:
        return None
    if membership.role not in TENANT_ROLES:
        return Scope(membership.role, None, None)
    if membership.role == MemberRole.BUYER_MEMBER:
        bought = PlatformAgent.objects.filter(organisation_id=membership.merchant_id)
        buyers = list(bought.values_list("agent_id", flat=True))
        return Scope(membership.role, membership.merchant_id, buyers, side="buyer")
    agent_ids = list(
        AgentProfile.objects.filter(merchant_id=membership.merchant_id).values_list(
            "agent_id", flat=True
        )
    )
    return Scope(membership.role, membership.merchant_id, agent_ids)


def scope_or_denied(request: HttpRequest) -> Scope:
    scope = scope_of(request.user)
    if scope is None:
        raise PermissionDenied("this account has no role yet; ask an admin")
    return scope


def require_admin(scope: Scope) -> None:
    if not scope.is_admin:
        raise PermissionDenied("only admins may do this")


def require_staff(scope: Scope) -> None:
    if not scope.is_staff_role:
        raise PermissionDenied("only operators and admins may do this")


def require_agent_manager(scope: Scope) -> None:
    if not scope.may_manage_agents:
        raise PermissionDenied("only a merchant's managers and admins may change its agents")


def require_buyer_agent_manager(scope: Scope) -> None:
    if not scope.may_manage_buyer_agents:
        raise PermissionDenied("only a buyer platform's members and admins may change its keys")


def require_export(scope: Scope) -> None:
    if not scope.may_export:
        raise PermissionDenied("only admins and a merchant's people may export")
