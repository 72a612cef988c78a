"""The arbiter's HTTP face (docs/protocol.md §14): the JSON views, the Server-Sent Event streams,
the OpenAPI document that describes both, and their URLs. Each view parses, calls one service
or selector and renders; refusals become problems in :mod:`arbiter_app.problems`."""
