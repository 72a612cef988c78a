"""The protocol's schemas, written in OpenAPI 3.0's dialect, as JSON Schema (draft 2020-12)
documents of their own, for validators that do not read OpenAPI."""

from __future__ import annotations

from typing import Any

from oanp.wire.schema.components import SCHEMAS
from oanp.wire.schema.parts import Schema

_COMPONENT = "#/components/schemas/"


def json_schema(name: str, schema_id: str) -> Schema:
    """Component ``name`` as a JSON Schema (draft 2020-12) document of its own, for validators
    that do not read OpenAPI: ``nullable`` and 3.0's boolean exclusive bounds become the
    standard keywords, the OpenAPI-only ``discriminator`` goes, and every schema it refers to
    comes along under ``$defs``."""
    needed: dict[str, Schema] = {}
    pending = [name]
    while pending:
        current = pending.pop()
        if current not in needed:
            needed[current] = _standard(SCHEMAS[current], pending)
    root = needed.pop(name)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": schema_id,
        **root,
        "$defs": dict(sorted(needed.items())),
    }


def _standard(node: Any, refs: list[str]) -> Any:
    """One OpenAPI 3.0 schema node in JSON Schema's own keywords; names it refers to are
    added to ``refs``."""
    if isinstance(node, list):
        return [_standard(item, refs) for item in node]
    if not isinstance(node, dict):
        return node
    out: Schema = {}
    for key, value in node.items():
        if key == "properties":  # names of fields, not keywords
            out[key] = {field: _standard(schema, refs) for field, schema in value.items()}
        elif key != "discriminator":
            out[key] = _standard(value, refs)
    if "$ref" in out:
        target = out["$ref"].removeprefix(_COMPONENT)
        refs.append(target)
        out["$ref"] = f"#/$defs/{target}"
    if out.pop("nullable", False):
        out["type"] = [out["type"], "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    for bound, exclusive in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
        if out.get(exclusive) is True:
            out[exclusive] = out.pop(bound)
    return out
