"""`broker start` records its broker at once, alone, and `status`/`stop` act on that very process.

The brokers here are stand-ins (tests/unit/broker_stand_in.py): sleeping processes whose
command line reads ``kafka.Kafka <data_dir>/server.properties``. Every test stops the ones it
made by pid.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from client_balance._kafka import wait_until
from client_balance.broker._datadir import is_marked
from client_balance.broker._process import alive
from client_balance.cli import _broker as cli_broker
from client_balance.cli import main
from tests.unit.broker_stand_in import PID_FILE, StandInKafka, spawn_stand_in

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[type[StandInKafka]]:
    """The CLI starts stand-in brokers (data dirs under tmp_path); all are stopped after."""
    monkeypatch.setattr(cli_broker, "LocalKafka", StandInKafka)
    monkeypatch.setenv("CLIENT_BALANCE_KAFKA_HOME", str(tmp_path / "home" / "kafka"))
    StandInKafka.made, StandInKafka.ready_s, StandInKafka.lives_s = [], 0.0, 60.0
    yield StandInKafka
    for kafka in StandInKafka.made:
        kafka.stop()


def _gone(pid: int) -> bool:
    return bool(wait_until(lambda: not alive(pid), timeout_s=10.0))


def start_time(pid: int) -> int:
    """Field 22 of /proc/<pid>/stat, read apart from the code under test."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[19])


def _kill(pid: int) -> None:
    if alive(pid):
        os.kill(pid, signal.SIGKILL)


def _state(path: Path) -> dict[str, Any]:
    return cast(dict[str, Any], json.loads(path.read_text()))


# --- a start that is cut short -----------------------------------------------------------------


def _start_in_a_process(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path, int]:
    """A `broker start` whose broker never gets ready; returns it, its state file, the pid."""
    state, data_dir = tmp_path / "broker.json", tmp_path / "data"
    command = [sys.executable, "-m", "tests.unit.broker_stand_in", "broker", "start",
               "--state-file", str(state), "--data-dir", str(data_dir)]  # fmt: skip
    starter = subprocess.Popen(
        command, cwd=REPO, env={**os.environ, "STAND_IN_READY_S": "60"}, stderr=subprocess.PIPE
    )
    pid_file = data_dir / PID_FILE
    assert wait_until(pid_file.is_file, timeout_s=30.0), "the stand-in broker never started"
    return starter, state, int(pid_file.read_text())


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_start_ended_by_sigterm_or_sighup_stops_its_broker(
    tmp_path: Path, signum: signal.Signals
) -> None:
    """`timeout`, a closed terminal or a cancelled CI step: the broker goes with the start.

    Python ended without unwinding, and the JVM ran on, recorded nowhere (review r6, item 1).
    """
    starter, state, pid = _start_in_a_process(tmp_path)
    try:
        starter.send_signal(signum)
        _, err = starter.communicate(timeout=30)
        assert starter.returncode == 128 + signum
        assert _gone(pid)
        assert not state.exists()
        assert f"{signum.name} while the broker started: it was stopped" in err.decode()
    finally:
        _kill(pid)
        starter.kill()


def test_a_start_killed_outright_leaves_its_broker_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SIGKILL cannot be caught: the state file, written once the JVMs exist, lets stop find them.

    The file was written only after the broker was ready (review r6, item 1).
    """
    starter, state, pid = _start_in_a_process(tmp_path)
    try:
        starter.kill()
        starter.wait(timeout=30)
        assert alive(pid)
        assert _state(state)["pids"] == [pid]
        assert main(["broker", "stop", "--state-file", str(state)]) == 0
        assert _gone(pid)
        assert f"(pid {pid})" in capsys.readouterr().err
    finally:
        _kill(pid)


def test_a_state_file_that_cannot_be_written_stops_the_broker_in_one_line(
    stand_in: type[StandInKafka], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A directory where the state file goes: the broker is stopped, one line, exit 1.

    `touch()` passed on a directory and the write after `detach()` raised IsADirectoryError:
    a traceback, and a broker that nothing tracked (review r6, item 3).
    """
    state = tmp_path / "state-dir-by-mistake"
    state.mkdir()
    args = ["broker", "start", "--state-file", str(state), "--data-dir", str(tmp_path / "d")]
    assert main(args) == 1
    [kafka] = stand_in.made
    assert kafka.process is not None
    assert kafka.process.poll() is not None
    err = capsys.readouterr().err
    assert f"cannot write the state file {state}" in err
    assert "the broker was stopped" in err
    assert len(err.strip().splitlines()) == 1
    assert [p.name for p in state.iterdir()] == []  # no temp file left either
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    assert main(["broker", "start", "--state-file", str(blocked / "broker.json")]) == 1
    assert "cannot lock the state file" in capsys.readouterr().err
    assert len(stand_in.made) == 1  # checked before any broker starts


def test_the_state_file_is_its_owners_alone_and_replaced_whole(
    stand_in: type[StandInKafka], tmp_path: Path
) -> None:
    """Written through a temp file and a rename, mode 0600, with no temp file left over."""
    state = tmp_path / "broker.json"
    state.write_text("{}")
    state.chmod(0o644)
    args = ["broker", "start", "--state-file", str(state), "--data-dir", str(tmp_path / "d")]
    assert main(args) == 0
    assert state.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broker.json", "broker.json.lock", "d"]


# --- one start at a time -------------------------------------------------------------------------


