from pathlib import Path

import pytest

from client_balance.cli import main


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown command is a usage error, not a crash."""
    assert main(["no-such-command"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    """--help prints the commands and succeeds."""
    assert main(["broker", "--help"]) == 0
    assert "start" in capsys.readouterr().out


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
