"""TubeMQ's group checks: a member that contradicts the live members who joined before it.

Decided from the status view alone (no Kafka here), so every member reaches the same verdict.
"""

from __future__ import annotations

import functools
import os
import socket
from pathlib import Path

from client_balance._logging import get_logger
from client_balance.errors import (
    DuplicateNodeIdError,
    GroupConflictError,
    InconsistentFiltersError,
    InconsistentSourceCountError,
    InconsistentStrategyError,
    InconsistentTopicsError,
)
from client_balance.membership._records import GroupState, MemberReport

__all__ = ["check_group", "check_signing", "pid_space"]

_log = get_logger("membership")
_SPARK = "spark"


def check_group(state: GroupState, me: MemberReport, group: str) -> None:
    """Raise :class:`GroupConflictError` if an earlier live member contradicts ``me``.

    425/426: other topics or filter sets (every mode, as in TubeMQ). 429: a node-mode member
    meets an earlier member with another source count, or a member of another mode next to
    node-mode members. 430: an earlier live node-mode member has the same node id. Node-mode
    members must also agree on the strategy, or their shares overlap and leave gaps. A ``spark``
    member (a streaming query) neither passes nor imposes these checks: it takes no share of the
    split, it only holds (claims and pins) what it reads.
    """
    source_count, node_id, mode = me.source_count, me.node_id, me.mode
    if mode == _SPARK:
        return
    mine = state.join_order(me.consumer_id)
    for other_id, report in state.live_reports().items():
        if other_id == me.consumer_id or state.join_order(other_id) > mine:
            continue
        if report.mode == _SPARK:
            continue
        if _died_here(report):
            continue  # a predecessor on this host that was killed: its lease will lapse
        _check_subscription(me, report, other_id, group)
        node_mode = "node" in (report.mode, mode)
        if node_mode and (report.source_count, report.mode) != (source_count, mode):
            raise InconsistentSourceCountError(
                f"[Inconsistency subscribe] {me.consumer_id}'s source_count is inconsistent "
                f"with other consumers in group {group!r}: required is "
                f"{report.source_count} (as {other_id} has it), requested {source_count}",
                ours=source_count,
                group=report.source_count,
            )
        if mode == "node" and report.node_id == node_id:
            raise DuplicateNodeIdError(
                f"[Inconsistency subscribe] {me.consumer_id}'s node_id {node_id} is occupied "
                f"by {other_id} in group {group!r}",
                node_id=node_id,
                holder=other_id,
            )


def check_signing(state: GroupState, me: str, group: str, *, signs: bool, warned: set[str]) -> None:
    """A group whose members disagree on ``status_secret`` fails loudly, on the unsigned side.

    A member with the secret ignores unsigned records, so it cannot see members without it, and
    would take their partitions. A member without the secret sees the others' signed reports:
    it raises :class:`GroupConflictError` (at start, or it stops later) and the signed members
    run on. A member with the secret only warns, once per name, of live members it ignores:
    anyone can write an unsigned report, and a forged one must not stop a member.
    """
    if not signs:
        signed = [member for member in state.signed_live() if member != me]
        if signed:
            raise GroupConflictError(
                f"live members {signed} of group {group!r} sign their status records with a "
                f"status_secret and {me} has none: they ignore its records. Give every member "
                "of the group the same status_secret"
            )
        return
    unsigned = [member for member in state.unsigned_live() if member not in warned]
    if unsigned:
        warned.update(unsigned)
        _log.warning("members write unsigned status records; ignored", members=unsigned)


_COMPUTED_MODES = frozenset({"node", "elastic"})
"""Modes whose members each compute the whole group's assignment from the same rule."""


def _check_subscription(me: MemberReport, other: MemberReport, other_id: str, group: str) -> None:
    where = f"in group {group!r}, as {other_id} has it"
    if set(me.topics) != set(other.topics):
        raise InconsistentTopicsError(
            f"[Inconsistency subscribe] {me.consumer_id}'s topics {sorted(me.topics)} differ "
            f"from {sorted(other.topics)} {where}",
            ours=sorted(me.topics),
            group=sorted(other.topics),
        )
    if me.filters != other.filters:
        raise InconsistentFiltersError(
            f"[Inconsistency subscribe] {me.consumer_id}'s filters {me.filters} differ from "
            f"{other.filters} {where}",
            ours=me.filters,
            group=other.filters,
        )
    # Node and elastic members each compute the whole assignment on their own: with two rules
    # each gives the others what they do not take, and those partitions go unread.
    if me.mode == other.mode and me.mode in _COMPUTED_MODES and me.strategy != other.strategy:
        raise InconsistentStrategyError(
            f"[Inconsistency subscribe] {me.consumer_id}'s strategy {me.strategy!r} differs from "
            f"{other.strategy!r} {where}: {me.mode} members with different rules overlap and "
            "leave gaps",
            ours=me.strategy,
            group=other.strategy,
        )


@functools.cache
def pid_space() -> str:
    """Where this process's pid means something: ``boot id:PID namespace`` ("" without /proc).

    Containers can share a host name (host networking) and not see each other's processes.
    """
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot}:{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return ""


def _died_here(report: MemberReport) -> bool:
    """Whether the member ran in this host's PID namespace in a process that no longer exists.

    A report from another namespace (or one that names none, from before the field) is never
    taken for dead: its pid cannot be looked up here, and a live member would be overlooked.
    """
    if report.host != socket.gethostname() or report.pid == os.getpid():
        return False
    if not report.pid_space or report.pid_space != pid_space():
        return False
    try:
        os.kill(report.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, under another user
        return False
    return False
