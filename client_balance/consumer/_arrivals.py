"""Members that joined, or came back from a fence, since a member last looked.

A member that was cut off may have had a commit held by its client, which landed only when it
came back, behind where the partition's new owner has committed since. It reports itself back
(not fenced) only after that commit's answer (``StatusMember``), so the others, committing
their held positions again when they see it arrive, commit over it.
"""

from __future__ import annotations

from collections.abc import Mapping

from client_balance._logging import get_logger
from client_balance.membership import MemberReport

__all__ = ["Arrivals"]

_log = get_logger("reconcile")


class Arrivals:
    """The live, unfenced members seen at the last look, other than ``me``."""

    def __init__(self, me: str) -> None:
        self._me = me
        self._seen: frozenset[str] = frozenset()

    def since_last(self, reports: Mapping[str, MemberReport]) -> list[str]:
        """The members live and unfenced in ``reports`` that were not at the last call, sorted.

        Worked example: calls with {C0}, then {C0, C1}, then {C0, C1 fenced}, then {C0, C1}
        answer [C0], [C1], [], [C1]: C1 came back from its fence.
        """
        now = frozenset(m for m, report in reports.items() if not report.fenced) - {self._me}
        arrived, self._seen = sorted(now - self._seen), now
        if arrived:
            _log.info("members arrived", members=arrived)
        return arrived
