"""What tests and benchmarks build their cases from, by the layer they work at:
:mod:`.sessions` envelopes fed straight to the machine, :mod:`.logs` whole deterministic logs
and bundles, :mod:`.agents` agents with keys talking to the arbiter over HTTP, :mod:`.accounts`
dashboard users, merchants and hosted agents."""
