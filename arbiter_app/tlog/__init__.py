"""The arbiter's transparency log (docs/protocol.md §18): every committed entry of every session
sequenced into one RFC 6962 tree (:mod:`~arbiter_app.tlog.integrator`), its hashes kept as C2SP
tiles serve them (:mod:`~arbiter_app.tlog.hashes`), its checkpoints signed as C2SP notes."""
