"""Reaping dead members: tombstones for the status records of members long gone.

A member that dies without a clean shutdown leaves its last report and its claims in the
compacted status topic for good: every start replays them and ``groups`` lists the group. The
group's earliest live member reaps members dead for ``reap_after_s`` past their lease; this is
the operator's way to do it now, for a group with no live member as well.
"""

from __future__ import annotations

from client_balance._timing import check_seconds
from client_balance.admin._read import read_group_at
from client_balance.membership import StatusWriter, status_secret
from client_balance.settings import ClientBalanceSettings

__all__ = ["reap_dead_members"]


_MAX_AGE_S = 1e12  # finite and far beyond any lease; nan and inf fail the comparison


def reap_dead_members(
    settings: ClientBalanceSettings,
    group: str | None = None,
    *,
    older_than_s: float | None = None,
    timeout_s: float = 30.0,
) -> list[str]:
    """Tombstone the records of ``group``'s members dead ``older_than_s`` past their lease.

    ``older_than_s`` defaults to ``settings.reap_after_s``; 0 reaps every member whose lease
    has run out. Returns the consumer ids reaped, sorted. Live members are never touched:
    leases are judged by the broker's time, as members judge them, never this host's clock.
    """
    group = group or settings.group_id
    grace_s = settings.reap_after_s if older_than_s is None else older_than_s
    # Checked before the cluster is read: nan passed "< 0" and failed later in int().
    grace_s = check_seconds("older_than_s", grace_s, below_s=_MAX_AGE_S)
    # A host clock ahead of the broker's would tombstone live members' claims.
    state, partition, now_ms = read_group_at(settings, group, timeout_s, broker_clock=True)
    dead = state.dead_records(now_ms, int(grace_s * 1000))
    if dead:
        writer = StatusWriter(
            settings.bootstrap_servers, settings.status_topic, partition,
            kafka=settings.admin_config(), timeout_s=timeout_s,
            secret=status_secret(settings),  # signed groups ignore unsigned tombstones
        )  # fmt: skip
        try:
            writer.write([(key, None) for keys in dead.values() for key in keys])
        finally:
            writer.close()
    return sorted(dead)
