"""Settings from the environment: ``CLIENT_BALANCE_<FIELD>`` variables, in any case.

A ``CLIENT_BALANCE_*`` variable that names no field is not silently dropped: a misspelling of
a field's name (``CLIENT_BALANCE_STATUS_SECRETS``, two letters off at most) is a problem that
says which was meant, since the group would otherwise run unsigned, or with a default, while
its operator believes otherwise; any other is logged once: a deployment's own variables share
the prefix (``CLIENT_BALANCE_STATUS_SECRET_FILE``, or ``CLIENT_BALANCE_SCHEMA_REGISTRY_PORT``
that Kubernetes makes for a service of that name). Neither ever shows the variable's value.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from client_balance._logging import get_logger

if TYPE_CHECKING:
    from client_balance._settings_model import Setting

__all__ = ["ENV_PREFIX", "NOT_SETTINGS", "environment_values"]

ENV_PREFIX = "CLIENT_BALANCE_"
NOT_SETTINGS = frozenset(
    {
        "CLIENT_BALANCE_TEST_BOOTSTRAP",  # client_balance.testing: the broker of the tests
        "CLIENT_BALANCE_KAFKA_HOME",  # client_balance.broker: where the Kafka jars are
        "CLIENT_BALANCE_SEED_SCENARIOS",  # the conformance tests' scenario file
    }
)
"""The project's own ``CLIENT_BALANCE_*`` variables that are read elsewhere, not settings."""
_CLOSE_ENOUGH = 0.8
"""difflib's ratio of a name worth suggesting in the warning."""
_MISSPELT_AT_MOST = 2
"""Letters added, dropped or changed in a misspelling (STATUS_SECRETS, LEASE_TIMEOUT, GROUPID);
a name a word longer (STATUS_SECRET_FILE, METRICS_PATH) is another variable, not a typo."""

_log = get_logger("settings")
_warned: set[str] = set()  # a variable is logged once per process, not at every construction


def environment_values(
    fields: Mapping[str, Setting], keywords: Collection[str], problems: list[str]
) -> dict[str, tuple[Any, str]]:
    """The fields the environment gives (names in any case), each with its variable's name.

    Each value is decoded as its field reads it. Fields among ``keywords`` are left out; a
    variable that does not decode, or names no field but nearly names one, adds to ``problems``.
    """
    found: dict[str, tuple[Any, str]] = {}
    variables: dict[str, str] = {}
    spellings: dict[str, list[str]] = {}
    for name, value in sorted(os.environ.items()):
        if name.upper().startswith(ENV_PREFIX):
            spellings.setdefault(name.upper(), []).append(name)
            variables[name.upper()] = value
    _not_settings(fields, keywords, spellings, problems)
    for name, field in fields.items():
        env = f"{ENV_PREFIX}{name.upper()}"
        if env not in variables or name in keywords:
            continue
        names = spellings[env]
        if len({os.environ[each] for each in names}) > 1:  # which one wins would be chance
            problems.append(f"{' and '.join(names)} are set to different values; set one of them")
            continue
        raw = variables[env]
        if field.env == "text":
            found[name] = (raw, names[0])
            continue
        try:
            decoded = json.loads(raw)
        except ValueError:
            if field.env == "json or text":  # an Avro schema may be its JSON, or a file's name
                found[name] = (raw, names[0])
                continue
            problems.append(
                f"{env} is not valid: dict and list settings are read from the environment as "
                'JSON, such as {"security.protocol": "SASL_SSL"}'
            )
            continue
        if decoded is not None:  # JSON null: as if not set
            found[name] = (decoded, names[0])
    return found


def _not_settings(
    fields: Mapping[str, Setting],
    keywords: Collection[str],
    spellings: Mapping[str, list[str]],
    problems: list[str],
) -> None:
    """A problem for each variable that nearly names a field, a warning for the others."""
    known = {f"{ENV_PREFIX}{name.upper()}" for name in fields} | NOT_SETTINGS
    for env in sorted(set(spellings) - known):
        meant = difflib.get_close_matches(
            env.removeprefix(ENV_PREFIX).lower(), list(fields), n=1, cutoff=_CLOSE_ENOUGH
        )
        for variable in spellings[env]:
            # A field given as a keyword does not read its variable either: the typo changes
            # nothing then, and a warning is enough.
            misspelt = bool(meant) and (
                _edits(env.removeprefix(ENV_PREFIX).lower(), meant[0]) <= _MISSPELT_AT_MOST
            )
            if misspelt and meant[0] not in keywords:
                problems.append(
                    f"{variable} is not a setting; did you mean {ENV_PREFIX}{meant[0].upper()}? "
                    f"(unset it, or rename it)"
                )
            elif variable not in _warned:
                _warned.add(variable)
                _log.warning(
                    "environment variable is not a setting; ignored",
                    variable=variable,
                    meant=f"{ENV_PREFIX}{meant[0].upper()}" if meant else None,
                )


def _edits(given: str, field: str) -> int:
    """Letters to add, drop or change to make ``given`` into ``field`` (Levenshtein)."""
    previous = list(range(len(field) + 1))
    for row, letter in enumerate(given, 1):
        current = [row]
        for column, other in enumerate(field, 1):
            current.append(
                min(previous[column] + 1, current[-1] + 1, previous[column - 1] + (letter != other))
            )
        previous = current
    return previous[-1]
