"""The wire and the machine: what an envelope is and how the arbiter's state machine takes it.

The foundations every other part of :mod:`oanp` builds on (:mod:`~oanp.wire.errors`, the one
error tree; :mod:`~oanp.wire.canonical`, JCS and the strict JSON reader; :mod:`~oanp.wire.money`;
:mod:`~oanp.wire.terms`; :mod:`~oanp.wire.commitments`; :mod:`~oanp.wire.profiles`;
:mod:`~oanp.wire.settlement`, the midpoint rule) sit here beside the parser
(:mod:`~oanp.wire.envelope`) and the machine (:mod:`~oanp.wire.machine`, its
:mod:`~oanp.wire.state` and :mod:`~oanp.wire.moves`), the hash-chained :mod:`~oanp.wire.log`
and how it reads to a person (:mod:`~oanp.wire.transcript`), :mod:`~oanp.wire.snapshot`,
:mod:`~oanp.wire.signing`, the session :mod:`~oanp.wire.summary`, :mod:`~oanp.wire.discovery`
and the JSON Schemas (:mod:`oanp.wire.schema`): what the arbiter runs and both parties read.

Nothing here imports the auditor (:mod:`oanp.audit`) or the agents' logic (:mod:`oanp.agents`);
both import it. The public names are :mod:`oanp`'s own; modules are imported by their path.
"""
