"""Writes to the arbiter's records, by area: sessions (envelopes, timers, terminations),
API keys, the keys agents sign their envelopes with, deliveries (handoff targets, callbacks,
redelivery), reveals, signing keys (rotation), listings (the directory of merchant agents),
whether a merchant agent takes new sessions (availability) and failed tasks queued again
(task failures). Views, commands and tasks call these; each runs in one transaction and
announces what it committed only after the commit.

Some rows are written elsewhere, by the code that owns their life cycle: delivery attempts
(:mod:`arbiter_app.deliveries`: the handoff, callbacks, and the outbound request, which closes
those abandoned), the first signing key, created on first use (:mod:`arbiter_app.signing_keys`), and
the integrity check's records (:mod:`arbiter_app.integrity`).
"""

from arbiter_app.refusals import HostNotFound
from arbiter_app.services.agent_keys import (
    register_agent_key,
    require_signatures,
    retire_agent_key,
)
from arbiter_app.services.api_keys import (
    KEY_PREFIX,
    IssuedKey,
    assign_owner,
    issue_credential,
    key_digest,
    revoke_credential,
    revoke_credentials,
)
from arbiter_app.services.availability import set_availability
from arbiter_app.services.deliveries import (
    Configured,
    configure_handoff,
    redeliver_handoff,
    register_callback,
    remove_callback,
    resend_callback,
    send_test_handoff,
)
from arbiter_app.services.listings import save_listing
from arbiter_app.services.reveals import reveal_constraints
from arbiter_app.services.sessions import (
    EXPIRY_BATCH,
    EnvelopeAnswer,
    arbiter,
    check_sender,
    expire_due_sessions,
    expire_session,
    receive_envelope,
    runs_agents,
    terminate_session,
)
from arbiter_app.services.signing_keys import maintain_signing_keys, rotate_signing_key
from arbiter_app.services.task_failures import mark_task_retried

__all__ = [
    "EXPIRY_BATCH",
    "KEY_PREFIX",
    "Configured",
    "EnvelopeAnswer",
    "HostNotFound",
    "IssuedKey",
    "arbiter",
    "assign_owner",
    "check_sender",
    "configure_handoff",
    "expire_due_sessions",
    "expire_session",
    "issue_credential",
    "key_digest",
    "maintain_signing_keys",
    "mark_task_retried",
    "receive_envelope",
    "redeliver_handoff",
    "register_agent_key",
    "register_callback",
    "remove_callback",
    "require_signatures",
    "resend_callback",
    "retire_agent_key",
    "reveal_constraints",
    "revoke_credential",
    "revoke_credentials",
    "rotate_signing_key",
    "runs_agents",
    "save_listing",
    "send_test_handoff",
    "set_availability",
    "terminate_session",
]
