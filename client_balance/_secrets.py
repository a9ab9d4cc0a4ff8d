"""Which librdkafka properties are secrets, and how a configuration shows without them.

A secret (a password, a private key, a JAAS line) reaches librdkafka and nothing else: the
settings hold it as a ``SecretStr``, and every repr, dump, error message, log event, CLI table
and Spark option shows :data:`MASK` instead. The rule is by name, so a property this list does
not know is still masked when its name says what it is (``...password``, ``...secret``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

__all__ = [
    "CALLBACK_KEYS",
    "MASK",
    "MaskedConfig",
    "SecretStr",
    "for_repr",
    "is_secret_key",
    "is_secret_value",
    "masked",
    "reveal",
    "scrub",
]

MASK = "**********"
"""What a secret shows as."""


class SecretStr:
    """A text that never shows: ``repr``, ``str`` and JSON give :data:`MASK`.

    ``get_secret_value()`` is the one way to the text, as with pydantic's ``SecretStr`` (whose
    instances the settings take too: anything with a ``get_secret_value()`` is a secret).
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def get_secret_value(self) -> str:
        """The text itself: for librdkafka, the HMAC key, the Schema Registry."""
        return self._value

    def __repr__(self) -> str:
        return f"SecretStr('{MASK}')"

    def __str__(self) -> str:
        return MASK

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SecretStr) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __len__(self) -> int:
        return len(self._value)

    def __getstate__(self) -> str:
        return self._value

    def __setstate__(self, state: str) -> None:
        self._value = state


def is_secret_value(value: object) -> bool:
    """Whether ``value`` holds a secret: ours, pydantic's, anything with ``get_secret_value``."""
    return callable(getattr(value, "get_secret_value", None)) and not isinstance(value, type)


_SECRET_KEYS = frozenset(
    {
        "sasl.password",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.config",
        "sasl.oauthbearer.assertion.private.key.pem",
        "sasl.jaas.config",
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.truststore.password",
        "ssl.key.pem",
        "ssl_key",
    }
)
"""Every property librdkafka 2.16 flags sensitive whose value is a credential (its other flagged
ones are file paths, a CA certificate and the user name), and the JVM's ``sasl.jaas.config``."""
_SECRET_WORDS = ("password", "secret", "passphrase")

CALLBACK_KEYS = frozenset({"oauth_cb", "stats_cb", "error_cb", "throttle_cb", "logger"})
"""librdkafka properties that take a Python callable (``logger``: a ``logging.Logger``)."""


def is_secret_key(key: str) -> bool:
    """Whether the librdkafka property ``key`` holds a secret (by its name)."""
    lowered = key.lower()
    return lowered in _SECRET_KEYS or any(word in lowered for word in _SECRET_WORDS)


def reveal(value: Any) -> Any:
    """The value librdkafka needs: a ``SecretStr``'s text, anything else as it is."""
    return value.get_secret_value() if is_secret_value(value) else value


