"""Upkeep of the status log that a member does after each report: tombstones nobody else writes.

- :func:`tombstone_defeated`: a holder withdraws, for their members, claims that lost to it;
- :func:`reap_dead`: the earliest live member tombstones long-dead members' records.
"""

from __future__ import annotations

from client_balance._logging import get_logger
from client_balance.errors import KafkaClientError
from client_balance.membership._log import StatusReader
from client_balance.membership._writer import StatusWriter

__all__ = ["reap_dead", "tombstone_defeated"]

_log = get_logger("membership")


def tombstone_defeated(writer: StatusWriter, reader: StatusReader) -> None:
    """Withdraw, for their members, the claims that lost to this one (see take_defeated)."""
    with reader.lock:
        keys = reader.state.take_defeated()
    if keys:
        try:
            writer.write([(key, None) for key in keys])
        except KafkaClientError as error:
            _log.warning("could not withdraw defeated claims", error=str(error))
            with reader.lock:
                reader.state.defeated_again(keys)


def reap_dead(
    writer: StatusWriter, reader: StatusReader, member_id: str, reap_after_s: float
) -> None:
    """Tombstone long-dead members' records, if ``member_id`` is the earliest live member.

    One member does it so the others write nothing twice; any member may, since a tombstone of
    a dead member changes nothing but what a replay has to read.
    """
    with reader.lock:
        state = reader.state
        live = state.live_reports()
        if member_id not in live or min(live, key=state.join_order) != member_id:
            return
        dead = state.dead_records(state.last_ms, int(reap_after_s * 1000))
    if dead:
        try:
            writer.write([(key, None) for keys in dead.values() for key in keys])
        except KafkaClientError as error:
            _log.warning("could not reap dead members", error=str(error))
            return
        _log.info("reaped dead members", members=sorted(dead))
