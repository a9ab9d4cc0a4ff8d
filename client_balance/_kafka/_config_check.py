"""librdkafka's own check of a configuration, at settings time rather than at ``start()``.

A client built from the configuration, with no brokers to reach and its logging off, accepts
exactly the properties librdkafka knows with values it can parse; it is closed at once. It makes
no network call: with ``sasl.oauthbearer.method=oidc`` it is built without SASL (see
:func:`_without_token_fetch`), as librdkafka would otherwise fetch a token when it is made.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException

from client_balance._secrets import scrub

__all__ = ["librdkafka_refuses"]

# "debug" raises librdkafka's log level whatever log_level says, and without a logger its lines
# go to stderr (a user's logger is not passed: a throwaway client's lines would only confuse).
# Disabled, and outside the logging tree, so no line of the check reaches any handler.
_SILENT = logging.Logger("client_balance.config_check")
_SILENT.disabled = True


def librdkafka_refuses(config: Mapping[str, Any]) -> str | None:
    """Why librdkafka refuses ``config`` (no secret in the text), or None if it takes it."""
    if not config:  # nothing to refuse: a client made to check it costs 2 ms of every start
        return None
    try:
        client = Consumer(
            {
                "log_level": 0,
                **_without_token_fetch(config),
                "logger": _SILENT,
                "group.id": "client-balance-config-check",
            }
        )
    except (KafkaException, ValueError, TypeError) as error:
        first = error.args[0] if error.args else type(error).__name__
        reason = first.str() if hasattr(first, "str") else str(first)  # a KafkaError's own words
        # librdkafka quotes the value it could not parse.
        return f"librdkafka refuses the kafka settings: {scrub(reason, config)}"
    client.close()
    return None


def _without_token_fetch(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` for the check: with OIDC, the same security protocol without SASL.

    Creating a client whose SASL mechanism is OAUTHBEARER with ``method=oidc`` sends the client
    secret to the token endpoint at once, and the check then blocked for 5 to 20 s. Without
    SASL, librdkafka never starts its SASL provider, so nothing is fetched; it still checks
    every property, the OIDC ones included (which it checks by ``sasl.mechanisms``, not by
    protocol), and the SSL ones with an ``SASL_SSL`` protocol, which becomes ``SSL``.
    """
    method = config.get("sasl.oauthbearer.method")
    protocol = config.get("security.protocol")
    if not (
        isinstance(method, str)
        and method.strip().lower() == "oidc"
        and isinstance(protocol, str)
        and protocol.lower().startswith("sasl_")
    ):
        return dict(config)
    return {**config, "security.protocol": protocol[len("sasl_") :]}
