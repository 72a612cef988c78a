"""Tenant-side records: Merchant, Membership, AgentProfile, Export, AuditEvent."""
