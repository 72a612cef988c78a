"""The offline auditor: everything an outside party needs to check a session's log or an audit
bundle with no trust in the arbiter, and nothing else imports.

:mod:`oanp.audit.invariants` re-derives I1–I7 from a log (with :mod:`~oanp.audit.walk`, what it
tracks and reports, and :mod:`~oanp.audit.party_checks` and :mod:`~oanp.audit.arbiter_checks`,
how it judges each side's entries); :mod:`oanp.audit.replay` asks it after every entry;
:mod:`oanp.audit.merkle` hashes RFC 6962 trees and proofs; :mod:`oanp.audit.bundle` writes
bundles (and subsets with inclusion proofs) and :mod:`oanp.audit.verify` checks a bundle or a
session log (:mod:`oanp.audit.report`, what it finds), whole or streamed
(:mod:`oanp.audit.jsonstream`), a streamed bundle's logs checked on their own
(:mod:`oanp.audit.bundled_logs`), by workers when the caller has them, and each party's
signatures checked against the keys it registered (:mod:`oanp.audit.signed_entries`).
docs/audit.md has the format. It builds on the wire (:mod:`oanp.wire`) and never on the
agents' logic."""

from oanp.audit.bundle import (
    BUNDLE_DEPTH,
    BUNDLE_FORMAT,
    CHECKPOINT_FORMAT,
    BundleWriter,
    build_bundle,
    extract,
    leaf_hashes,
    sign_checkpoint,
)
from oanp.audit.report import Check, Report, SignatureRules, verify_log
from oanp.audit.signed_entries import read_party_keys
from oanp.audit.verify import (
    NotStreamable,
    unreadable_reason,
    verify_bundle,
    verify_bundle_stream,
)

__all__ = [
    "BUNDLE_DEPTH",
    "BUNDLE_FORMAT",
    "CHECKPOINT_FORMAT",
    "BundleWriter",
    "Check",
    "NotStreamable",
    "Report",
    "SignatureRules",
    "build_bundle",
    "extract",
    "leaf_hashes",
    "read_party_keys",
    "sign_checkpoint",
    "unreadable_reason",
    "verify_bundle",
    "verify_bundle_stream",
    "verify_log",
]
