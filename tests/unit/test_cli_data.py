"""Edge cases of `client-balance tail`'s arguments and decoding, and of `lag`'s view."""

import json
from typing import Any

import pytest

from client_balance import admin
from client_balance.cli import _data, main
from client_balance.keys import TopicPartition

P0, P1, P2 = (TopicPartition("t", number) for number in range(3))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("earliest", _data.From("earliest")),
        ("latest", _data.From("latest")),
        ("0", _data.From("offset", 0)),
        ("42", _data.From("offset", 42)),
        ("-3", _data.From("last", 3)),
    ],
)
def test_from_accepts_its_four_forms(text: str, expected: _data.From) -> None:
    """--from takes earliest, latest, an offset and -N."""
    assert _data.parse_from(text) == expected


@pytest.mark.parametrize("text", ["-0", "--1", "1.5", "", "newest", "٣", "+4", " 4"])
def test_from_refuses_anything_else_naming_it(
    text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad --from exits 2 (usage) with the value and the forms allowed."""
    assert main(["tail", "--topic", "t", f"--from={text}"]) == 2
    error = capsys.readouterr().err
    assert repr(text) in error
    assert "earliest, latest" in error


@pytest.mark.parametrize("option", ["--count=0", "--count=-1", "--partition=-1", "--count=x"])
def test_tail_refuses_counts_and_partitions_out_of_range(
    option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--count must be >= 1 and --partition >= 0."""
    assert main(["tail", "--topic", "t", option]) == 2
    assert "whole number" in capsys.readouterr().err


def test_share_is_as_even_as_the_partitions_allow() -> None:
    """A short partition gives its spare share to the others; nothing is taken twice."""
    assert _data.share({P0: 1, P1: 10, P2: 10}, 9) == {P0: 1, P1: 4, P2: 4}
    assert _data.share({P0: 2, P1: 2}, 10) == {P0: 2, P1: 2}
    assert _data.share({P0: 0, P1: 5}, 3) == {P0: 0, P1: 3}
    assert sum(_data.share({P0: 7, P1: 7, P2: 7}, 10).values()) == 10


@pytest.mark.parametrize(
    ("raw", "deserializer", "shown", "decoded"),
    [
        (None, "json", "(null)", True),
        (b"caf\xc3\xa9", "str", "café", True),
        (b"caf\xc3\xa9", "bytes", r"caf\xc3\xa9", True),
        (b"\xff\xfe", "str", r"\xff\xfe", False),
        (b'{"a": [1, 2]}', "json", '{"a":[1,2]}', True),
        (b"{not json", "json", "{not json", False),
        (b"\x1b[2Jred", "str", r"\x1b[2Jred", True),  # no escape sequence reaches a terminal
        (b'"\\u001b"', "json", r'"\u001b"', True),
        (b'"\\ud800"', "json", r'"\ud800"', True),  # a lone surrogate: no output takes one
        (b"[" * 100_000, "json", "[" * 100_000, False),  # deeper than json recurses
    ],
)
def test_decode_shows_what_it_can_and_escapes_the_rest(
    raw: bytes | None, deserializer: str, shown: str, decoded: bool
) -> None:
    """A value that fails its deserializer is its escaped bytes; control characters escape."""
    assert _data.decode(raw, deserializer) == (shown, decoded)


def test_lag_json_lists_each_partition_with_totals(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`lag --json` lists the partitions as the view has them, lag from the committed offset."""
    view = admin.GroupView(
        group="orders",
        members=(),
        partitions=(
            admin.PartitionView("t", 0, "c-0", 5, 8, position=6),
            admin.PartitionView("t", 1, None, None, 4),
        ),
    )

    def load(*_args: Any, **_kwargs: Any) -> admin.GroupView:
        return view

    monkeypatch.setattr(admin.GroupView, "load", load)
    argv = ["lag", "--group", "orders", "--bootstrap-servers", "127.0.0.1:1"]
    assert main([*argv, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["total_lag"] == 7
    assert shown["partitions"][0] == {
        "topic": "t", "partition": 0, "holder": "c-0", "position": 6, "committed": 5,
        "high": 8, "lag": 3,
    }  # fmt: skip
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "group orders: 2 partition(s), 1 held by 1 member(s), total lag 7"
    assert lines[4].split() == ["t", "1", "(nobody)", "-", "-", "4", "4"]
    assert lines[5].split() == ["TOTAL", "1", "member(s)", "7"]
