"""Settings from the environment: ``CLIENT_BALANCE_<FIELD>`` variables, in any case."""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from client_balance._settings_model import Setting

__all__ = ["ENV_PREFIX", "environment_values"]

ENV_PREFIX = "CLIENT_BALANCE_"


def environment_values(
    fields: Mapping[str, Setting], keywords: Collection[str], problems: list[str]
) -> dict[str, Any]:
    """The fields the environment gives (names in any case), decoded as each field reads them.

    Fields among ``keywords`` are left out; a variable that does not decode adds to ``problems``.
    """
    found: dict[str, Any] = {}
    variables: dict[str, str] = {}
    spellings: dict[str, list[str]] = {}
    for name, value in sorted(os.environ.items()):
        if name.upper().startswith(ENV_PREFIX):
            spellings.setdefault(name.upper(), []).append(name)
            variables[name.upper()] = value
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
            found[name] = raw
            continue
        try:
            decoded = json.loads(raw)
        except ValueError:
            if field.env == "json or text":  # an Avro schema may be its JSON, or a file's name
                found[name] = raw
                continue
            problems.append(
                f"{env} is not valid: dict and list settings are read from the environment as "
                'JSON, such as {"security.protocol": "SASL_SSL"}'
            )
            continue
        if decoded is not None:  # JSON null: as if not set
            found[name] = decoded
    return found