def masked(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` for display: secrets as :data:`MASK`, callables by name, URLs' credentials."""
    shown: dict[str, Any] = {}
    for key, value in sorted(config.items()):
        if is_secret_key(key) or is_secret_value(value):
            shown[key] = MASK
        elif callable(value):
            shown[key] = repr(_Named(value))
        else:
            shown[key] = url_without_userinfo(value) if isinstance(value, str) else value
    return shown


# Up to the last "@" of the word: a password may hold a raw "/" or "@".
_USERINFO = re.compile(r"(://)[^\s\"'<>]*@")
# A scheme as a URL gives it, with or without its slashes, however mistyped the rest is.
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:/{0,2}")


def without_userinfo(text: str) -> str:
    """``text`` (a message, a log line) with the credentials of every URL in it masked.

    A URL is no secret by its key's name (``sasl.oauthbearer.token.endpoint.url``), yet one
    may carry a client secret, and librdkafka repeats it in its log lines.
    """
    return _USERINFO.sub(rf"\1{MASK}@", text)


def url_without_userinfo(value: str) -> str:
    """A value that is a URL (``://``) with whatever precedes its last ``@`` masked."""
    return before_last_at_masked(value) if "://" in value else value


def before_last_at_masked(part: str) -> str:
    """``part``, a URL however mistyped, with all between its scheme and last ``@`` masked."""
    if "@" not in part:
        return part
    scheme = _SCHEME.match(part)
    prefix = scheme.group() if scheme else ""
    return f"{prefix}{MASK}@{part.rsplit('@', 1)[1]}"


# librdkafka quotes the rest of a sasl.oauthbearer.config it cannot parse, up to the end of its
# text: all of it goes, whatever quotes it holds; a KafkaError's closing quote and brace stay.
_QUOTED_TAIL = re.compile(r"(beginning at:)(.*?)(\"\}?)?$", re.DOTALL)
_TOKEN_SEPARATORS = re.compile(r"[\s,;]+")
_SHORTEST_MASKED_PART = 4
"""A token's value part shorter than this is masked only as ``key=value``: masking every "1"
or "yes" of a message would make it unreadable, and so short a part guards nothing."""
_PLAIN_TOKENS = frozenset({"principal", "scope", "lifeSeconds"})
"""Names in ``sasl.oauthbearer.config`` whose values are no secret: librdkafka echoes them, and
masking "admin" or "3600" wherever they stand garbled topic names and timings."""


def scrub(text: str, kafka: Mapping[str, Any] | None = None) -> str:
    """The words ``text`` of librdkafka without a secret of ``kafka``, fit for a message or log.

    The quoted tail of a refused ``sasl.oauthbearer.config`` ("beginning at: ...") is cut
    whatever ``kafka`` holds. Each secret value of ``kafka`` shows as :data:`MASK` wherever it
    stands, and so does each ``key=value`` token within one (librdkafka may quote a value from
    its middle on); a token's value alone is masked as a whole word only.
    """
    text = _QUOTED_TAIL.sub(lambda cut: f"{cut[1]} {MASK}{cut[3] or ''}", without_userinfo(text))
    anywhere: dict[str, str] = {}
    words: set[str] = set()
    for key, value in (kafka or {}).items():
        if not (is_secret_key(key) or is_secret_value(value)):
            continue
        secret = str(reveal(value))
        if not secret:
            continue
        anywhere[secret] = MASK
        for token in _TOKEN_SEPARATORS.split(secret):
            name, equals, part = token.partition("=")
            if equals and part and name not in _PLAIN_TOKENS:
                anywhere[token] = f"{name}={MASK}"
                if len(part) >= _SHORTEST_MASKED_PART:
                    words.add(part)
    for secret in sorted(anywhere, key=len, reverse=True):  # a whole value before its parts
        text = text.replace(secret, anywhere[secret])
    for part in sorted(words, key=len, reverse=True):
        text = re.sub(rf"(?<![\w.-]){re.escape(part)}(?![\w.-])", MASK, text)
    return text


class MaskedConfig(Mapping[str, Any]):
    """A read-only librdkafka configuration whose repr never shows a secret.

    It pickles with its real values (a Spark task needs them on the executor); only its text
    form is masked.
    """

    __slots__ = ("_config",)

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        self._config = {key: reveal(value) for key, value in (config or {}).items()}

    def __getitem__(self, key: str) -> Any:
        return self._config[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._config)

    def __len__(self) -> int:
        return len(self._config)

    def __eq__(self, other: object) -> bool:
        return dict(self) == dict(other) if isinstance(other, Mapping) else NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable values: equal, never hashed

    def __repr__(self) -> str:
        return f"MaskedConfig({masked(self)!r})"

    __str__ = __repr__

    def __getstate__(self) -> dict[str, Any]:
        return self._config

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._config = state


class _Named:
    """A callable as a repr shows it: by name, never by what it holds (a partial's secret)."""

    def __init__(self, value: Callable[..., Any]) -> None:
        inner = getattr(value, "func", value)  # a functools.partial: its function's name
        self._name = getattr(inner, "__qualname__", type(value).__name__)

    def __repr__(self) -> str:
        return f"<callable {self._name}>"


def for_repr(value: Any, *, by_key: bool = False) -> Any:
    """``value`` for a repr: callables by name (in a dict too), URLs' credentials masked.

    ``by_key``: a dict of librdkafka properties, whose secret keys are masked whatever their
    value's type (a plain str put into the settings' ``kafka`` dict after they were made).
    """
    if callable(value):
        return _Named(value)
    if isinstance(value, str):
        return url_without_userinfo(value)
    if isinstance(value, dict):
        return {
            key: SecretStr(MASK) if by_key and is_secret_key(str(key)) else for_repr(item)
            for key, item in value.items()
        }
    return value
