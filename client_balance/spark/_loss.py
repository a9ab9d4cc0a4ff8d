"""``failOnDataLoss``: offsets a read needs that Kafka no longer has, on the driver and in tasks.

The driver finds a requested start below a partition's log start when it plans the read; a
task finds offsets deleted after that (``_kafka._ranges``). Either way, ``failOnDataLoss=true``
raises :class:`~client_balance.errors.DataLossError` naming the partition and the lost range,
and ``false`` reads on from where the log starts, with a warning that counts what was lost.
"""

from __future__ import annotations

from client_balance._logging import get_logger
from client_balance.errors import DataLossError

__all__ = ["report_loss"]

_log = get_logger("spark")


def report_loss(error: DataLossError, *, fail: bool) -> None:
    """Raise ``error`` (with how to read on anyway) if ``fail``, else log it as a warning."""
    if fail:
        raise DataLossError(
            f"{error.message}; set the option failOnDataLoss=false to read on from offset "
            f"{error.lost_to} instead",
            partition=error.partition,
            lost_from=error.lost_from,
            lost_to=error.lost_to,
        )
    _log.warning(
        "data lost, reading on (failOnDataLoss=false)",
        partition=error.partition,
        lost_from=error.lost_from,
        lost_to=error.lost_to,
        lost_messages=error.lost_to - error.lost_from,
    )
