"""Two assignment callbacks, as ``ClientBalanceConsumer(settings, assigner=...)`` takes them.

Every member runs its callback on its own, each round, from an :class:`AssignmentContext`; the
group stays whole when every member's callback gives each partition to exactly one member.
So a callback, like a strategy, decides only from the context and sorts what it iterates.

``route_by_topic``: node ``i`` takes the ``i``-th topic (sorted), wrapping around: with topics
``orders`` and ``stock`` and two nodes, node 0 takes every ``orders`` partition and node 1
every ``stock`` one. Run in node mode (``start(["orders", "stock"], 2, node_id)``).

``weight_by_lag``: the live members share the partitions so that each has about the same
backlog, largest first (the "longest processing time" rule). A partition's backlog is what
its holder reports as lag, else the messages between its watermarks. Backlogs are rounded to
powers of two, so a partition moves only when the balance changes by a real amount.
"""

from __future__ import annotations

from client_balance import AssignmentContext, PartitionKey


def route_by_topic(context: AssignmentContext) -> list[str]:
    """The partitions of the topics whose index is this node's id modulo the node count."""
    nodes = max(context.source_count, 1)
    mine = {
        topic
        for index, topic in enumerate(sorted(context.topics))
        if index % nodes == context.node_id
    }
    return sorted(key for key, meta in context.partitions.items() if meta.topic in mine)


def weight_by_lag(context: AssignmentContext) -> list[str]:
    """The asking member's share of a backlog-balanced plan over the live members."""
    members = sorted(member.consumer_id for member in context.members if not member.fenced)
    if context.consumer_id not in members:
        return []  # not in the view yet: take nothing rather than contest a partition
    reported = {
        _identity(key): lag
        for member in context.members
        for key, lag in member.held.items()
        if lag is not None
    }
    weights = {}
    for key, meta in context.partitions.items():
        backlog = reported.get(_identity(key))
        if backlog is None and meta.low is not None and meta.high is not None:
            backlog = meta.high - meta.low
        weights[_identity(key)] = (key, _rounded(backlog or 0))
    loads = dict.fromkeys(members, (0, 0))  # (backlog, partitions)
    plan: dict[str, list[str]] = {member: [] for member in members}
    for identity in sorted(weights, key=lambda i: (-weights[i][1], i)):
        key, weight = weights[identity]
        chosen = min(members, key=lambda member: (loads[member], member))
        plan[chosen].append(key)
        backlog, count = loads[chosen]
        loads[chosen] = (backlog + weight, count + 1)
    return sorted(plan[context.consumer_id])


def _identity(key: str) -> str:
    # Keys carry the partition's leader, which can differ between two members' views.
    return str(PartitionKey.parse(key).topic_partition)


def _rounded(backlog: int) -> int:
    return 0 if backlog <= 0 else 1 << (backlog.bit_length() - 1)
