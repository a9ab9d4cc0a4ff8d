"""The status topic deleted under a running member, or made anew: noticed, made again, read afresh.

Every lease a member holds is a record in the status log. A log deleted takes them all with it,
and a log made anew starts empty: a member that went on as before would hold its partitions
where nobody can see it, and a new member would win them (two live holders). So a member that
sees the log change fences itself at once, like any member whose lease is gone, reads the new
log from its start into a fresh state and joins it again through the fence's usual way back:
its report, then claims judged afresh.

A new log shows in three ways: the topic's id changed (asked with every report), the reader
was handed an offset below its position, or a record of the member's landed below it
(compaction never lowers an offset; ``StatusReader.stale``). A missing topic is made again
with the settings of a start; where the cluster refuses that, the application's next call
raises the refusal, naming the topic.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable

from client_balance._kafka import AdminClient, KafkaException, admin_client, ask_topic_id
from client_balance._logging import get_logger
from client_balance._secrets import scrub
from client_balance.errors import ClientBalanceError, ConfigError, KafkaClientError
from client_balance.membership import _log as status_log
from client_balance.membership._claims import MemberClaims
from client_balance.membership._log import StatusReader
from client_balance.settings import ClientBalanceSettings

__all__ = ["MISSING", "NEW", "LogRenewal"]

_log = get_logger("membership")

MISSING, NEW = "missing", "new"
"""What was seen of the status topic: it does not exist; it is not the log read so far."""


class LogRenewal:
    """Whether one member's status log is still the topic's; renewing the member's view if not."""

    def __init__(
        self,
        settings: ClientBalanceSettings,
        reader: StatusReader,
        claims: MemberClaims,
        *,
        admin: AdminClient | None,
        wake: Callable[[], None],
        on_failure: Callable[[ClientBalanceError], None],
    ) -> None:
        self._settings, self._topic = settings, settings.status_topic
        self._reader, self._claims = reader, claims
        self._admin = admin
        self._wake, self._on_failure = wake, on_failure
        self._lock = threading.Lock()
        self._known: str | None = None  # the id of the log read; None until the first answer
        self._news: str | None = None
        self._round = 0  # answers to questions asked before the last renewal are dropped
        self._asked: concurrent.futures.Future[str] | None = None
        self.ask()

    def _client(self) -> AdminClient:
        if self._admin is None:
            self._admin = admin_client(self._settings.bootstrap_servers,
                                       self._settings.admin_config())  # fmt: skip
        return self._admin

    def ask(self) -> None:
        """Ask the topic's id, unless a question is out; an answer that differs wakes the member."""
        if self._asked is not None and not self._asked.done():
            return
        try:
            self._asked = ask_topic_id(self._client(), self._topic,
                                       self._settings.request_timeout_s)  # fmt: skip
        except KafkaException as error:  # asked again with the next report
            said = scrub(str(error), self._settings.kafka)
            _log.debug("asking the status topic's id failed", error=said)
            return
        round_ = self._round
        self._asked.add_done_callback(lambda answer: self._answered(answer, round_))

    def _answered(self, answer: concurrent.futures.Future[str], round_: int) -> None:
        if answer.exception() is not None:
            return  # no answer says nothing; the next report asks again
        found = answer.result()
        with self._lock:
            if round_ != self._round or found == self._known:
                return
            if self._known is None and found:
                self._known = found  # the log opened at the start
                return
            self._news = NEW if found else MISSING
        self._wake()

    def news(self) -> str | None:
        """``MISSING`` or ``NEW`` once seen (or the reader is stale) until :meth:`renew`."""
        with self._lock:
            return self._news if self._news is not None or not self._reader.stale else NEW

    def holds(self) -> bool:
        """Whether the news holds, asked again now: else it is dropped, and nothing fences.

        One answer can be off (a broker whose metadata has not caught up says the topic is
        missing): a healthy member must not fence on it, nor forget its claims.
        """
        return not self._same_log(self._topic_id())

    def _same_log(self, found: str | None) -> bool:
        if not found or found != self._known or self._reader.stale:
            return False
        with self._lock:
            self._news = None
        _log.info("the status topic is the one read after all", topic=self._topic)
        return True

    def renew(self) -> bool:
        """Make a missing topic again and read the new log afresh; False if not done (yet).

        The member is fenced before: its claims are forgotten, not withdrawn (they are not in
        the new log), and it claims afresh once its report is read back.
        """
        found = self._topic_id()
        if self._same_log(found) or found is None:  # the fence's way back withdraws the claims
            return False
        # Checked as at a start, made again if missing: a topic made anew by hand with the
        # broker's defaults would neither keep claims nor stamp them with the broker's clock.
        if not self._ensure(missing=found == ""):
            return False
        if found == "":
            found = self._topic_id()
        if not found:
            return False
        if found != self._known:
            self._claims.forget()  # the old log went with its topic
        elif not self._withdrawn():  # the same log, cut back: its claims may stand in it yet
            return False
        if not self._reader.begin_anew(self._settings.request_timeout_s):
            return False
        with self._lock:
            self._known, self._news = found, None
            self._round += 1
        _log.warning("joining the status topic made anew", topic=self._topic)
        return True

    def _withdrawn(self) -> bool:
        """Withdraw every claim (tombstones in the log); False if the write failed."""
        try:
            self._claims.withdraw(self._claims.claimed())
        except KafkaClientError as error:  # asked again with the next report
            _log.warning("withdrawing the claims failed", error=str(error))
            return False
        return True

    def _topic_id(self) -> str | None:
        """The topic's id now ("" if it does not exist); None without an answer."""
        timeout_s = self._settings.request_timeout_s
        try:
            return ask_topic_id(self._client(), self._topic, timeout_s).result(timeout_s)
        except (KafkaException, concurrent.futures.TimeoutError) as error:
            _log.warning("asking the status topic's id failed",
                         error=scrub(str(error), self._settings.kafka))  # fmt: skip
            return None

    def _ensure(self, *, missing: bool) -> bool:
        """Make the topic again if ``missing``, check its settings; False (reported) if refused."""
        settings = self._settings
        try:
            status_log.ensure_status_topic(
                settings.bootstrap_servers, self._topic, kafka=settings.admin_config(),
                timeout_s=settings.request_timeout_s, admin=self._client(),
                allow_single_replica=settings.status_topic_single_replica_ok,
                partitions=settings.status_topic_partitions,
            )  # fmt: skip
        except ClientBalanceError as error:
            self._on_failure(self._missing(error) if missing else error)
            return False
        if missing:
            _log.warning("made the deleted status topic again", topic=self._topic)
        return True

    def _missing(self, error: ClientBalanceError) -> ClientBalanceError:
        """``error`` of making the topic again, saying that it is missing and what to do."""
        message = (
            f"the status topic {self._topic!r} (status_topic) is missing: it was deleted while "
            f"the group ran, and creating it again failed: {error}. Every member of the group "
            'stays fenced until it exists: create it as docs/security.md shows ("Pre-create '
            "the status topic\"), or grant this client's principal Create on it"
        )
        if isinstance(error, KafkaClientError):
            return KafkaClientError(
                message,
                kafka_code=error.kafka_code,
                kafka_name=error.kafka_name,
                retriable=error.retriable,
            )
        if isinstance(error, ConfigError):
            return ConfigError(message)
        return ClientBalanceError(message)
