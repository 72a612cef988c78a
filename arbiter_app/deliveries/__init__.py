"""What the arbiter sends out: the outbound request every delivery makes (with its guard
against requests to private addresses), the ACP handoff of an agreement (docs/protocol.md §15)
and agents' callbacks. Each attempt is recorded by the code here, which owns its life cycle;
configuring targets and callbacks is :mod:`arbiter_app.services.deliveries`'."""
