"""``PullReader`` reads a document piece by piece exactly as the strict reader reads it whole.

Every document is read with buffers of 1 to 7 characters, and through a stream that hands out
at most a few characters per read, so that every character of it is at some point the buffer's
end: the values must come out as :data:`oanp.wire.canonical.STRICT_DECODER` parses the whole text,
and a broken document must be refused, saying where, without reading the rest of a large one.
"""

from __future__ import annotations

import io
import re
from decimal import Decimal
from typing import Any

import pytest

from oanp.audit.jsonstream import CHUNK, PullReader, StreamError
from oanp.wire.canonical import STRICT_DECODER

CHUNKS = range(1, 8)


class Trickle(io.TextIOBase):
    """``text`` handed out at most ``most`` characters per read (all it is asked for when
    ``most`` is None), counting what it has handed out."""

    def __init__(self, text: str, most: int | None = None) -> None:
        self._text, self._most = text, most
        self.served = 0
        self.reads = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> str:
        self.reads += 1
        wanted = len(self._text) - self.served if size is None or size < 0 else size
        if self._most is not None:
            wanted = min(wanted, self._most)
        out = self._text[self.served : self.served + wanted]
        self.served += len(out)
        return out


def walk(reader: PullReader, depth: float = float("inf")) -> Any:
    """The next value: containers entered ``depth`` levels deep, what is below read whole."""
    if depth > 0 and reader.peek() == "{":
        reader.begin("{")
        found: dict[str, Any] = {}
        while (key := reader.next_key()) is not None:
            found[key] = walk(reader, depth - 1)
        return found
    if depth > 0 and reader.peek() == "[":
        reader.begin("[")
        items = []
        while reader.next_item():
            items.append(walk(reader, depth - 1))
        return items
    return reader.value()


def read(text: str, *, chunk: int = CHUNK, most: int | None = None, depth: float = float("inf")):
    """The whole document ``text``, walked ``depth`` levels deep, then its end checked."""
    reader = PullReader(Trickle(text, most), chunk=chunk)
    found = walk(reader, depth)
    reader.finish()
    return found


def readers(text: str) -> list[tuple[str, Any]]:
    """(how, reader) for every small buffer and every small read of ``text``."""
    return [
        *((f"chunk={n}", PullReader(io.StringIO(text), chunk=n)) for n in CHUNKS),
        *((f"reads of {n}", PullReader(Trickle(text, n))) for n in CHUNKS),
    ]


def position(error: pytest.ExceptionInfo[StreamError]) -> int:
    found = re.search(r" at character (\d+)$", str(error.value))
    assert found, f"no position in {error.value}"
    return int(found[1])


# Walking containers --------------------------------------------------------------------------


def test_a_reader_walks_nested_objects_and_arrays_step_by_step():
    reader = PullReader(
        io.StringIO(' { "a" : [ 1 , { "b" : null } , [ ] ] , "c" : { } , "d" : "x" } \n'),
        chunk=2,
    )
    reader.begin("{")
    assert reader.next_key() == "a"
    assert reader.peek() == "["
    reader.begin("[")
    assert reader.next_item()
    assert reader.value() == 1
    assert reader.next_item()
    assert reader.peek() == "{"
    reader.begin("{")
    assert reader.next_key() == "b"
    assert reader.value() is None
    assert reader.next_key() is None
    assert reader.next_item()
    reader.begin("[")
    assert not reader.next_item()
    assert not reader.next_item()
    assert reader.next_key() == "c"
    reader.begin("{")
    assert reader.next_key() is None
    assert reader.next_key() == "d"
    assert reader.peek() == '"'
    assert reader.value() == "x"
    assert reader.next_key() is None
    assert reader.peek() == ""
    reader.finish()


def test_a_member_may_be_read_whole_after_its_key():
    reader = PullReader(io.StringIO('{"log": [{"seq": 1}, {"seq": 2}], "n": 2}'), chunk=3)
    reader.begin("{")
    assert reader.next_key() == "log"
    assert reader.value() == [{"seq": 1}, {"seq": 2}]
    assert reader.next_key() == "n"
    assert reader.value() == 2
    assert reader.next_key() is None
    reader.finish()


def test_begin_refuses_the_other_container_saying_where():
    reader = PullReader(io.StringIO('{"a": [1]}'))
    reader.begin("{")
    assert reader.next_key() == "a"
    with pytest.raises(StreamError, match=r"expected '\{', found '\['") as refused:
        reader.begin("{")
    assert position(refused) == 6


