"""A member's claims on the status topic: claiming, withdrawing, and re-asserting them.

In a group with ``status_secret`` every report is followed by the member's standing claims,
written again. A running reader takes a repeated claim for what it was (it keeps its first
place, and no verdict is kept for it); what it is for is log compaction. A record that anyone
writes under a claim's key, signed or not, makes compaction drop the claim from the log, and a
member that joins later would find the partition free; re-asserted claims put it back in the
log within one report interval, and the newest one is in the active segment, which compaction
never touches. See docs/operations.md, "Status topic integrity".
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from client_balance.keys import TopicPartition
from client_balance.membership._keys import claim_key
from client_balance.membership._log import StatusReader
from client_balance.membership._writer import StatusWriter

__all__ = ["MemberClaims"]

_CLAIM = b"{}"
_UNKNOWN = "(unknown: the claim was not read back)"
"""The holder a claim lost to when its verdict is missing and no live member holds it."""


class MemberClaims:
    """The partitions one member claimed and has not withdrawn, and the writes that keep them."""

    def __init__(
        self,
        writer: StatusWriter,
        reader: StatusReader,
        group: str,
        consumer_id: str,
        wait_applied: Callable[[int], None],
    ) -> None:
        self._writer, self._reader = writer, reader
        self._group, self._id = group, consumer_id
        self._wait_applied = wait_applied
        self._claimed: set[TopicPartition] = set()
        self._unsure: set[TopicPartition] = set()
        """Claims whose write failed: they may have landed all the same (an answer lost), and
        would then refuse everyone the partition for as long as this member lives. Their
        tombstones go with the next write (harmless for a claim that never landed)."""
        # A re-assertion and a withdrawal must not cross: a claim written again after its
        # withdrawal would hold a released partition for as long as the member lives.
        self._lock = threading.Lock()

    def claim(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, str | None]:
        """Claim ``partitions``: None for each one won, else the live holder it lost to.

        A partition whose claim stands already is won without a write (a claim written again
        gets no verdict of its own).
        """
        asked = set(partitions)  # iterated twice: a generator would be empty the second time
        with self._lock:
            standing = dict.fromkeys(asked & self._claimed)
        wanted = sorted(asked - standing.keys())
        return {**standing, **self._write_claims([], wanted)[1]}

    def join(
        self, report: tuple[bytes, bytes], partitions: Iterable[TopicPartition]
    ) -> tuple[int, dict[TopicPartition, str | None]]:
        """Write the first report and claims on ``partitions`` in one write; read up to them.

        The report's offset, and the claims' verdicts as :meth:`claim` gives them.
        """
        written, verdicts = self._write_claims([report], sorted(partitions))
        return written[0][0], verdicts

    def _write_claims(
        self, first: list[tuple[bytes, bytes | None]], wanted: list[TopicPartition]
    ) -> tuple[list[tuple[int, int]], dict[TopicPartition, str | None]]:
        if not first and not wanted:
            return [], {}
        with self._lock:
            self._unsure.difference_update(wanted)  # claimed again: this claim decides
            doubtful = sorted(self._unsure)
        records = [*first, *self._tombstones(doubtful), *((self._key(tp), _CLAIM) for tp in wanted)]
        read_before = self._reader.state.position
        try:
            written = self._writer.write(records)
            self._settled(doubtful)
            self._reader.landed(written[0][0], read_before)
            claims = written[len(first) + len(doubtful) :]
            self._wait_applied(written[-1][0])  # the claims landed: unsure if not read back
        except Exception:
            with self._lock:
                self._unsure.update(wanted)
            raise
        verdicts: dict[TopicPartition, str | None] = {}
        with self._reader.lock:
            for partition, (offset, _) in zip(wanted, claims, strict=True):
                verdicts[partition] = self._verdict(partition, offset)
        won = [tp for tp, holder in verdicts.items() if holder is None]
        lost = [tp for tp, holder in verdicts.items() if holder is not None]
        with self._lock:
            self._claimed.update(won)
        if lost:  # a losing claim must not linger: it would look like a claim once the holder goes
            self.withdraw(lost)
        return written[: len(first)] + claims, verdicts

    def _verdict(self, partition: TopicPartition, offset: int) -> str | None:
        """The verdict on this member's claim at ``offset`` (the reader's lock held)."""
        state = self._reader.state
        if offset in state.verdicts:
            return state.verdicts.pop(offset)
        # No verdict: a claim repeated over a standing one (a win), else one the state never
        # judged (skipped, or read on another log), which must not be taken for a win.
        holder = state.holders.get(partition)
        if holder is not None and holder.consumer_id == self._id:
            return None
        return state.live_holders().get(partition, _UNKNOWN)

    def withdraw(self, partitions: Iterable[TopicPartition]) -> None:
        """Withdraw the claims on ``partitions`` (after they are released)."""
        gone = sorted(partitions)
        if gone:
            with self._lock:
                self._writer.write(self._tombstones(gone))
                self._claimed.difference_update(gone)
                self._unsure.difference_update(gone)

    def write_report(
        self, report: tuple[bytes, bytes], *, reassert: bool, within_s: float | None = None
    ) -> int:
        """Write the member's report, then (``reassert``) its claims again; the report's offset.

        ``within_s`` bounds the wait (``StatusWriter.write``).
        """
        with self._lock:
            doubtful = sorted(self._unsure)
            records: list[tuple[bytes, bytes | None]] = [report, *self._tombstones(doubtful)]
            if reassert:
                records += [(self._key(tp), _CLAIM) for tp in sorted(self._claimed)]
            read_before = self._reader.state.position
            offset = self._writer.write(records, within_s=within_s)[0][0]
            self._unsure.difference_update(doubtful)
        self._reader.landed(offset, read_before)
        return offset

    def withdrawals(self) -> list[tuple[bytes, bytes | None]]:
        """The tombstones of every standing claim, and of every unsure one (a clean shutdown)."""
        with self._lock:
            return self._tombstones(sorted(self._claimed | self._unsure))

    def claimed(self) -> set[TopicPartition]:
        """The partitions claimed and not withdrawn."""
        with self._lock:
            return set(self._claimed)

    def forget(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Drop claims that lapsed or were lost (all: None) without withdrawing them."""
        with self._lock:
            if partitions is None:
                self._claimed.clear()
            else:
                self._claimed.difference_update(partitions)

    def _settled(self, doubtful: list[TopicPartition]) -> None:
        with self._lock:
            self._unsure.difference_update(doubtful)

    def _tombstones(self, partitions: Iterable[TopicPartition]) -> list[tuple[bytes, bytes | None]]:
        return [(self._key(tp), None) for tp in partitions]

    def _key(self, partition: TopicPartition) -> bytes:
        return claim_key(self._group, partition, self._id)
