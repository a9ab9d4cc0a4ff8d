"""Resetting a client-balanced group's committed offsets, refused while members are live."""

from __future__ import annotations

from client_balance._kafka import commit_offsets, offsets_for_times, partition_offsets
from client_balance._settings_checks import check_group_id
from client_balance.admin._view import GroupView
from client_balance.errors import ConfigError
from client_balance.keys import TopicPartition, check_topic_name
from client_balance.settings import ClientBalanceSettings

__all__ = ["parse_reset_target", "reset_offsets"]

_NAMED = ("earliest", "latest")
_MAX_MS = 2**63 - 1  # Kafka's timestamps are Java longs


def reset_offsets(
    settings: ClientBalanceSettings,
    group: str,
    to: str,
    *,
    topics: tuple[str, ...] = (),
    timeout_s: float = 30.0,
) -> dict[str, int]:
    """Commit ``group``'s offsets to ``earliest``, ``latest`` or a time (ms since the epoch).

    Refuses while the group has live members, as Kafka's tool does (TubeMQ resets a live group
    through the Master; there is no Master here):
    their next commit would undo the reset. Leases are judged by the broker's time, which a
    record written to the status topic gives (Write on it is needed), never this host's clock.
    ``topics`` default to those the members reported.
    Returns ``topic:partition`` -> the offset committed.
    """
    try:  # a blank one: the live check judged settings.group_id, the commit went to this one
        group = check_group_id(group)
    except ValueError as error:
        raise ConfigError(f"group {group!r} is not allowed: {error}") from None
    stamp = parse_reset_target(to)
    to = to.strip().lower()
    for topic in topics:  # before any request: a bad name is the caller's, not the cluster's
        check_topic_name(topic)
    # The broker's time, as members judge: a host clock ahead would pass live members as dead.
    # A status topic that is missing (a mistyped name) would show no live member: refused.
    view = GroupView.load(settings, group, timeout_s=timeout_s, broker_clock=True, must_exist=True)
    if view.live_members:
        ids = ", ".join(m.consumer_id for m in view.live_members)
        raise ConfigError(
            f"group {group!r} has live members ({ids}); stop them first (their leases run "
            f"out {settings.lease_timeout_s:g} s after they stop)"
        )
    chosen = topics or tuple(sorted({t for m in view.members for t in m.topics}))
    if not chosen:
        raise ConfigError(
            f"group {group!r} has no member reports to take topics from; name them with --topic"
        )
    positions = _reset_positions(settings, group, chosen, to, stamp, timeout_s)
    commit_offsets(
        settings.bootstrap_servers, group, positions,
        timeout_s=timeout_s, kafka=settings.admin_config(),
    )  # fmt: skip
    return {f"{tp.topic}:{tp.partition}": offset for tp, offset in sorted(positions.items())}


def parse_reset_target(to: str) -> int | None:
    """The time (ms since the epoch) ``to`` names, or None for ``earliest`` and ``latest``.

    A negative number is refused: Kafka reads -2 and -1 as its earliest and latest sentinels,
    so ``--to -2`` would silently mean something else than a time.
    """
    text = to.strip() if isinstance(to, str) else ""
    if text.lower() in _NAMED:
        return None
    # ASCII digits only: int() would also take "-2", "+5", "1_000" and other scripts' digits.
    if text.isascii() and text.isdecimal() and len(text) <= len(str(_MAX_MS)):
        stamp = int(text)
        if stamp <= _MAX_MS:
            return stamp
    raise ConfigError(
        f"--to {repr(to)[:80]} is not allowed; use earliest, latest or a time in milliseconds "
        "since the epoch (a whole number >= 0)"
    )


def _reset_positions(  # noqa: PLR0917 - private; the reset's inputs, in its order
    settings: ClientBalanceSettings,
    group: str,
    topics: tuple[str, ...],
    to: str,
    stamp: int | None,
    timeout_s: float,
) -> dict[TopicPartition, int]:
    ranges = partition_offsets(
        settings.bootstrap_servers, group, list(topics),
        timeout_s=timeout_s, kafka=settings.admin_config(),
    )  # fmt: skip
    if stamp is None:
        return {tp: low if to == "earliest" else high for tp, (low, high, _) in ranges.items()}
    at = offsets_for_times(
        settings.bootstrap_servers, group, sorted(ranges), stamp,
        timeout_s=timeout_s, kafka=settings.admin_config(),
    )  # fmt: skip
    # Nothing at or after the time: the end.
    positions = {}
    for tp, (_, high, _) in ranges.items():
        found = at[tp]
        positions[tp] = high if found is None else found
    return positions
