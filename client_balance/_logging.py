"""Logging as a library should: structlog events handed to the standard library's ``logging``.

Every logger of the package is ``client_balance.<part>`` in ``logging``. The package adds only a
``NullHandler`` to ``client_balance``, so an application that configures nothing sees nothing
(not even on stderr), one that configures ``logging`` gets each event with its fields as the
record's ``extra``, and one that routes ``logging`` through structlog (``ProcessorFormatter``
with ``ExtraAdder``) gets structured events. The package never calls ``structlog.configure``:
that is the application's global choice. Event names and fields: docs/logging.md.
"""

from __future__ import annotations

import logging

import structlog

__all__ = ["ROOT_LOGGER", "get_logger"]

ROOT_LOGGER = "client_balance"

logging.getLogger(ROOT_LOGGER).addHandler(logging.NullHandler())

# Kept off the global configuration on purpose: these processors apply to the SDK's loggers
# only, whatever the application configures for its own.
_PROCESSORS: list[structlog.typing.Processor] = [
    structlog.stdlib.filter_by_level,
    structlog.processors.format_exc_info,
    structlog.stdlib.render_to_log_kwargs,
]


def get_logger(part: str) -> structlog.stdlib.BoundLogger:
    """The structlog logger of ``client_balance.<part>``, on the stdlib logger of that name."""
    logger: structlog.stdlib.BoundLogger = structlog.wrap_logger(
        logging.getLogger(f"{ROOT_LOGGER}.{part}"),
        processors=_PROCESSORS,
        wrapper_class=structlog.stdlib.BoundLogger,
    )
    return logger
