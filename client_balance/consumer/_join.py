"""Joining the group at ``start()``: no ``subscribe()`` members, and a place on the status topic."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from client_balance._kafka import AdminClient, ask_group_members, check_login
from client_balance.consumer._setup import MemberSetup
from client_balance.errors import ClientBalanceError, GroupInUseError
from client_balance.keys import TopicPartition
from client_balance.membership import MemberReport, StatusMember

__all__ = ["join_group"]


def join_group(
    setup: MemberSetup,
    describe: Callable[[], MemberReport],
    *,
    on_change: Callable[[], None],
    on_fenced: Callable[[bool], None],
    admin: AdminClient,
    claims: Callable[[], Iterable[TopicPartition]] = tuple,
    commits_settled: Callable[[], bool] = lambda: True,
    on_failure: Callable[[ClientBalanceError], None] = lambda _: None,
) -> StatusMember:
    """Check the Kafka group for subscribe() members and join the status topic, at once.

    The two are independent round trips, so they run side by side (the group's question is
    sent, then the join made, then the answer read): ``start()`` is on the path to the first
    message. Both ask through ``admin``, the member's one admin client; no thread waits for
    the group's answer, as one started on a busy start costs the others the interpreter.
    Raises 429/430 if a live member contradicts this one, and :class:`GroupInUseError` if
    anyone ``subscribe()``s with the group id. ``claims()``, asked just before the join is
    written, names partitions to claim in the same write (a node's share, when the metadata
    is in by then): the first round then finds them claimed, a write and its read-back fewer
    on the way to the first message.
    """
    settings = setup.settings
    if str(settings.kafka.get("security.protocol", "PLAINTEXT")).upper() != "PLAINTEXT":
        # A refused login must fail start() at once, not after every request's timeout.
        check_login(
            settings.bootstrap_servers, timeout_s=settings.request_timeout_s,
            kafka=settings.admin_config(),
        )  # fmt: skip
    # The group question goes out first; its answer is waited for after the join.
    members_answer = ask_group_members(
        admin, settings.group_id, timeout_s=settings.request_timeout_s,
        kafka=settings.admin_config(),
    )  # fmt: skip
    status = StatusMember(
        settings, setup.consumer_id, describe,
        on_change=on_change, on_fenced=on_fenced, admin=admin,
        commits_settled=commits_settled, on_failure=on_failure,
    )  # fmt: skip
    try:
        status.join(claims())
        status.check_group(describe())
        members = members_answer()
    except BaseException:
        status.leave()
        raise
    if members:
        status.leave()
        raise GroupInUseError(
            f"group {settings.group_id!r} has subscribe() members {members}; "
            "client-balanced consumers need a group id that nobody subscribes with",
            group_id=settings.group_id,
        )
    return status
