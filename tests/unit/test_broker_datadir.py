"""Data dirs: LocalKafka marks those it creates, and `broker stop` deletes only a marked one."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, cast

import pytest

from client_balance.broker import LocalKafka
from client_balance.broker import _local as local
from client_balance.broker._config import Sasl
from client_balance.broker._datadir import MARKER_NAME, create_data_dir, is_marked
from client_balance.broker._node import KafkaNode, Launch
from client_balance.cli import main
from client_balance.errors import BrokerToolMissingError, ConfigError


def _state_file(tmp_path: Path, data_dir: Path) -> Path:
    # pid 1 is never our broker, so stop has no process to stop: only the data dir is at stake.
    state = tmp_path / "broker.json"
    state.write_text(
        json.dumps({
            "pid": 1, "pids": [1], "bootstrap_servers": "127.0.0.1:1", "data_dir": str(data_dir),
            "log": str(data_dir / "broker.log"), "owns_data_dir": True,
        })
    )  # fmt: skip
    return state


def test_stop_refuses_to_delete_a_data_dir_without_the_marker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A state file naming a folder LocalKafka did not create never gets that folder deleted."""
    precious = tmp_path / "home"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    state = _state_file(tmp_path, precious)
    assert main(["broker", "stop", "--state-file", str(state)]) == 1
    assert (precious / "thesis.tex").read_text() == "years of work"
    err = capsys.readouterr().err
    assert "refusing to delete" in err
    assert MARKER_NAME in err
    assert not state.exists()


def test_stop_refuses_a_marker_that_is_a_link(tmp_path: Path) -> None:
    """A marker planted as a symlink to a real marker does not count."""
    real = create_data_dir(tmp_path / "real")
    other = tmp_path / "other"
    other.mkdir()
    (other / MARKER_NAME).symlink_to(real / MARKER_NAME)
    assert not is_marked(other)
    assert main(["broker", "stop", "--state-file", str(_state_file(tmp_path, other))]) == 1
    assert other.is_dir()


def test_stop_deletes_a_data_dir_that_localkafka_created(tmp_path: Path) -> None:
    """The data dir of a detached broker, marked when it was made, is deleted by stop."""
    data_dir = create_data_dir(tmp_path / "cache" / "broker-data-1")
    (data_dir / "kraft-logs").mkdir()
    assert main(["broker", "stop", "--state-file", str(_state_file(tmp_path, data_dir))]) == 0
    assert not data_dir.exists()


def test_stop_is_fine_when_the_data_dir_is_gone(tmp_path: Path) -> None:
    """A recorded data dir that no longer exists is nothing to refuse."""
    state = _state_file(tmp_path, tmp_path / "gone")
    assert main(["broker", "stop", "--state-file", str(state)]) == 0


@pytest.fixture
def no_jvm(monkeypatch: pytest.MonkeyPatch) -> None:
    """LocalKafka.start() makes its data dir but starts no Java and fetches no jars."""
    monkeypatch.setattr(local, "find_java", lambda: "java")
    monkeypatch.setattr(local, "ensure_kafka_jars", lambda *_a, **_k: Path("/nonexistent/libs"))
    monkeypatch.setattr(LocalKafka, "_start_once", lambda *_a: None)


@pytest.mark.usefixtures("no_jvm")
def test_localkafka_marks_only_the_data_dirs_it_creates(tmp_path: Path) -> None:
    """A temp dir and a new data_dir get the marker; a folder that existed does not."""
    temporary = LocalKafka().start()
    assert is_marked(temporary.data_dir)
    temporary.stop()  # a temp dir is deleted on stop
    created = LocalKafka(data_dir=tmp_path / "new" / "kafka").start()
    assert is_marked(created.data_dir)
    existing = tmp_path / "mine"
    existing.mkdir()
    assert not is_marked(LocalKafka(data_dir=existing).start().data_dir)
    assert not (existing / MARKER_NAME).exists()


@pytest.mark.usefixtures("no_jvm")
def test_a_secured_localkafka_keeps_its_admin_password_for_restarts(tmp_path: Path) -> None:
    """A random admin password is kept in the data dir, so a restart on it logs in again."""
    first = LocalKafka(data_dir=tmp_path / "kafka", security="SASL_PLAINTEXT").start()
    password = first.admin_config["sasl.password"]
    again = LocalKafka(data_dir=tmp_path / "kafka", security="SASL_PLAINTEXT").start()
    assert again.admin_config["sasl.password"] == password
    assert password not in repr(again)
    assert LocalKafka().admin_config == {}


