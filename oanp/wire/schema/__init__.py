"""The protocol's JSON Schemas, built from the parser's own constants and patterns.

:data:`SCHEMAS` holds every schema by name in OpenAPI 3.0's dialect (the server's OpenAPI
document takes them as they are); :func:`json_schema` gives one, the envelope or the session
summary say, as a JSON Schema (draft 2020-12) document with everything it refers to, which the
server publishes and any agent may validate with.
"""

from oanp.wire.schema.components import SCHEMAS, envelope_schema_name
from oanp.wire.schema.dialect import json_schema
from oanp.wire.schema.parts import Schema

__all__ = ["SCHEMAS", "Schema", "envelope_schema_name", "json_schema"]
