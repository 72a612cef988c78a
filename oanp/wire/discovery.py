"""Discovery (docs/protocol.md §14.10): what an agent reads before it opens a session.

Two documents: the arbiter's own (``/.well-known/oanp.json``: versions, profiles, settlement
rules, endpoints, limits) and the directory of the merchant agents their owners listed. Both
are built here from the protocol's own constants, so that a document cannot promise what the
parser refuses. The readers check what a merchant lists and what a buyer searches for by the
same rules wherever the input arrives: the dashboard, the arbiter's API, the MCP tools.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from oanp.wire.canonical import JsonObject, JsonValue, canonical_bytes, json_value
from oanp.wire.envelope import (
    MAX_ENVELOPE_BYTES,
    MAX_ITEM_BYTES,
    MAX_ITEM_DEPTH,
    MAX_ROUNDS_LIMIT,
    OANP_VERSION,
    RESPONSE_WINDOW_RANGE,
)
from oanp.wire.errors import FieldError, SchemaInvalid
from oanp.wire.money import MINOR_UNITS
from oanp.wire.state import MAX_DEADLINE_AHEAD
from oanp.wire.terms import MAX_ISSUES

#: A catalog's items are what a buyer would send as ``item`` (4 KiB each); the whole catalog
#: fits in one envelope's size, so that a page of the directory stays a few megabytes.
MAX_CATALOG_ITEMS = 50
MAX_CATALOG_BYTES = MAX_ENVELOPE_BYTES
MAX_DESCRIPTION_CHARS = 1000
#: The longest search a buyer may send (``?q=``).
MAX_QUERY_CHARS = 200

#: A search term is one line: no control character at all.
_QUERY_REFUSED = re.compile("[\x00-\x1f\x7f]")
#: A description may hold lines and tabs (a browser's textarea sends CRLF), nothing else of C0:
#: it is shown in terminals and pages, where an escape sequence would forge what they show.
_DESCRIPTION_REFUSED = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def limits() -> JsonObject:
    """The bounds an arbiter of this implementation holds every session to."""
    return {
        "max_rounds": MAX_ROUNDS_LIMIT,
        "response_window_s": list(RESPONSE_WINDOW_RANGE),
        "deadline_max_s": int(MAX_DEADLINE_AHEAD.total_seconds()),
        "max_envelope_bytes": MAX_ENVELOPE_BYTES,
        "max_issues": MAX_ISSUES,
    }


def arbiter_document(
    *,
    arbiter_id: str,
    profiles: Sequence[str],
    settlement: Sequence[str],
    endpoints: Mapping[str, str],
    jwks_uri: str,
    log: Mapping[str, str] | None = None,
) -> JsonObject:
    """``/.well-known/oanp.json``: who the arbiter is and what it accepts; with ``log``, its
    transparency log's ``origin``, ``url`` (the tiles' prefix) and ``verifier_key``."""
    document: JsonObject = {
        "arbiter_id": arbiter_id,
        "oanp_versions": [OANP_VERSION],
        "profiles": list(profiles),
        "settlement": list(settlement),
        "endpoints": dict(endpoints),
        "jwks_uri": jwks_uri,
        "limits": limits(),
    }
    if log is not None:
        document["log"] = dict(log)
    return document


# What a merchant lists ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Listing:
    """What a merchant chose to show of one agent; made by :func:`parse_listing` only."""

    listed: bool
    description: str
    currencies: tuple[str, ...]
    catalog: tuple[JsonObject, ...]


def _text_refusal(value: str, refused: re.Pattern[str]) -> str | None:
    found = refused.search(value)
    if found is not None:
        return f"must not hold the control character U+{ord(found.group()):04X}"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "must not hold a lone surrogate"
    return None


def _description(value: object, errors: list[FieldError]) -> str:
    if not isinstance(value, str):
        errors.append(FieldError("description", "must be a string"))
        return ""
    if len(value) > MAX_DESCRIPTION_CHARS:
        errors.append(
            FieldError("description", f"must be at most {MAX_DESCRIPTION_CHARS} characters")
        )
    elif (reason := _text_refusal(value, _DESCRIPTION_REFUSED)) is not None:
        errors.append(FieldError("description", reason))
    return value


def _currencies(value: object, listed: bool, errors: list[FieldError]) -> tuple[str, ...]:
    if not isinstance(value, list | tuple):
        errors.append(FieldError("currencies", "must be a list of ISO 4217 codes"))
        return ()
    seen: list[str] = []
    for i, code in enumerate(value):
        if not isinstance(code, str) or code not in MINOR_UNITS:
            shown = repr(code[:12]) if isinstance(code, str) else "this"
            errors.append(FieldError(f"currencies[{i}]", f"{shown} is not an ISO 4217 code"))
        elif code in seen:
            errors.append(FieldError(f"currencies[{i}]", f"{code} is given twice"))
        else:
            seen.append(code)
    if listed and not value:
        errors.append(FieldError("currencies", "a listed agent names at least one currency"))
    return tuple(seen)


def _catalog(value: object, errors: list[FieldError]) -> tuple[JsonObject, ...]:
    if not isinstance(value, list | tuple):
        errors.append(FieldError("catalog", "must be a list of item objects"))
        return ()
    if len(value) > MAX_CATALOG_ITEMS:
        errors.append(FieldError("catalog", f"must hold at most {MAX_CATALOG_ITEMS} items"))
        return ()
    items: list[JsonObject] = []
    known = len(errors)
    for i, item in enumerate(value):
        path = f"catalog[{i}]"
        if not isinstance(item, dict):
            errors.append(FieldError(path, "must be a JSON object"))
            continue
        try:
            normalized = json_value(item, path, max_depth=MAX_ITEM_DEPTH)
        except SchemaInvalid as invalid:
            errors.extend(invalid.errors)
            continue
        assert isinstance(normalized, dict)
        if len(canonical_bytes(normalized)) > MAX_ITEM_BYTES:
            errors.append(FieldError(path, f"must be at most {MAX_ITEM_BYTES} bytes"))
            continue
        items.append(normalized)
    if len(errors) == known and len(canonical_bytes(list(items))) > MAX_CATALOG_BYTES:
        errors.append(FieldError("catalog", f"must be at most {MAX_CATALOG_BYTES} bytes in all"))
    return tuple(items)


def parse_listing(
    *, listed: bool, description: object, currencies: object, catalog: object
) -> Listing:
    """Check what a merchant lists; :class:`SchemaInvalid` names every bad field at once."""
    errors: list[FieldError] = []
    listing = Listing(
        listed=listed,
        description=_description(description, errors),
        currencies=_currencies(currencies, listed, errors),
        catalog=_catalog(catalog, errors),
    )
    if errors:
        raise SchemaInvalid("the listing is not valid", errors=errors)
    return listing


def _leaves(value: JsonValue) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    elif value is not None and not isinstance(value, bool):
        yield str(value)


def catalog_text(catalog: Sequence[JsonObject]) -> str:
    """The catalog's words, keys and values, one a line, as a search reads them: not its JSON,
    whose quotes and braces would match searches of their own."""
    # A line per word, and no control character within one: a search holds none, so none
    # matches across two of them.
    return "\n".join(_QUERY_REFUSED.sub(" ", leaf) for leaf in _leaves(list(catalog)))


def merchant_entry(
    *,
    agent_id: str,
    merchant: str,
    description: str,
    currencies: Sequence[str],
    catalog: Sequence[JsonObject],
    profiles: Sequence[str],
    settlement: Sequence[str],
) -> JsonObject:
    """One listed merchant agent as the directory shows it: never a limit, strategy or key."""
    return {
        "agent_id": agent_id,
        "merchant": merchant,
        "description": description,
        "currencies": list(currencies),
        "profiles": list(profiles),
        "settlement": list(settlement),
        "catalog": list(catalog),
    }


# What a buyer searches for --------------------------------------------------------------------


def parse_query(value: object) -> str:
    """A search of the directory (``?q=``), without its surrounding blanks; ``""`` lists all.

    :class:`SchemaInvalid` for what no listing could match: not a string, longer than
    :data:`MAX_QUERY_CHARS`, or holding a control character.
    """
    reason = None
    if not isinstance(value, str):
        reason = "must be a string"
    elif len(value) > MAX_QUERY_CHARS:
        reason = f"must be at most {MAX_QUERY_CHARS} characters"
    else:
        reason = _text_refusal(value, _QUERY_REFUSED)
    if reason is not None:
        raise SchemaInvalid(f"q {reason}", errors=[FieldError("q", reason)])
    assert isinstance(value, str)
    return value.strip()