def test_localkafka_refuses_security_it_cannot_run() -> None:
    """Unsupported protocols, mechanisms and passwords are refused, naming no password."""
    with pytest.raises(ConfigError, match="SASL_SSL"):
        LocalKafka(security="SASL_SSL")
    with pytest.raises(ConfigError, match="PLAIN"):
        LocalKafka(security="SASL_PLAINTEXT", mechanism="PLAIN")
    with pytest.raises(ConfigError, match="admin_password") as raised:
        LocalKafka(security="SASL_PLAINTEXT", admin_password="a,b=[c]")  # noqa: S106
    assert "a,b=[c]" not in str(raised.value)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"port": 70000}, "port=70000"),
        ({"port": -1}, "port=-1"),
        ({"port": "9092"}, "port='9092'"),
        ({"heap_mb": 0}, "heap_mb=0"),
        ({"heap_mb": 12.5}, "heap_mb=12.5"),
        ({"startup_timeout_s": 0}, "startup_timeout_s=0"),
        ({"stop_timeout_s": -1.0}, "stop_timeout_s=-1.0"),
    ],
)
def test_localkafka_refuses_a_port_heap_or_timeout_it_cannot_use(
    options: dict[str, object], named: str
) -> None:
    """A bad port, heap or timeout is named with what is allowed, before any JVM is started.

    A port of 70000 or a heap of 0 reached the JVM, which failed after seconds with its own
    words (or the CLI's ``broker start --port -1`` printed a traceback).
    """
    with pytest.raises(ConfigError, match=re.escape(named)) as raised:
        LocalKafka(**options)  # type: ignore[arg-type]
    assert "use" in str(raised.value)


def test_the_broker_command_refuses_a_port_out_of_range(capsys: pytest.CaptureFixture[str]) -> None:
    """``broker start --port 70000`` is a usage error naming the port; no JVM is started."""
    assert main(["broker", "start", "--port", "70000"]) == 2
    assert "'70000' is not allowed; use a port from 1 to 65535" in capsys.readouterr().err


def test_a_start_that_fails_before_its_nodes_leaves_no_data_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No Java (or no jars): the temporary data dir it made goes with the failed start.

    The cleanup was registered only once the nodes were formatted: an earlier failure left a
    client-balance-kafka-* folder behind for good (the review of 2026-11-29).
    """
    made: list[Path] = []

    def made_here(data_dir: Path | None) -> Path:
        made.append(create_data_dir(data_dir or tmp_path / "kafka"))
        return made[-1]

    def no_java() -> str:
        raise BrokerToolMissingError("java 17 or later was not found", tool="java")

    monkeypatch.setattr(local, "create_data_dir", made_here)
    monkeypatch.setattr(local, "find_java", no_java)
    with pytest.raises(BrokerToolMissingError):
        LocalKafka().start()
    assert made
    assert not made[0].exists()


@pytest.mark.parametrize(
    "content",
    ["[]", '"x"', '{"pids": 5, "data_dir": "/d", "bootstrap_servers": "h:1", "log": "l"}',
     '{"pid": 1, "data_dir": "/d"}', "[" * 100_000],
)  # fmt: skip
def test_a_state_file_of_another_shape_is_no_broker_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str
) -> None:
    """The state file is plain JSON anyone can edit: one `broker start` did not write is ignored.

    A list, a string, a number for the pids or a missing address raised AttributeError,
    TypeError or KeyError from `broker status` and `broker stop` (the review of 2026-11-29).
    """
    state = tmp_path / "broker.json"
    state.write_text(content)
    assert main(["broker", "status", "--state-file", str(state)]) == 1
    assert main(["broker", "stop", "--state-file", str(state)]) == 1
    assert "Traceback" not in capsys.readouterr().err


def test_the_admin_password_is_never_on_a_command_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The format of a SASL broker reads its arguments from a file only its owner can read.

    ``--add-scram ...password=...`` was on StorageTool's command line, which every local user
    can read in /proc/<pid>/cmdline while the format runs (the review of 2026-11-29, later).
    """
    commands: list[list[str]] = []

    class _Tool:
        returncode = 0

        def __init__(self, command: list[str], **_options: object) -> None:
            commands.append(command)
            [argfile] = [part[1:] for part in command if part.startswith("@")]
            self.argfile = Path(argfile)
            self.mode = self.argfile.stat().st_mode & 0o777
            self.arguments = self.argfile.read_text()

        def communicate(self, timeout: float | None = None) -> tuple[str, str]:
            return "", ""

    monkeypatch.setattr("client_balance.broker._node.subprocess.Popen", _Tool)
    sasl = Sasl.for_data_dir("SCRAM-SHA-512", "admin", "S3CRETadminpw", tmp_path)
    launch = Launch(
        java="java", libs=tmp_path, version="4.3.1", heap_mb=512, die_with_parent=True,
        class_data_sharing=False, progress=None, sasl=sasl,
    )  # fmt: skip
    kafka_node = KafkaNode(1, tmp_path, launch, dumps_cds=True)
    tool = kafka_node.start_format("cluster-id", standalone=True)
    assert not [part for part in commands[0] if "S3CRET" in part]
    assert isinstance(tool, _Tool)
    assert tool.mode == 0o600
    assert "kafka.tools.StorageTool" in tool.arguments
    assert "password=S3CRETadminpw" in tool.arguments
    kafka_node.check_format(cast(Any, tool))
    assert not tool.argfile.exists()  # gone once the tool is done


def test_a_java_that_does_not_run_is_one_line_and_leaves_no_data_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A `java` that is not executable: `broker start` says so in one line, exit 1, no leftovers.

    It was a PermissionError traceback, and a broker-data-* folder stayed behind (review r6,
    items 11 and 8).
    """
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    java.chmod(0o644)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    monkeypatch.setenv("CLIENT_BALANCE_KAFKA_HOME", str(tmp_path / "cache" / "kafka"))
    assert main(["broker", "start", "--state-file", str(tmp_path / "broker.json")]) == 1
    err = capsys.readouterr().err
    assert f"error: cannot start Apache Kafka: {java} does not run" in err
    assert list((tmp_path / "cache").iterdir()) == []
