"""The operator commands' output and exit codes, without a cluster (the admin calls stubbed)."""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import pytest

from client_balance import _kafka, admin
from client_balance._logging import get_logger
from client_balance.cli import _data, _exporter, main
from client_balance.errors import ConfigError, KafkaClientError

EVIL = "\x1b]2;owned\x1b\\\x1b[2J\x1b[H\x9b31m"
"""Terminal sequences (a title, a clear screen, a C1 CSI) a forged status record may carry."""
CLUSTER = ["--bootstrap-servers", "127.0.0.1:1"]


def _evil_view() -> admin.GroupView:
    member = admin.MemberView(
        consumer_id="c" + EVIL, host="h" + EVIL, pid=1, node_id=0, source_count=1,
        mode="node" + EVIL, topics=("t",), strategy="s" + EVIL, version="v" + EVIL, live=True,
        fenced=False, last_seen_s=0.5, holds=("t:0",), lag=1,
    )  # fmt: skip
    return admin.GroupView(
        "g" + EVIL,
        (member,),
        (admin.PartitionView("t", 0, member.consumer_id, 1, 2),),
        conflicts=(f"node_id 0 is held by 2 live members: c{EVIL}, d{EVIL}",),
    )


def _no_control(text: str) -> None:
    assert not any(char in text for char in "\x1b\x9b\x07"), repr(text)


def test_status_shows_record_text_with_its_control_characters_escaped(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No ESC from a record's host, version, mode, id or a conflict reaches stdout in status."""
    monkeypatch.setattr(admin.GroupView, "load", staticmethod(lambda *_, **__: _evil_view()))
    assert main(["status", "--group", "g", *CLUSTER]) == 0
    out = capsys.readouterr().out
    _no_control(out)
    assert "h\\x1b]2;owned" in out


def test_groups_reap_and_errors_escape_what_records_carry(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Group names, reaped ids and an error naming live members reach no terminal raw."""
    monkeypatch.setattr(admin, "list_groups", lambda *_, **__: {"g" + EVIL: 1})
    monkeypatch.setattr(admin, "reap_dead_members", lambda *_, **__: ["c" + EVIL])

    def refuse(*_: Any, **__: Any) -> dict[str, int]:
        raise ConfigError(f"group 'g' has live members (c{EVIL}); stop them first")

    monkeypatch.setattr(admin, "reset_offsets", refuse)
    assert main(["groups", *CLUSTER]) == 0
    assert main(["reap", "--group", "g", *CLUSTER]) == 0
    assert main(["reset-offsets", "--group", "g", "--to", "earliest", *CLUSTER]) == 1
    captured = capsys.readouterr()
    _no_control(captured.out)
    _no_control(captured.err)
    assert "c\\x1b]2;owned" in captured.err


def test_log_lines_escape_what_a_skipped_record_carried(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The library's warning quoting a forged record reaches stderr without its ESCs."""

    def load(*_: Any, **__: Any) -> admin.GroupView:
        get_logger("membership").warning("status record skipped", detail="held." + EVIL)
        return _evil_view()

    monkeypatch.setattr(admin.GroupView, "load", staticmethod(load))
    assert main(["status", "--group", "g", *CLUSTER]) == 0
    err = capsys.readouterr().err
    assert "status record skipped detail=held.\\x1b]2;owned" in err
    _no_control(err)


def _interrupted(*_: Any, **__: Any) -> Any:
    raise KeyboardInterrupt


@pytest.mark.parametrize(
    ("argv", "stub"),
    [
        (["reset-offsets", "--group", "g", "--to", "earliest"], "reset_offsets"),
        (["reap", "--group", "g"], "reap_dead_members"),
        (["groups"], "list_groups"),
    ],
)
def test_ctrl_c_in_a_one_shot_command_exits_130(
    argv: list[str],
    stub: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Ctrl-C during reset-offsets, reap or groups says interrupted and exits 130, not 0."""
    monkeypatch.setattr(admin, stub, _interrupted)
    assert main([*argv, *CLUSTER]) == 130
    assert capsys.readouterr().err.strip() == "interrupted"


def test_ctrl_c_ends_the_run_until_interrupted_modes_with_0(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C is how status --watch, tail --from latest and the exporter end: exit 0, silently."""
    monkeypatch.setattr(admin.GroupView, "load", staticmethod(_interrupted))
    monkeypatch.setattr(_kafka, "follow", _interrupted)
    monkeypatch.setattr(_data, "_bounds", lambda _: ({}, {}))
    monkeypatch.setattr(_exporter, "serve_group", _interrupted)
    assert main(["status", "--group", "g", "--watch", "1", *CLUSTER]) == 0
    assert main(["tail", "--topic", "t", "--from", "latest", *CLUSTER]) == 0
    assert main(["exporter", "--group", "g", "--port", "0", *CLUSTER]) == 0
    assert main(["status", "--group", "g", *CLUSTER]) == 130  # one view: cut short
    assert capsys.readouterr().err.strip() == "interrupted"


def test_a_failed_refresh_shows_its_error_and_the_watch_goes_on(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Status --watch shows a failed refresh's error, stamped, refreshes again, and exits 0."""
    loads = iter([_evil_view, _transient, _evil_view])
    monkeypatch.setattr(admin.GroupView, "load", staticmethod(lambda *_, **__: next(loads)()))
    naps: list[float] = []
    real_sleep, this_thread = time.sleep, threading.current_thread()

    def sleep(seconds: float) -> None:
        if threading.current_thread() is not this_thread:
            real_sleep(seconds)
            return
        naps.append(seconds)
        if len(naps) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(time, "sleep", sleep)
    assert main(["status", "--group", "g", "--watch", "0.5", *CLUSTER]) == 0
    _, *views = re.split(r"^\d\d:\d\d:\d\d$", capsys.readouterr().out, flags=re.MULTILINE)
    assert naps == [0.5] * 3
    assert [view.count("live member(s)") for view in views] == [1, 0, 1]
    assert views[1].strip() == "error: reading offsets failed: _TRANSPORT"


def _transient() -> admin.GroupView:
    raise KafkaClientError(
        "reading offsets failed: _TRANSPORT", kafka_code=-195, kafka_name="_TRANSPORT"
    )


@pytest.mark.parametrize(
    ("host", "shown"),
    [("127.0.0.1", "127.0.0.1"), ("::1", "[::1]"), ("localhost", "localhost")],
)
def test_the_exporter_shows_a_url_that_can_be_pasted(host: str, shown: str) -> None:
    """An IPv6 listen address is written in brackets, as a URL needs it (http://[::1]:9100)."""
    assert _exporter._url_host(host) == shown
