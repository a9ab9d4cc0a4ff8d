"""Logging as a library should: structlog events handed to the standard library's ``logging``.

Every logger of the package is ``client_balance.<part>`` in ``logging``. The package adds only a
``NullHandler`` to ``client_balance``, so an application that configures nothing sees nothing
(not even on stderr), one that configures ``logging`` gets each event with its fields as the
record's ``extra``, and one that routes ``logging`` through structlog (``ProcessorFormatter``
with ``ExtraAdder``) gets structured events. The package never calls ``structlog.configure``:
that is the application's global choice. Event names and fields: docs/logging.md.

structlog itself is imported by the first event that passes its logger's level, not by
``import client_balance``: importing structlog imports rich and pygments as well (its ``dev``
module uses them when they are installed, and the SDK's CLI installs rich). That is some 7,400
objects that every full garbage collection of the application's process walks, eight times per
million messages consumed, and 35-50 ms of import, for an application that never logs the SDK's
events at all (docs/design-decisions.md).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import structlog

__all__ = ["ROOT_LOGGER", "SdkLogger", "get_logger"]

ROOT_LOGGER = "client_balance"

logging.getLogger(ROOT_LOGGER).addHandler(logging.NullHandler())


class SdkLogger:
    """The logger of one part of the SDK: structlog's, made when an event first passes."""

    __slots__ = ("_bound", "_stdlib")

    def __init__(self, name: str) -> None:
        self._stdlib = logging.getLogger(name)
        self._bound: structlog.stdlib.BoundLogger | None = None

    def debug(self, event: str, **fields: Any) -> None:
        """Log ``event`` with ``fields`` at DEBUG."""
        self._emit(logging.DEBUG, "debug", event, fields)

    def info(self, event: str, **fields: Any) -> None:
        """Log ``event`` with ``fields`` at INFO."""
        self._emit(logging.INFO, "info", event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        """Log ``event`` with ``fields`` at WARNING."""
        self._emit(logging.WARNING, "warning", event, fields)

    def error(self, event: str, **fields: Any) -> None:
        """Log ``event`` with ``fields`` at ERROR."""
        self._emit(logging.ERROR, "error", event, fields)

    def exception(self, event: str, **fields: Any) -> None:
        """Log ``event`` with ``fields`` at ERROR, with the exception being handled."""
        self._emit(logging.ERROR, "exception", event, fields)

    def _emit(self, level: int, method: str, event: str, fields: dict[str, Any]) -> None:
        if self._stdlib.isEnabledFor(level):
            getattr(self._structlog(), method)(event, **fields)

    def _structlog(self) -> structlog.stdlib.BoundLogger:
        if self._bound is None:
            self._bound = _wrap(self._stdlib)
        return self._bound


def _wrap(stdlib: logging.Logger) -> structlog.stdlib.BoundLogger:
    import structlog  # noqa: PLC0415 - on first use only: see the module docstring

    # Kept off the global configuration on purpose: these processors apply to the SDK's
    # loggers only, whatever the application configures for its own.
    logger: structlog.stdlib.BoundLogger = structlog.wrap_logger(
        stdlib,
        processors=[
            structlog.stdlib.filter_by_level,
            structlog.processors.format_exc_info,
            structlog.stdlib.render_to_log_kwargs,
        ],
        wrapper_class=structlog.stdlib.BoundLogger,
    )
    return logger


def get_logger(part: str) -> SdkLogger:
    """The logger of ``client_balance.<part>``, on the stdlib logger of that name."""
    return SdkLogger(f"{ROOT_LOGGER}.{part}")