def test_a_second_start_on_one_state_file_fails_fast_naming_it(
    stand_in: type[StandInKafka], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """While a start holds the state file's lock, another starts nothing and says why.

    Both found no broker and both started one; the file kept the second (review r6, item 2).
    """
    state = tmp_path / "broker.json"
    with (tmp_path / "broker.json.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        began = time.monotonic()
        assert main(["broker", "start", "--state-file", str(state)]) == 1
        assert time.monotonic() - began < 5.0
    assert stand_in.made == []
    err = capsys.readouterr().err
    assert (
        f"another 'client-balance broker start' is starting a broker for the state file {state}"
        in err
    )


def test_starts_in_the_same_second_get_data_dirs_of_their_own(
    stand_in: type[StandInKafka], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two detached starts in one second get distinct, marked data dirs only their owner enters.

    The name was broker-data-<seconds>: the second broker shared the first one's folder
    (review r6, item 2).
    """
    monkeypatch.setattr(time, "time", lambda: 1_795_956_660.0)
    states = [tmp_path / "one.json", tmp_path / "two.json"]
    for state in states:
        assert main(["broker", "start", "--state-file", str(state)]) == 0
    one, two = (Path(_state(state)["data_dir"]) for state in states)
    assert one != two
    for data_dir in (one, two):
        assert data_dir.parent == tmp_path / "home"
        assert data_dir.name.startswith("broker-data-")
        assert is_marked(data_dir)
        assert data_dir.stat().st_mode & 0o777 == 0o700
    for state in states:
        assert main(["broker", "stop", "--state-file", str(state)]) == 0
    assert not one.exists()
    assert not two.exists()


# --- is this pid still our broker? -----------------------------------------------------------


def _record(path: Path, pid: int, properties: Path, started: int | None) -> None:
    data_dir = properties.parent
    path.write_text(
        json.dumps({
            "pid": pid, "pids": [pid], "bootstrap_servers": "127.0.0.1:1",
            "nodes": [{"pid": pid, "start_time": started, "properties": str(properties)}],
            "data_dir": str(data_dir), "log": str(data_dir / "broker.log"), "owns_data_dir": False,
        })
    )  # fmt: skip


def test_a_broker_whose_data_dir_merely_contains_the_recorded_one_is_not_stopped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """/srv/kafka2's broker is not /srv/kafka's: the argument must match exactly.

    The check was a substring test: `stop` of a stale state file stopped another project's
    broker that had taken the pid (review r6, item 4).
    """
    other = spawn_stand_in(tmp_path / "kafka-data2" / "server.properties")
    try:
        state = tmp_path / "broker.json"
        _record(state, other.pid, tmp_path / "kafka-data" / "server.properties",
                start_time(other.pid))  # fmt: skip
        assert main(["broker", "status", "--state-file", str(state)]) == 1
        assert "stale state file" in capsys.readouterr().err
        assert main(["broker", "stop", "--state-file", str(state)]) == 0
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_a_reused_pid_is_never_stopped(tmp_path: Path) -> None:
    """A process that took the pid since, even with the same command line, is left alone.

    Its start time differs from the recorded one (review r6, item 4).
    """
    properties = tmp_path / "kafka-data" / "server.properties"
    newcomer = spawn_stand_in(properties)
    try:
        started = start_time(newcomer.pid)
        state = tmp_path / "broker.json"
        _record(state, newcomer.pid, properties, started - 1)
        assert main(["broker", "stop", "--state-file", str(state)]) == 0
        assert newcomer.poll() is None
        _record(state, newcomer.pid, properties, started)  # the very process: it is stopped
        assert main(["broker", "stop", "--state-file", str(state)]) == 0
        assert newcomer.wait(timeout=10) is not None
    finally:
        newcomer.kill()
        newcomer.wait()


def test_a_relative_data_dir_is_recorded_resolved(
    stand_in: type[StandInKafka],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--data-dir ./kafka-data` is recorded absolute, and `stop` from elsewhere stops it.

    It was recorded as "kafka-data": wrong from any other folder (review r6, item 4).
    """
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    state = tmp_path / "broker.json"
    assert main(["broker", "start", "--data-dir", "./kafka-data", "--state-file", str(state)]) == 0
    recorded = _state(state)
    assert recorded["data_dir"] == str(project.resolve() / "kafka-data")
    assert recorded["log"] == str(project.resolve() / "kafka-data" / "broker.log")
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["broker", "stop", "--state-file", str(state)]) == 0
    assert f"(pid {recorded['pid']})" in capsys.readouterr().err
    assert _gone(recorded["pid"])


def test_a_state_file_without_start_times_names_no_broker(tmp_path: Path) -> None:
    """Without a start time a pid cannot be told from its next owner: none is acted on."""
    properties = tmp_path / "kafka-data" / "server.properties"
    broker = spawn_stand_in(properties)
    try:
        state = tmp_path / "broker.json"
        _record(state, broker.pid, properties, None)
        assert main(["broker", "stop", "--state-file", str(state)]) == 0
        assert broker.poll() is None
    finally:
        broker.kill()
        broker.wait()


# --- the foreground ------------------------------------------------------------------------------


def test_a_foreground_broker_that_dies_fails_the_command_naming_its_log(
    stand_in: type[StandInKafka], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`broker start --foreground` whose broker exits on its own exits 1 with the log's tail.

    It returned 0 and said nothing (review r6, item 7).
    """
    stand_in.lives_s = 0.2
    data_dir = tmp_path / "d"
    assert main(["broker", "start", "--foreground", "--data-dir", str(data_dir)]) == 1
    err = capsys.readouterr().err
    assert f"the broker exited on its own; last lines of {data_dir / 'broker.log'}" in err
    assert "the stand-in broker's log" in err