# Values cut at every buffer boundary ---------------------------------------------------------

#: Documents whose numbers are integers wherever they are walked (see the fraction cases below).
DOCUMENTS = {
    "nested": '{"a": {"b": {"c": [1, [2, [3, []]], {}]}}, "d": [[[[]]]], "e": {"f": {}}}',
    "scalars": '[true, false, null, 0, -0, 7, -12, 123, 9007199254740991, "", "s"]',
    "integers-at-the-end": '{"count": 123456789, "n": -98765, "m": [10, 200, 3000]}',
    "whitespace": ' \n\t{ "a" :\r\n [ 1 ,\t2 ] , "b" : { "c" : "d" } }\n\n',
    "escapes": (
        r'{"k\u00e9y": "a\u00e9b\n\t\"\\/", "pair": "\ud83d\ude00!", '
        r'"seq": ["\u2028", "\u0000", "\uffff", "\ud800\udc00\ud83d\ude00"], "\"": "\\"}'
    ),
    "raw-unicode": '["é", "😀", "日本語", {"ключ": "значение"}]',
    "long-string": '["' + "x" * 300 + '", "' + r"\u0041" * 50 + '"]',
    "empties": '[{}, [], "", {"": ""}, [[], {}]]',
}


@pytest.mark.parametrize("text", DOCUMENTS.values(), ids=DOCUMENTS.keys())
def test_a_walked_document_is_what_a_whole_parse_gives_at_every_boundary(text):
    expected = STRICT_DECODER.decode(text)
    for how, reader in readers(text):
        assert walk(reader) == expected, how
        reader.finish()


#: Fractions and exponents, in values read whole below the top level.
DECIMALS = '{"prices": [339.99, 1e-7, -2.5E+3, 0.1, 12.0], "o": {"p": 1.25, "q": [-0.5e-3]}}'


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        *(
            (
                pytest.param(t, d, id=f"{name}-{d}")
                for name, t in DOCUMENTS.items()
                for d in (0, 1, 2)
            )
        ),
        pytest.param(DECIMALS, 0, id="decimals-0"),
        pytest.param(DECIMALS, 1, id="decimals-1"),
    ],
)
def test_values_read_whole_below_a_walked_level_are_what_a_whole_parse_gives(text, depth):
    expected = STRICT_DECODER.decode(text)
    for n in CHUNKS:
        assert read(text, chunk=n, depth=depth) == expected, n
        assert read(text, most=n, depth=depth) == expected, n


def test_decimals_read_whole_come_back_exact():
    found = read('{"p": [339.99, 1e-7]}', chunk=1, depth=1)
    assert found == {"p": [Decimal("339.99"), Decimal("1e-7")]}
    assert all(isinstance(v, Decimal) for v in found["p"])


@pytest.mark.parametrize(
    ("text", "chunk", "expected"),
    [
        pytest.param("123", 1, 123, id="alone"),
        pytest.param("[123]", 2, [123], id="12-of-123"),
        pytest.param('{"n": 12345}', 8, {"n": 12345}, id="in-an-object"),
        pytest.param("[1, -456]", 6, [1, -456], id="negative"),
        pytest.param("[9007199254740991]", 5, [9007199254740991], id="long"),
    ],
)
def test_a_number_at_the_buffer_end_is_read_whole(text, chunk, expected):
    assert read(text, chunk=chunk) == expected
    assert read(text, most=chunk) == expected


@pytest.mark.parametrize(
    ("text", "chunk"),
    [
        pytest.param("1.5", 2, id="point"),
        pytest.param("[1.5]", 3, id="point-in-array"),
        pytest.param('{"a": 1e5}', 8, id="exponent"),
        pytest.param('{"a": 1E-5}', 9, id="exponent-sign"),
        pytest.param("[12, 1.25e+3]", 10, id="exponent-plus"),
    ],
)
def test_a_fraction_or_exponent_cut_at_the_buffer_end_is_read_whole(text, chunk):
    assert read(text, chunk=chunk) == STRICT_DECODER.decode(text)


