import json
import logging
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from client_balance import admin
from client_balance.cli import _NEEDS_RICH, _render, main
from client_balance.errors import ConfigError
from client_balance.settings import ClientBalanceSettings
from tests.source_scan import calls, imports

CLI_PACKAGE = Path(_render.__file__).parent
SIMULATION_MODULE = CLI_PACKAGE.parent / "strategies" / "simulation.py"
STATUS_ARGV = ["status", "--group", "orders", "--bootstrap-servers", "127.0.0.1:1"]
SIMULATE_ARGV = ["simulate", "--topics", "Order:7,Stock:5", "--members", "C1,C2,C3"]


def _member(consumer_id: str, **changes: Any) -> admin.MemberView:
    fields: dict[str, Any] = {
        "consumer_id": consumer_id,
        "host": "host-a",
        "pid": 7,
        "node_id": 0,
        "source_count": 2,
        "mode": "node",
        "topics": ("t",),
        "strategy": "modulo",
        "version": "0.1.0",
        "live": True,
        "fenced": False,
        "last_seen_s": 1.5,
        "holds": ("t:0",),
        "lag": 3,
    }
    return admin.MemberView(**{**fields, **changes})


VIEW = admin.GroupView(
    group="orders",
    members=(
        _member("c-0"),
        _member("[red]c-1", node_id=-1, mode="elastic", live=False, fenced=True, holds=()),
    ),
    partitions=(
        admin.PartitionView("t", 0, "c-0", 5, 8),
        admin.PartitionView("t", 1, None, None, 4),
    ),
    conflicts=("node 0 is claimed twice",),
)


@pytest.fixture
def group_view(monkeypatch: pytest.MonkeyPatch) -> None:
    """`status` shows VIEW instead of reading a cluster."""

    def load(
        settings: ClientBalanceSettings, group: str | None = None, **_: Any
    ) -> admin.GroupView:
        logging.getLogger("client_balance.test").info("view loaded", extra={"group": group})
        return VIEW

    monkeypatch.setattr(admin.GroupView, "load", staticmethod(load))


@pytest.fixture
def tables(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The header of every table drawn through cli._render.table, in order."""
    headers: list[list[str]] = []
    draw = _render.table

    def recording(
        header: Sequence[str], rows: Any, *, right_from: int | None = None
    ) -> _render.Renderable:
        headers.append(list(header))
        return draw(header, rows, right_from=right_from)

    monkeypatch.setattr(_render, "table", recording)
    return headers


# --- usage -----------------------------------------------------------------------------------


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown command is a usage error, not a crash."""
    assert main(["no-such-command"]) == 2
    assert "invalid choice" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["status"], "the following arguments are required: --group"),
        (["status", "--group", "g", "--watch", "soon"], "invalid float value: 'soon'"),
        (["simulate", "--members", "C1"], "the following arguments are required: --topics"),
        (["broker"], "the following arguments are required: ACTION"),
        (["reset-offsets", "--group", "g"], "the following arguments are required: --to"),
        ([], "the following arguments are required: COMMAND"),
        # An empty value names nothing: it must not fall back to another cluster or topic.
        (["reset-offsets", "--group", "", "--to", "earliest"], "--group: '' is not allowed"),
        (["status", "--group", "g", "--bootstrap-servers", ""], "--bootstrap-servers: ''"),
        (["lag", "--group", "g", "--status-topic", " "], "--status-topic: ' ' is not allowed"),
        (["exporter", "--group", "", "--port", "0"], "--group: '' is not allowed"),
        (["broker", "start", "--brokers", "abc"], "'abc' is not allowed; use a node count of 1"),
        (["broker", "start", "--port", "\u00b2"], "use a port from 1 to 65535"),
        (["broker", "start", "--heap-mb", "-5"], "'-5' is not allowed; use a heap in MiB of 128"),
    ],
)
def test_missing_or_malformed_arguments_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing or malformed argument of any command returns 2 and says what is wrong."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert message in captured.err
    assert captured.out == ""


