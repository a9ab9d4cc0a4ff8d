"""Every retry and wait of the SDK, declared once on tenacity.

A policy is a stop (a time budget, or a caller's "give up now"), a fixed wait between attempts
and what counts as "try again": a falsy answer (not ready yet) or one of the listed exceptions.
When the budget runs out the last outcome stands: the last exception is raised, or the last
falsy answer returned, and the caller turns that into its own :func:`timed_out` error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, cast

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    retry_if_exception_type,
    retry_if_result,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential,
    wait_fixed,
)
from tenacity.stop import stop_base

from client_balance._kafka._errors import is_transient
from client_balance.errors import ClientBalanceError

__all__ = [
    "BROKER_POLL_S",
    "METADATA_POLL_S",
    "TRANSIENT_RETRY_S",
    "backoff_s",
    "call_until_transient_passes",
    "call_while",
    "retry_immediately",
    "wait_until",
]

_T = TypeVar("_T")

METADATA_POLL_S = 0.05
"""Between metadata queries while topics, leaders or a broker come up: they take milliseconds."""
BROKER_POLL_S = 0.1
"""Between checks on a broker process or a group coordinator that is loading."""
TRANSIENT_RETRY_S = 0.2
"""Between attempts of a call that failed with a transient Kafka error (coordinator moving)."""


class _stop_unless(stop_base):  # noqa: N801 - tenacity's own stop conditions are lower case
    """Stop as soon as ``keep_waiting()`` says False (for example: the broker process died)."""

    def __init__(self, keep_waiting: Callable[[], bool]) -> None:
        self._keep_waiting = keep_waiting

    def __call__(self, retry_state: RetryCallState) -> bool:
        return not self._keep_waiting()


def _last_outcome(retry_state: RetryCallState) -> object:
    outcome = retry_state.outcome
    assert outcome is not None  # noqa: S101 - tenacity calls this only after an attempt
    return outcome.result()  # the last falsy answer, or the last exception raised again


def wait_until(
    check: Callable[[], _T],
    *,
    timeout_s: float,
    interval_s: float = METADATA_POLL_S,
    retry_on: tuple[type[BaseException], ...] = (),
    keep_waiting: Callable[[], bool] | None = None,
) -> _T:
    """Call ``check`` until it answers something truthy, for at most ``timeout_s``.

    Exceptions of ``retry_on`` count as "not yet"; any other is raised at once. Returns the
    first truthy answer, or the last falsy one when time (or ``keep_waiting``) runs out; if the
    last attempt raised, that exception is raised.
    """
    stop: stop_base = stop_after_delay(timeout_s)
    if keep_waiting is not None:
        stop = stop | _stop_unless(keep_waiting)
    retrying = Retrying(
        stop=stop,
        wait=wait_fixed(interval_s),
        retry=retry_if_result(lambda answer: not answer) | retry_if_exception_type(retry_on),
        retry_error_callback=_last_outcome,
        reraise=True,
    )
    return retrying(check)


def call_until_transient_passes(
    call: Callable[[], _T],
    *,
    timeout_s: float,
) -> _T:
    """Make ``call``, again while it fails with a transient Kafka error, for up to ``timeout_s``.

    A transient error only says the cluster cannot answer right now (a coordinator loading or
    moving, a broker restarting); any other error is raised at once, and so is the last
    transient one when the time is up.
    """
    return call_while(
        call,
        failing_with=lambda error: isinstance(error, ClientBalanceError) and is_transient(error),
        timeout_s=timeout_s,
        interval_s=TRANSIENT_RETRY_S,
    )


def call_while(
    call: Callable[[], _T],
    *,
    failing_with: Callable[[BaseException], bool],
    timeout_s: float,
    interval_s: float = METADATA_POLL_S,
) -> _T:
    """Make ``call``, again while it fails with an error ``failing_with`` accepts.

    For up to ``timeout_s``; any other error, and the last accepted one when the time is up,
    is raised.
    """
    retrying = Retrying(
        stop=stop_after_delay(timeout_s),
        wait=wait_fixed(interval_s),
        retry=retry_if_exception(failing_with),
        reraise=True,
    )
    return retrying(call)


def retry_immediately(
    call: Callable[[], _T], *, attempts: int, retry_if: Callable[[BaseException], bool]
) -> _T:
    """Make ``call`` up to ``attempts`` times while it fails with an error ``retry_if`` accepts.

    For failures that a fresh attempt fixes at once (a port taken between probe and bind), so
    there is no wait; the last error is raised when the attempts run out.
    """
    retrying = Retrying(
        stop=stop_after_attempt(attempts), retry=retry_if_exception(retry_if), reraise=True
    )
    return retrying(call)


def backoff_s(failures: int, *, first_s: float, most_s: float) -> float:
    """The wait after ``failures`` failures in a row: ``first_s``, doubled each time.

    At most ``most_s``: tenacity's exponential wait, for a loop that keeps its own pace
    otherwise (the status reports).
    """
    wait = wait_exponential(multiplier=first_s, max=most_s)
    return float(wait(cast("RetryCallState", _Attempt(failures))))


class _Attempt:
    """What tenacity's waits read of a retry's state: the number of the attempt."""

    def __init__(self, attempt_number: int) -> None:
        self.attempt_number = attempt_number
