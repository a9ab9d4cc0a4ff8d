"""The SDK's loggers: structlog events on the standard library, structlog loaded only when used."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import pytest

from client_balance._logging import get_logger


def test_importing_the_sdk_and_logging_below_the_level_loads_no_structlog() -> None:
    """``import client_balance`` and events its level filters out import no structlog or rich."""
    code = textwrap.dedent(
        """
        import sys
        import client_balance
        from client_balance._logging import get_logger

        get_logger("probe").info("not shown", answer=42)  # the root logger's WARNING filters it
        print(sorted(name for name in ("structlog", "rich", "pygments") if name in sys.modules))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"


def test_an_event_past_the_level_reaches_logging_with_its_fields(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An enabled event goes through structlog to ``logging``, its fields in the record."""
    with caplog.at_level(logging.INFO, logger="client_balance.probe"):
        get_logger("probe").info("probe event", answer=42)
        get_logger("probe").debug("below the level", answer=0)
    (record,) = caplog.records
    assert (record.name, record.levelno, record.getMessage()) == (
        "client_balance.probe", logging.INFO, "probe event",
    )  # fmt: skip
    assert record.__dict__["answer"] == 42


def test_an_exception_event_carries_the_exception_being_handled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``exception()`` logs at ERROR with the traceback of the exception being handled."""
    with caplog.at_level(logging.ERROR, logger="client_balance.probe"):
        try:
            raise ValueError("boom")
        except ValueError:
            get_logger("probe").exception("it failed", step="probe")
    (record,) = caplog.records
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
    assert repr(record.exc_info[1]) == "ValueError('boom')"
    assert "ValueError: boom" in record.__dict__["exception"]


def test_an_exception_as_the_first_event_loads_structlog_and_keeps_the_traceback() -> None:
    """The first enabled event being ``exception()`` imports structlog inside ``except``, intact."""
    code = textwrap.dedent(
        """
        import logging, sys
        from client_balance._logging import get_logger

        records = []
        handler = logging.Handler()
        handler.emit = records.append
        logging.getLogger("client_balance.probe").addHandler(handler)
        assert "structlog" not in sys.modules
        try:
            raise ValueError("boom")
        except ValueError:
            get_logger("probe").exception("it failed", step="probe")
        (record,) = records
        print("structlog" in sys.modules, record.levelname, record.step,
              "ValueError: boom" in record.exception)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.split() == ["True", "ERROR", "probe", "True"]
