"""The transparency log of every entry (docs/protocol.md §18): one RFC 6962 tree in the C2SP
formats. :mod:`oanp.tlog.tree` computes its roots and proofs from the hashes its tiles hold."""