@pytest.mark.parametrize(
    "argv",
    [
        ["simulate", "--topics=--", "--members", "C1"],
        ["simulate", "--topics", "t:2", "--members", "C1", "--then-add=--"],
        ["status", "--group=--", "--bootstrap-servers", "127.0.0.1:1"],
        ["reset-offsets", "--group", "g", "--to=--", "--bootstrap-servers", "127.0.0.1:1"],
    ],
)
def test_an_option_given_double_dash_is_a_usage_error(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """--option=-- (which argparse turns into an unconverted []) exits 2, never a traceback."""
    assert main(argv) == 2
    assert "'--' is not a value" in capsys.readouterr().err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    """--help prints the commands and succeeds."""
    assert main(["broker", "--help"]) == 0
    assert "start" in capsys.readouterr().out


def test_top_level_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    """The command's help names each command group's commands."""
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("broker", "simulate", "status", "groups", "reset-offsets"):
        assert command in out


# --- broker ----------------------------------------------------------------------------------


def test_status_and_stop_without_a_broker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With no recorded broker, status and stop say so and fail."""
    state = tmp_path / "none.json"
    assert main(["broker", "status", "--state-file", str(state)]) == 1
    assert "no broker is running" in capsys.readouterr().err
    assert main(["broker", "stop", "--state-file", str(state)]) == 1
    assert "no detached broker" in capsys.readouterr().err


def test_stale_state_file_is_recognized(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A state file whose pid is not our broker (reused or dead) is reported as stale."""
    state = tmp_path / "stale.json"
    state.write_text(
        '{"pid": 1, "bootstrap_servers": "127.0.0.1:1", "data_dir": "/nowhere", "log": "x"}'
    )
    assert main(["broker", "status", "--state-file", str(state)]) == 1
    assert "stale state file" in capsys.readouterr().err
    assert main(["broker", "stop", "--state-file", str(state)]) == 0
    assert not state.exists()


# --- status, groups, reset-offsets -----------------------------------------------------------


@pytest.mark.usefixtures("group_view")
def test_status_prints_the_group_as_plain_tables(capsys: pytest.CaptureFixture[str]) -> None:
    """Status shows the summary, member and partition tables and conflicts as plain text."""
    assert main(STATUS_ARGV) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == [
        "group orders: 1 live member(s), 2 partition(s), 1 orphaned, total lag 7",
        "",
        "MODE     NODE  HOST:PID  STATE   SEEN  HOLDS  LAG  MEMBER",
        "node     0     host-a:7  live    1.5s  1      3    c-0",
        "elastic  -     host-a:7  fenced  1.5s  0      3    [red]c-1",
        "",
        "PARTITION  HOLDER      COMMITTED  HIGH  LAG",
        "t:0        c-0         5          8     3",
        "t:1        (orphaned)  -          4     4",
        "",
        "CONFLICTS:",
        "  node 0 is claimed twice",
    ]
    assert "\x1b" not in out


@pytest.mark.usefixtures("group_view")
def test_status_and_simulate_tables_come_from_the_one_renderer(
    tables: list[list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    """Every table of status and simulate is drawn by cli._render.table."""
    assert main(STATUS_ARGV) == 0
    assert main([*SIMULATE_ARGV, "--strategy", "range"]) == 0
    assert main([*SIMULATE_ARGV, "--compare"]) == 0
    assert tables == [
        ["MODE", "NODE", "HOST:PID", "STATE", "SEEN", "HOLDS", "LAG", "MEMBER"],
        ["PARTITION", "HOLDER", "COMMITTED", "HIGH", "LAG"],
        ["member", "partitions", "count"],
        ["strategy", "C1", "C2", "C3", "balance", "moves", "taken", "rebalances"],
    ]
    assert "MEMBER" in capsys.readouterr().out


_WITHOUT_RICH = """
import runpy, sys
sys.modules["rich"] = None  # as in an install without the cli extra: importing it fails
sys.argv = ["client-balance", *sys.argv[1:]]
runpy.run_module("client_balance", run_name="__main__")
"""


def test_without_rich_the_command_says_which_extra_to_install() -> None:
    """No rich (a library install): the command names the cli extra and exits 1, no traceback."""
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_RICH, "broker", "status", "--bootstrap", "127.0.0.1:1"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (1, "", _NEEDS_RICH)
    assert "pip install 'client-balance[cli]'" in _NEEDS_RICH


def test_the_library_runs_without_rich() -> None:
    """A consumer's modules, the broker and the Spark source import no rich: it is the cli extra."""
    done = subprocess.run(
        [
            sys.executable, "-c",
            "import sys; sys.modules['rich'] = None; import client_balance, "
            "client_balance.broker, client_balance.admin, client_balance.spark, "
            "client_balance.testing, client_balance.strategies.simulation",
        ],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_only_the_renderer_draws(capsys: pytest.CaptureFixture[str]) -> None:
    """Only cli/_render.py imports rich or prints; the simulation module does neither."""
    for module in CLI_PACKAGE.glob("*.py"):
        if module.name != "_render.py":
            assert not {m for m in imports(module) if m.split(".")[0] == "rich"}, module.name
            assert len(calls(module, "print")) == 0, module.name
    assert not {m for m in imports(SIMULATION_MODULE) if m.split(".")[0] == "rich"}
    assert len(calls(SIMULATION_MODULE, "print")) == 0
    assert "sys" not in imports(SIMULATION_MODULE)


@pytest.mark.usefixtures("group_view")
def test_status_json_is_the_view_as_data(capsys: pytest.CaptureFixture[str]) -> None:
    """The JSON of status is the view's dict."""
    assert main([*STATUS_ARGV, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown == json.loads(json.dumps(VIEW.to_dict()))


@pytest.mark.usefixtures("group_view")
def test_status_watch_appends_each_view_when_not_a_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--watch to a pipe prints each refresh after the last, stamped, without escape codes."""
    naps: list[float] = []
    real_sleep, this_thread = time.sleep, threading.current_thread()

    def sleep(seconds: float) -> None:
        if threading.current_thread() is not this_thread:
            real_sleep(seconds)  # time.sleep is every thread's: a Spark session's py4j sleeps too
            return
        naps.append(seconds)
        if len(naps) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(time, "sleep", sleep)
    assert main([*STATUS_ARGV, "--watch", "0.5"]) == 0
    out = capsys.readouterr().out
    assert naps == [0.5, 0.5]
    assert out.count("group orders: 1 live member(s)") == 2
    assert "\x1b" not in out


@pytest.mark.usefixtures("group_view")
def test_library_logs_go_to_stderr_only_while_the_command_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The command shows the library's log events with their fields on stderr, then stops."""
    library = logging.getLogger("client_balance")
    handlers = list(library.handlers)
    assert main(STATUS_ARGV) == 0
    err = capsys.readouterr().err
    assert "view loaded group=orders" in err
    assert library.handlers == handlers


def test_groups_lists_groups_in_a_table(
    monkeypatch: pytest.MonkeyPatch,
    tables: list[list[str]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Groups shows each group and its member count through the one table renderer."""
    found: Mapping[str, int] = {"orders": 3, "payments-eu": 1}
    monkeypatch.setattr(admin, "list_groups", lambda settings, **_: found)
    assert main(["groups", "--bootstrap-servers", "127.0.0.1:1"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "GROUP        MEMBERS",
        "orders       3",
        "payments-eu  1",
    ]
    assert tables == [["GROUP", "MEMBERS"]]
    assert main(["groups", "--bootstrap-servers", "127.0.0.1:1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == found


def test_a_cluster_is_required(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --bootstrap-servers, the variable or a running broker, status fails and says how."""
    monkeypatch.delenv("CLIENT_BALANCE_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert main(["status", "--group", "orders"]) == 1
    assert "no cluster given: pass --bootstrap-servers" in capsys.readouterr().err


# --- simulate --------------------------------------------------------------------------------


def test_wide_tables_are_not_wrapped_when_not_a_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Piped output keeps each table row on one line, however long."""
    argv = ["simulate", "--topics", "t:2000", "--members", "C1,C2", "--strategy", "range"]
    assert main(argv) == 0
    [row] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("C1 ")]
    assert row.split() == ["C1", *(f"t-{number}" for number in range(1000)), "1000"]


# --- hostile arguments and settings ------------------------------------------------------------

CANARY = "canary-pw-5e1d"


@pytest.fixture
def no_cluster_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every admin call the commands could make is recorded and answered offline."""
    called: list[str] = []

    def recorder(name: str, answer: Any) -> Any:
        def call(*_: Any, **__: Any) -> Any:
            called.append(name)
            return answer

        return call

    monkeypatch.setattr(admin.GroupView, "load", staticmethod(recorder("load", VIEW)))
    monkeypatch.setattr(admin, "reset_offsets", recorder("reset_offsets", {}))
    monkeypatch.setattr(admin, "reap_dead_members", recorder("reap_dead_members", []))
    return called


@pytest.mark.parametrize("seconds", ["-1", "0", "-0.0", "inf", "nan", "NaN", "1e400", "86401"])
def test_watch_must_be_a_positive_finite_period(
    seconds: str,
    no_cluster_calls: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A --watch of -1, 0, inf or nan is a usage error naming the option and what is allowed."""
    # The CLI's own watch loop, not time.sleep: that is every thread's (a Spark session's
    # py4j worker sleeps in this process too, and failed in its thread while it was patched).
    monkeypatch.setattr(_render, "watch", lambda *_: pytest.fail("--watch watched"))
    assert main([*STATUS_ARGV, "--watch", seconds]) == 2
    err = capsys.readouterr().err
    assert f"argument --watch: {seconds!r} is not allowed" in err
    assert "finite number of seconds > 0" in err
    assert no_cluster_calls == []


@pytest.mark.parametrize(
    "to", ["-2", "-1", "-0", "+5", "1.5", "", " ", "1_000", "\u0665", "9" * 30]
)
def test_reset_to_refuses_negative_and_malformed_times(
    to: str, no_cluster_calls: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """reset-offsets --to -2 is refused (it is Kafka's earliest sentinel), as is any non-time."""
    argv = ["reset-offsets", "--group", "g", "--bootstrap-servers", "127.0.0.1:1", "--to", to]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"argument --to: {to!r} is not allowed" in err
    assert "a whole number >= 0" in err
    assert no_cluster_calls == []


@pytest.mark.parametrize("to", ["earliest", "latest", "LATEST", "0", "1700000000000"])
def test_reset_to_takes_names_and_times(to: str, no_cluster_calls: list[str]) -> None:
    """Named positions and times >= 0 reach reset_offsets."""
    argv = ["reset-offsets", "--group", "g", "--bootstrap-servers", "127.0.0.1:1", "--to", to]
    assert main(argv) == 0
    assert no_cluster_calls == ["reset_offsets"]


@pytest.mark.parametrize(
    ("group", "to", "topics"),
    [
        ("g", "-2", ()),
        ("g", "-1", ()),
        ("g", "1e3", ()),
        ("g", "earliest", ("bad topic",)),
        # The live check judged settings.group_id while the commit went to group "".
        ("", "earliest", ()),
    ],
)
def test_reset_offsets_refuses_bad_input_before_any_request(
    monkeypatch: pytest.MonkeyPatch, group: str, to: str, topics: tuple[str, ...]
) -> None:
    """The library call refuses a blank group, a negative time or a bad topic before reading."""

    def load(*_: Any, **__: Any) -> admin.GroupView:
        raise AssertionError("the cluster was asked")

    monkeypatch.setattr(admin.GroupView, "load", staticmethod(load))
    settings = ClientBalanceSettings(bootstrap_servers="127.0.0.1:1", group_id="g")
    with pytest.raises(ConfigError):
        admin.reset_offsets(settings, group, to, topics=topics)


@pytest.mark.parametrize("seconds", ["-1", "nan", "inf", "-inf", "1e400"])
def test_reap_age_must_be_finite_and_not_negative(
    seconds: str, no_cluster_calls: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Reap's --older-than-s takes a finite time >= 0; nan and inf never reach the cluster."""
    argv = ["reap", "--group", "g", "--bootstrap-servers", "127.0.0.1:1"]
    assert main([*argv, f"--older-than-s={seconds}"]) == 2
    assert "argument --older-than-s:" in capsys.readouterr().err
    assert no_cluster_calls == []


def test_config_errors_are_one_line_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ConfigError, even one with line breaks, ends the command with one line and code 1."""

    def load(*_: Any, **__: Any) -> admin.GroupView:
        raise ConfigError("first\nsecond")

    monkeypatch.setattr(admin.GroupView, "load", staticmethod(load))
    assert main(STATUS_ARGV) == 1
    captured = capsys.readouterr()
    assert captured.err == "error: first second\n"
    assert captured.out == ""


@pytest.mark.parametrize(
    "kafka",
    [
        "{not json",
        f'{{"sasl.password": "{CANARY}"',
        f'{{"sasl.password": ["{CANARY}"]}}',
        f'{{"sasl.password": {{"x": "{CANARY}"}}}}',
        f'{{"sasl.password": "{CANARY}", "group.id": "x"}}',
        f'{{"sasl.password": "{CANARY}", "enable.auto.commit": "yes"}}',
        f'["{CANARY}"]',
    ],
)
@pytest.mark.usefixtures("no_cluster_calls")
def test_bad_kafka_settings_end_with_one_line_and_no_secret(
    kafka: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A malformed CLIENT_BALANCE_KAFKA is one line on stderr, exit 1, and never the secret."""
    monkeypatch.setenv("CLIENT_BALANCE_KAFKA", kafka)
    for argv in (
        STATUS_ARGV,
        ["groups", "--bootstrap-servers", "127.0.0.1:1"],
        ["reap", "--group", "g", "--bootstrap-servers", "127.0.0.1:1"],
        ["reset-offsets", "--group", "g", "--bootstrap-servers", "127.0.0.1:1", "--to", "0"],
    ):
        assert main(argv) == 1, argv
        captured = capsys.readouterr()
        assert captured.err.startswith("error: ")
        assert captured.err.count("\n") == 1
        assert "kafka" in captured.err.lower()
        assert CANARY not in captured.err + captured.out


def test_rich_is_the_command_lines_extra_not_a_dependency_of_the_library() -> None:
    """pyproject.toml: rich only in the cli extra, which make's environment installs."""
    root = CLI_PACKAGE.parents[1]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if d.startswith("rich")]
    assert [d for d in project["optional-dependencies"]["cli"] if d.startswith("rich")]
    assert "[test,spark,cli]" in (root / "Makefile").read_text()
