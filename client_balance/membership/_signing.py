"""Signed status records: with ``status_secret``, only the group's members can write its state.

Every record a writer with the secret sends carries one header, ``cb-sig``::

    v1.<writer>.<seq>.<hex HMAC-SHA256(secret, payload)>

``writer`` is 16 random hex digits chosen per writer (per member start), ``seq`` counts that
writer's records from 0, and the payload covers them, the key and the value, with a tombstone
marked as such (a header, so a tombstone is signed as well as a report or a claim)::

    b"client-balance-status-v1" 0 writer 0 seq 0 len(key) as 8 bytes, key, (1 value | 0)

A reader with the secret applies a record only if the signature is valid, and only if its
``seq`` is above every ``seq`` of that writer already applied: a signed record copied back into
the topic (a replay of an old claim's tombstone, say) changes nothing. One writer's records land
in the order it wrote them (its producer keeps one request in flight), so one number per writer
tells a copy, whatever its key: a reader's memory grows with member starts, not with every key
ever signed.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import os
import re
from collections.abc import Mapping, Sequence

from client_balance._settings_checks import MIN_SECRET_CHARS, check_status_secret
from client_balance.errors import ConfigError
from client_balance.membership._records import REPLAYED, UNSIGNED, GroupState
from client_balance.settings import ClientBalanceSettings

__all__ = ["HEADER", "MIN_SECRET_CHARS", "RecordGate", "RecordSigner", "status_secret"]

HEADER = "cb-sig"
_DOMAIN = b"client-balance-status-v1"
_SIGNATURE = re.compile(rb"v1\.([0-9a-f]{16})\.(0|[1-9][0-9]{0,18})\.([0-9a-f]{64})")

Headers = Sequence[tuple[str, str | bytes | None]] | Mapping[str, str | bytes | None] | None
"""A record's headers as confluent-kafka gives them."""


def status_secret(settings: ClientBalanceSettings) -> bytes | None:
    """The group's signing key from ``settings.status_secret``; None when records are unsigned.

    The settings refuse a short secret when made; this guards one put in by ``model_copy``.
    """
    if settings.status_secret is None:
        return None
    try:
        check_status_secret(settings.status_secret)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    return settings.status_secret.get_secret_value().encode()


def _mac(secret: bytes, writer: bytes, seq: bytes, key: bytes, value: bytes | None) -> bytes:
    body = b"\x00".join((_DOMAIN, writer, seq, len(key).to_bytes(8, "big")))
    body += key + (b"\x00" if value is None else b"\x01" + value)
    return hmac.new(secret, body, hashlib.sha256).hexdigest().encode()


class RecordSigner:
    """Signs one writer's records (the caller keeps them in order, as StatusWriter's lock does)."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret
        self._writer = os.urandom(8).hex().encode()  # what secrets.token_hex does
        self._seq = itertools.count()

    def headers(self, key: bytes, value: bytes | None) -> list[tuple[str, str | bytes | None]]:
        """The headers of the next record (key, value or None for a tombstone)."""
        seq = str(next(self._seq)).encode()
        mac = _mac(self._secret, self._writer, seq, key, value)
        return [(HEADER, b".".join((b"v1", self._writer, seq, mac)))]


def signature_of(headers: Headers) -> bytes | None:
    """The ``cb-sig`` header's value, if the record has exactly one."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers or ()
    found = [value for name, value in pairs if name == HEADER]
    return found[0] if len(found) == 1 and isinstance(found[0], bytes) else None


class RecordGate:
    """Decides which records a reader applies: all without a secret, else the signed ones."""

    def __init__(self, secret: bytes | None) -> None:
        self._secret = secret
        self._seen: dict[bytes, int] = {}
        """Writer -> highest seq applied (what a replay is told from)."""

    @property
    def verifies(self) -> bool:
        """Whether records are checked (the reader has the secret)."""
        return self._secret is not None

    def check(self, key: bytes | None, value: bytes | None, headers: Headers) -> str | None:
        """None if the record may be applied; else why not (``unsigned``, ``replayed``)."""
        if self._secret is None:
            return None
        signature = signature_of(headers)
        found = _SIGNATURE.fullmatch(signature or b"")
        if key is None or found is None:
            return UNSIGNED
        writer, seq, mac = found.groups()
        if not hmac.compare_digest(mac, _mac(self._secret, writer, seq, key, value)):
            return UNSIGNED
        if int(seq) <= self._seen.get(writer, -1):
            return REPLAYED
        self._seen[writer] = int(seq)
        return None

    def admit(
        self,
        state: GroupState,
        key: bytes | None,
        value: bytes | None,
        headers: Headers,
        *,
        offset: int,
        timestamp_ms: int,
    ) -> tuple[bool, bool]:
        """Apply the record to ``state`` if it passes, else reject it: (applied, changed)."""
        problem = self.check(key, value, headers)
        if problem is not None:
            state.reject(key, value, offset, timestamp_ms, problem)
            return False, False
        signed = signature_of(headers) is not None
        return True, state.apply(key, value, offset, timestamp_ms, signed=signed)