def test_strings_with_escapes_split_anywhere_decode_to_the_same_characters():
    text = r'["\ud83d\ude00", "a\u00e9\"\\\n", "\u2028x"]'
    for how, reader in readers(text):
        found = walk(reader)
        assert found == ["\U0001f600", 'aé"\\\n', "\u2028x"], how
        assert len(found[0]) == 1, how  # one character, not two lone surrogates


def test_a_surrogate_pair_is_joined_when_its_halves_arrive_in_different_reads():
    text = '"' + r"\ud83d\ude00" * 20 + '"'
    for n in CHUNKS:
        stream = Trickle(text, n)
        assert PullReader(stream, chunk=n).value() == "\U0001f600" * 20, n
        assert stream.reads > len(text) // n - 1


# Refusals, saying where ----------------------------------------------------------------------

REFUSALS = [
    pytest.param('{"a": NaN}', "NaN is not JSON", 6, id="nan"),
    pytest.param("[1, Infinity]", "Infinity is not JSON", 4, id="infinity"),
    pytest.param('{"a": -Infinity}', "not valid JSON", 6, id="minus-infinity"),
    pytest.param("[1] x", "unexpected data after the document", 4, id="trailing-garbage"),
    pytest.param('{"a": 1}}', "unexpected data after the document", 8, id="trailing-brace"),
    pytest.param('{"a": 1} {"b": 2}', "unexpected data after the document", 9, id="two-documents"),
    pytest.param("[1 2]", "expected ','", 3, id="missing-comma-in-array"),
    pytest.param('{"a": 1 "b": 2}', "expected ','", 8, id="missing-comma-in-object"),
    pytest.param('{"a" 1}', "expected ':'", 5, id="missing-colon"),
    pytest.param("[1, 2,]", "Expecting value", 6, id="trailing-comma-in-array"),
    pytest.param('{"a": 1,}', "expected a member name", 8, id="trailing-comma-in-object"),
    pytest.param("[1,,2]", "Expecting value", 3, id="double-comma"),
    pytest.param("{1: 2}", "expected a member name", 1, id="number-as-name"),
    pytest.param('{"a": [1, {"b": ', "expected a value, found the end", 16, id="unterminated"),
    pytest.param('{"a": "abc', "Unterminated string", 6, id="unterminated-string"),
    pytest.param("", "expected a value, found the end", 0, id="empty"),
    pytest.param("  \n ", "expected a value, found the end", 4, id="blank"),
    pytest.param("[tru]", "not valid JSON", 1, id="bad-literal"),
]


@pytest.mark.parametrize(("text", "message", "at"), REFUSALS)
@pytest.mark.parametrize("chunk", [1, 3, CHUNK])
def test_a_broken_document_is_refused_saying_where(text, message, at, chunk):
    with pytest.raises(StreamError, match=re.escape(message)) as refused:
        read(text, chunk=chunk)
    assert isinstance(refused.value, ValueError)
    assert position(refused) == at


@pytest.mark.parametrize(
    ("text", "depth", "key", "at"),
    [
        pytest.param('{"a": 1, "a": 2}', 0, "a", 0, id="document"),
        pytest.param('[0, {"a": 1, "b": {"c": 1, "c": 2}}]', 1, "c", 4, id="item"),
        pytest.param('{"x": {"c": 1, "c": 2}}', 1, "c", 6, id="member"),
    ],
)
def test_duplicate_keys_in_a_value_are_refused_at_the_value(text, depth, key, at):
    for n in CHUNKS:
        with pytest.raises(StreamError, match=f"duplicate key '{key}'") as refused:
            read(text, chunk=n, depth=depth)
        assert position(refused) == at


@pytest.mark.parametrize(
    "text", ["[1, 2", '{"a": 1, "b": 22', "[" + "1, " * 1000 + "2", '{"a": [1, {"b": 2}']
)
@pytest.mark.parametrize("chunk", [1, 3, CHUNK])
def test_a_document_that_ends_after_a_value_is_refused(text, chunk):
    with pytest.raises(StreamError, match="found 'the end'"):
        read(text, chunk=chunk)


@pytest.mark.parametrize(
    ("text", "at"),
    [
        pytest.param("[1, 2", 5, id="short"),
        pytest.param('{"a": 1, "b": 22', 16, id="object"),
        pytest.param("[" + "1, " * 1000 + "2", 3002, id="long"),
    ],
)
def test_a_document_that_ends_after_a_value_is_refused_at_its_end(text, at):
    with pytest.raises(StreamError, match="found 'the end'") as refused:
        read(text)
    assert position(refused) == at


