"""Audit bundles and their verification: one file an outside auditor verifies with no trust in
the arbiter. :mod:`oanp.audit.bundle` writes bundles (and subsets with inclusion proofs);
:mod:`oanp.audit.verify` checks a bundle or a session log. docs/audit.md has the format."""

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
from oanp.audit.verify import (
    Check,
    NotStreamable,
    Report,
    unreadable_reason,
    verify_bundle,
    verify_bundle_stream,
    verify_log,
)

__all__ = [
    "BUNDLE_DEPTH",
    "BUNDLE_FORMAT",
    "CHECKPOINT_FORMAT",
    "BundleWriter",
    "Check",
    "NotStreamable",
    "Report",
    "build_bundle",
    "extract",
    "leaf_hashes",
    "sign_checkpoint",
    "unreadable_reason",
    "verify_bundle",
    "verify_bundle_stream",
    "verify_log",
]
