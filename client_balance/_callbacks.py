"""The application's librdkafka listeners, guarded: what they raise is logged, and stays here.

confluent-kafka raises a callback's exception again from whichever ``poll()``, ``consume()``
or ``flush()`` served it, in whichever of the SDK's threads made that call, and (2.16.1) keeps
a reference to the exception for good: its traceback then holds every frame it passed through,
and the member with them, clients and threads included. A ``stats_cb``, ``error_cb`` or
``throttle_cb`` only listens, so its failure is logged with its traceback and the client goes
on. ``oauth_cb`` is not guarded: raising is how it says that no token can be had.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from client_balance._logging import get_logger

__all__ = ["GUARDED_CALLBACKS", "guarded"]

_log = get_logger("consumer")

GUARDED_CALLBACKS = frozenset({"stats_cb", "error_cb", "throttle_cb"})


def guarded(key: str, value: Any) -> Any:
    """``value`` as librdkafka gets it: a listener of ``GUARDED_CALLBACKS`` that never raises."""
    if key not in GUARDED_CALLBACKS or not callable(value):
        return value
    listener: Callable[[Any], Any] = value

    @functools.wraps(listener)
    def never_raises(argument: Any) -> None:
        try:
            listener(argument)
        except Exception:  # whatever it is: logged here, never handed to confluent-kafka
            _log.exception("application callback raised; ignored", callback=key)

    return never_raises
