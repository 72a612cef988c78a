"""The agents' network side of OANP: the HTTP client (:mod:`oanp.net.client`), the reference
negotiators that drive it (:mod:`oanp.net.negotiators`), the MCP tool server
(:mod:`oanp.net.mcp`) and the ``oanp`` command line (:mod:`oanp.net.cli`, its subcommands in
:mod:`oanp.net.commands`, the party signing key files in :mod:`oanp.net.signing_keys`).

This is where I/O lives for agents: it imports the pure protocol, and nothing pure imports it
(import-linter's contracts in pyproject.toml).
"""
