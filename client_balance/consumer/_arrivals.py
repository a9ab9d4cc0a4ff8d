"""Members that came back, from a fence or a lapsed lease, since a member last looked.

A member that was cut off may have had a commit held by its client, which landed only when it
came back, behind where the partition's new owner has committed since. It reports itself back
(not fenced) only after that commit's answer (``StatusMember``), so the others, committing
their held positions again when they see it return, commit over it. A member new to the group
(a new process is a new consumer id) has no commit of the past to land: its joining asks for
nothing, so a rolling restart of a large group makes no storm of commits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from client_balance._logging import get_logger
from client_balance.membership import MemberReport

__all__ = ["Arrivals"]

_log = get_logger("reconcile")


class Arrivals:
    """The members live and unfenced, and those known at all, at the last look (not ``me``)."""

    def __init__(self, me: str) -> None:
        self._me = me
        self._live: frozenset[str] = frozenset()
        self._known: frozenset[str] = frozenset()

    def returned(self, reports: Mapping[str, MemberReport], known: Iterable[str]) -> list[str]:
        """Members live and unfenced in ``reports`` that were known, but not so, last time.

        ``known``: every member with a record in the status log, live or not. Worked example,
        looks of (live reports, known): ({C0}, {C0}), then ({C0, C1}, {C0, C1}), then
        ({C0, C1 fenced}, {C0, C1}), then ({C0, C1}, {C0, C1}) answer [], [], [], [C1]: C1
        was new at the second look, and came back from its fence at the fourth.
        """
        live = frozenset(m for m, report in reports.items() if not report.fenced) - {self._me}
        back = sorted((live - self._live) & self._known)
        self._live, self._known = live, frozenset(known)
        if back:
            _log.info("members came back", members=back)
        return back
