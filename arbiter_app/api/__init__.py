"""The arbiter's HTTP face (PROTOCOL section 7): the JSON views, the Server-Sent Event streams,
the OpenAPI document that describes both, and their URLs. Each view parses, calls one service
or selector and renders; refusals become problems in :mod:`arbiter_app.problems`."""
