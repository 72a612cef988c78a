"""The agents' logic, sans-IO: how a party decides what to send, from limits only it knows.

:mod:`~oanp.agents.parties` holds the reference buyer and merchant agents, fed their session's
stream and answering with envelopes; :mod:`~oanp.agents.strategies` is the one registry of
negotiation strategies, :mod:`~oanp.agents.tradeoffs` how agents weigh and concede on issues
and :mod:`~oanp.agents.frontier` the Pareto frontier of two revealed plans; a party's private
limits are its :mod:`~oanp.agents.vaults` and a merchant's :mod:`~oanp.agents.pricelist`;
:mod:`~oanp.agents.guardrails` says what a model-driven party may send next;
:mod:`~oanp.agents.rehearsal` plays whole sessions in-process against the arbiter's machine;
:mod:`~oanp.agents.ids` mints the ids the edges hand the agents in.

It builds on the wire (:mod:`oanp.wire`) and never on the auditor. The agents' I/O (the client,
the negotiators that drive these agents over it, the MCP server and the command line) lives
beside it in :mod:`oanp.net`, which nothing here imports.
"""
