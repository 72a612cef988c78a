"""Arbiter records: Session, Entry, AgentCredential, SigningKey, HandoffTarget, HandoffAttempt."""
