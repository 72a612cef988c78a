"""Reading one large JSON document piece by piece, in memory bounded by its largest piece.

:class:`PullReader` walks objects and arrays token by token and parses each value the caller
asks for whole, with the strict reader's decoder (:data:`oanp.wire.canonical.STRICT_DECODER`): an
audit bundle of a million entries is read one session at a time, each held to the same rules
as a file read at once (no duplicate keys, no ``NaN``, exact numbers).
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any, TextIO

from oanp.wire.canonical import STRICT_DECODER

_WHITESPACE = " \t\n\r"
CHUNK = 1 << 16


def _truncated(exc: json.JSONDecodeError, buffered: int) -> bool:
    """Whether the error may only mean the value goes on past what is buffered: an error in
    the middle is final, so a broken file is not read to its end before it is refused."""
    return exc.msg.startswith("Unterminated") or exc.pos >= buffered - len("\\uXXXX")


_NUMBER_CHARACTERS = frozenset("0123456789.eE+-")


def _may_continue(found: object, buffer: str, end: int) -> bool:
    """Whether a number just read may be cut short by the buffer's end: nothing but number
    characters follow it up to that end."""
    return (
        isinstance(found, int | float | Decimal)
        and not isinstance(found, bool)
        and all(c in _NUMBER_CHARACTERS for c in buffer[end:])
    )


class StreamError(ValueError):
    """The document is not valid JSON, or not the shape the caller walks; says where."""


class PullReader:
    """A cursor over one JSON document in ``stream``.

    The caller says what it expects next: :meth:`begin` a container, :meth:`next_key` or
    :meth:`next_item` inside one, :meth:`value` for a whole value, :meth:`finish` at the end.
    """

    def __init__(self, stream: TextIO, *, chunk: int = CHUNK) -> None:
        self._stream = stream
        self._chunk = chunk
        self._buffer = ""
        self._pos = 0
        self._consumed = 0  # characters dropped from the buffer's front
        self._eof = False
        self._first: list[bool] = []  # per open container: no member read yet

    # Buffer ----------------------------------------------------------------------------------

    def _fill(self) -> bool:
        """Read more; False at the end of the stream."""
        if self._eof:
            return False
        if self._pos > len(self._buffer) // 2:
            self._consumed += self._pos
            self._buffer, self._pos = self._buffer[self._pos :], 0
        # Grow with what is pending, so re-parsing a large value costs at most twice its size.
        more = self._stream.read(max(self._chunk, len(self._buffer) - self._pos))
        if not more:
            self._eof = True
            return False
        self._buffer += more
        return True

    def _peek(self) -> str:
        """The next character that is not whitespace, or "" at the end."""
        while True:
            while self._pos < len(self._buffer) and self._buffer[self._pos] in _WHITESPACE:
                self._pos += 1
            if self._pos < len(self._buffer):
                return self._buffer[self._pos]
            if not self._fill():
                return ""

    def _error(self, message: str) -> StreamError:
        return StreamError(f"{message} at character {self._consumed + self._pos}")

    def _expect(self, char: str) -> None:
        found = self._peek()
        if found != char:
            raise self._error(f"expected {char!r}, found {found or 'the end'!r}")
        self._pos += 1

    # Values ----------------------------------------------------------------------------------

    def value(self) -> Any:
        """The next value, parsed whole."""
        if not self._peek():
            raise self._error("expected a value, found the end")
        while True:
            try:
                found, end = STRICT_DECODER.raw_decode(self._buffer, self._pos)
            except json.JSONDecodeError as exc:
                if _truncated(exc, len(self._buffer)) and self._fill():
                    continue  # cut off by the buffer's end: try again with more
                raise self._error(f"not valid JSON ({exc.msg})") from None
            except (ValueError, RecursionError) as exc:  # duplicate keys, NaN, nesting
                raise self._error(f"not valid JSON ({exc})") from None
            span = end - self._pos  # the buffer may shift under a refill
            if _may_continue(found, self._buffer, end) and self._fill():
                continue  # a number may go on past the buffer's end ("1." of "1.5")
            self._pos += span
            return found

    # Containers ------------------------------------------------------------------------------

    def begin(self, opening: str) -> None:
        """Enter an object (``"{"``) or an array (``"["``)."""
        self._expect(opening)
        self._first.append(True)

    def _next(self, closing: str) -> bool:
        if self._peek() == closing:
            self._pos += 1
            self._first.pop()
            return False
        if self._first[-1]:
            self._first[-1] = False
        else:
            self._expect(",")
        return True

    def next_key(self) -> str | None:
        """The next member's key (its value is read next), or None at the object's end."""
        if not self._next("}"):
            return None
        if self._peek() != '"':
            raise self._error("expected a member name")
        key = self.value()
        self._expect(":")
        return str(key)

    def next_item(self) -> bool:
        """Whether the array has another item (read it next); False at the array's end."""
        return self._next("]")

    def line(self, limit: int) -> str | None:
        """The text from here to the end of the line, unparsed, less the whitespace and the
        one comma that may end it; the reader goes on after that text. Where a writer puts a
        value a line, that is the value's text, for another reader to parse and to refuse if it
        holds anything else. ``None``, the reader not moved, when no line ends within
        ``limit`` characters or the document ends first."""
        if not self._peek():
            return None
        searched = 0  # characters from the reader's place that hold no line's end
        while (end := self._buffer.find("\n", self._pos + searched)) < 0:
            searched = len(self._buffer) - self._pos
            if searched > limit or not self._fill():
                return None
        if end - self._pos > limit:
            return None
        text = self._buffer[self._pos : end].rstrip(_WHITESPACE)
        text = text[:-1] if text.endswith(",") else text
        self._pos += len(text)
        return text

    def peek(self) -> str:
        """The next significant character: what kind of value comes next."""
        return self._peek()

    def finish(self) -> None:
        """Nothing but whitespace may follow the document."""
        if self._peek():
            raise self._error("unexpected data after the document")
