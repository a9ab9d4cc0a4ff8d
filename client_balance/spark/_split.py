"""``minPartitions``: more Spark tasks than nodes, by cutting the nodes' shares.

Like Spark's ``KafkaOffsetRangeCalculator``, the tasks go where the messages are: a node gets
task slots in proportion to the offsets its share holds (at least one), and its ranges, laid
end to end in partition order, are cut into that many runs of (nearly) equal size. A large
range is so cut into several tasks, while small ranges of one node share a task. Each task
keeps its node's id, and every offset is in exactly one task.
"""

from __future__ import annotations

__all__ = ["Range", "split_shares"]

Range = tuple[str, int, int, int]
"""(topic, partition, start, end) with end exclusive."""


def split_shares(shares: list[list[Range]], min_tasks: int | None) -> list[tuple[int, list[Range]]]:
    """(node id, ranges) of each task: one per node, or more to reach ``min_tasks`` tasks.

    The nodes with offsets to read get ``min_tasks`` tasks between them (fewer only when
    there are fewer offsets than that); a node with none keeps its one empty task.
    """
    whole = list(enumerate(shares))
    if min_tasks is None or min_tasks <= len(shares):
        return whole
    sizes = [sum(end - start for _, _, start, end in share) for share in shares]
    if sum(sizes) == 0:
        return whole
    slots = _apportion(sizes, min_tasks)
    tasks: list[tuple[int, list[Range]]] = []
    for node, share in whole:
        if sizes[node] == 0:
            tasks.append((node, share))
            continue
        tasks += [(node, run) for run in _runs(share, sizes[node], slots[node])]
    return tasks


def _apportion(sizes: list[int], slots: int) -> list[int]:
    """``slots`` shared in proportion to ``sizes``: at least 1 and at most ``size`` each.

    Whole numbers only (a float would round differently on another machine): the floors first,
    then one more each by the largest remainder, ties to the lower node.
    """
    total = sum(sizes)
    parts = [min(size, max(1, size * slots // total)) if size else 0 for size in sizes]
    order = sorted(range(len(sizes)), key=lambda node: (-(sizes[node] * slots % total), node))
    left = slots - sum(parts)
    while left > 0:
        grown = False
        for node in order:
            if left > 0 and parts[node] < sizes[node]:
                parts[node] += 1
                left -= 1
                grown = True
        if not grown:  # every offset is a task of its own already
            break
    return parts


def _runs(share: list[Range], size: int, count: int) -> list[list[Range]]:
    """``share``'s offsets, in order, cut into ``count`` runs of ``size // count`` or one more."""
    wanted = [size // count + (1 if run < size % count else 0) for run in range(count)]
    runs: list[list[Range]] = [[] for _ in range(count)]
    run = 0
    need = wanted[0]
    for topic, partition, start, end in share:
        begin = start
        while begin < end:
            take = min(end - begin, need)
            runs[run].append((topic, partition, begin, begin + take))
            begin += take
            need -= take
            if need == 0 and run + 1 < count:
                run += 1
                need = wanted[run]
    return runs