def test_the_position_counts_from_the_start_of_the_stream_after_the_buffer_moves_on():
    text = "[" + "1, " * 2000 + "1 2]"
    at = text.index(" 2]") + 1
    for n in (1, 7, 64):
        with pytest.raises(StreamError, match="expected ','") as refused:
            read(text, chunk=n)
        assert position(refused) == at, n
        with pytest.raises(StreamError, match="expected ','") as refused:
            read(text, most=n)
        assert position(refused) == at, n


# A large broken stream is refused early ------------------------------------------------------

LARGE = '{"a": [1, 2 3, ' + "4, " * 2_000_000 + '5], "b": "' + "y" * 1_000_000 + '"}'


@pytest.mark.parametrize("depth", [0, 1, float("inf")])
def test_a_syntax_error_early_in_a_large_stream_is_refused_having_read_little(depth):
    stream = Trickle(LARGE)
    with pytest.raises(StreamError) as refused:
        walk(PullReader(stream), depth)
    assert stream.served <= 2 * CHUNK < len(LARGE) // 50
    assert position(refused) == (12 if depth > 1 else 6 if depth == 1 else 0)


def test_with_small_reads_too_a_syntax_error_is_refused_near_where_it_is():
    stream = Trickle(LARGE, most=5)
    with pytest.raises(StreamError, match="expected ','"):
        walk(PullReader(stream, chunk=5))
    assert stream.served < 100


def test_a_stream_larger_than_its_buffer_is_read_to_its_end_item_by_item():
    text = '{"a": [' + "4, " * 50_000 + '5], "b": "' + "y" * 200_000 + '"}'
    stream = Trickle(text)
    reader = PullReader(stream, chunk=1000)
    reader.begin("{")
    assert reader.next_key() == "a"
    reader.begin("[")
    items = []
    while reader.next_item():
        items.append(reader.value())
    assert items == [4] * 50_000 + [5]
    assert reader.next_key() == "b"
    assert reader.value() == "y" * 200_000
    assert reader.next_key() is None
    reader.finish()
    assert stream.served == len(text)


# Lines: a value a line, unparsed ----------------------------------------------------------------

A_VALUE_A_LINE = '[\n{"a": 1},\n  {"b": [2, "x,\\n"]} ,\r\n3\n]\n'


@pytest.mark.parametrize("chunk", CHUNKS)
def test_each_line_is_its_value_s_text_and_the_reader_goes_on_after_it(chunk):
    reader = PullReader(Trickle(A_VALUE_A_LINE, most=chunk), chunk=chunk)
    reader.begin("[")
    lines = []
    while reader.next_item():
        lines.append(reader.line(100))
    reader.finish()
    # Whitespace and the comma that end a line are not its value's; an escaped newline is.
    assert lines == ['{"a": 1}', '{"b": [2, "x,\\n"]} ', "3"]
    assert [STRICT_DECODER.decode(line) for line in lines] == [{"a": 1}, {"b": [2, "x,\n"]}, 3]


def test_a_value_over_several_lines_gives_its_first_line_for_its_reader_to_refuse():
    reader = PullReader(io.StringIO('[{"a":\n 1}\n]'))
    reader.begin("[")
    assert reader.next_item()
    assert reader.line(100) == '{"a":'


@pytest.mark.parametrize(
    ("text", "limit"),
    [
        pytest.param('["abcdefgh"\n]', 5, id="longer-than-the-limit"),
        pytest.param('["abcdefgh"]', 100, id="no-line-end-before-the-document-ends"),
        pytest.param('["abcdefgh", "ij"]' + " " * 50 + "\n", 20, id="the-limit-reached-reading"),
    ],
)
@pytest.mark.parametrize("chunk", [1, 3, CHUNK])
def test_no_line_within_the_limit_is_none_and_the_reader_stays(text, limit, chunk):
    reader = PullReader(Trickle(text, most=chunk), chunk=chunk)
    reader.begin("[")
    assert reader.next_item()
    assert reader.line(limit) is None
    assert reader.value() == "abcdefgh"


def test_no_line_at_the_document_s_end_is_none():
    reader = PullReader(io.StringIO("[1,   "))
    reader.begin("[")
    assert reader.next_item()
    assert reader.value() == 1
    assert reader.next_item()
    assert reader.line(100) is None
