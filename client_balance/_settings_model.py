"""The frozen, validated class the settings are declared on: fields, kinds, and one error.

A field is a class attribute made by :func:`setting`: its kind (how a given value becomes the
field's type), its default, its bounds and its own check. A value comes from a keyword argument,
else from the environment variable ``CLIENT_BALANCE_<NAME>`` (in any case), else the default.
Every problem of one construction goes into one :class:`ConfigError` that names each field, the
value given (never a secret's, never a librdkafka value) and what is allowed; the checks across
fields run once every field is valid.

Not pydantic: its schemas and validators are some 12,000 objects of the user's process, which
every full garbage collection walks, and they made those collections three times as long in a
consumer loop (docs/design-decisions.md, "The settings are checked without pydantic").
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, dataclass_transform

from client_balance._secrets import (
    MASK,
    SecretStr,
    before_last_at_masked,
    for_repr,
    is_secret_key,
    is_secret_value,
)
from client_balance._settings_environment import ENV_PREFIX, environment_values
from client_balance.errors import ConfigError

__all__ = [
    "REQUIRED",
    "Setting",
    "SettingsModel",
    "choice",
    "flag",
    "integer",
    "number",
    "optional",
    "secret",
    "setting",
    "text",
]

_REQUIRED: Any = object()
REQUIRED: Any = _REQUIRED
"""The default of a field that must be given, as a keyword or by the environment."""
_TRUE = frozenset({"1", "true", "t", "yes", "y", "on"})
_FALSE = frozenset({"0", "false", "f", "no", "n", "off"})

Kind = Callable[[Any], Any]
"""Makes a given value the field's type, or raises ValueError saying what is allowed."""


def text(value: Any) -> str:
    """A string (bytes as UTF-8)."""
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            raise ValueError("give text; these bytes are not UTF-8") from None
    if not isinstance(value, str):
        raise ValueError(f"give a string, got {_kind_of(value)}")
    return value


def number(value: Any) -> float:
    """A finite number: an int or float, or its text (from the environment)."""
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise ValueError("give a number") from None
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"give a number, got {_kind_of(value)}")
    try:
        result = float(value)
    except OverflowError:
        raise ValueError("give a number of ordinary size") from None
    if not math.isfinite(result):
        raise ValueError("give a finite number")
    return result


def integer(value: Any) -> int:
    """A whole number: an int, a float without a fraction, or its text (from the environment)."""
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            raise ValueError("give a whole number") from None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"give a whole number, got {_kind_of(value)}")
    return value


def flag(value: Any) -> bool:
    """True or false: a bool, 0 or 1, or words such as 'true' and 'no' (from the environment)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError("give true or false")


def _kind_of(value: Any) -> str:
    return "None" if value is None else type(value).__name__


def secret(value: Any) -> Any:
    """A secret text, kept as a ``SecretStr`` (one given, ours or pydantic's, as it is)."""
    return value if is_secret_value(value) else SecretStr(text(value))


def choice(*allowed: str) -> Kind:
    """One of ``allowed``, exactly."""
    words = ", ".join(repr(word) for word in allowed[:-1]) + f" or {allowed[-1]!r}"

    def one_of(value: Any) -> str:
        if not isinstance(value, str) or value not in allowed:
            raise ValueError(f"give {words}")
        return value

    return one_of


def optional(kind: Kind) -> Kind:
    """``kind``, or None."""

    def or_none(value: Any) -> Any:
        return None if value is None else kind(value)

    return or_none


@dataclass(frozen=True)
class Setting:
    """One field: how its value is made and checked, and what it is for."""

    kind: Kind
    default: Any = _REQUIRED
    default_factory: Callable[[], Any] | None = None
    gt: float | None = None
    ge: float | None = None
    le: float | None = None
    min_length: int | None = None
    check: Callable[[Any], Any] | None = None
    """Runs on the value made by ``kind``; returns it (perhaps normalized) or raises."""
    env: Literal["text", "json", "json or text"] = "text"
    """How the environment gives it: text, JSON (dicts, lists), or JSON where it parses."""
    shown: bool = True
    """In ``repr``: False for a secret, which is not even masked there."""
    in_errors: Literal["value", "keys", "nothing", "masked"] = "value"
    """What an error about it shows of the value given: all, a dict's keys (librdkafka values
    may be secrets), nothing (a secret, or a URL refused for holding credentials), or the text
    with all before its last ``@`` masked (broker addresses: a pasted URL's credentials)."""
    in_json: Callable[[Any], Any] | None = None
    """Its form in ``model_dump_json`` when not the value itself (``kafka``: masked)."""
    description: str = ""

    @property
    def required(self) -> bool:
        """Whether the field has no default."""
        return self.default is _REQUIRED and self.default_factory is None

    def default_value(self) -> Any:
        """A fresh default (a new dict for each settings object)."""
        return self.default_factory() if self.default_factory is not None else self.default

    def make(self, value: Any) -> Any:
        """``value`` as the field's type, in its bounds and past its check (else ValueError)."""
        value = self.kind(value)
        if value is not None:
            self._bounds(value)
        return value if self.check is None else self.check(value)

    def _bounds(self, value: Any) -> None:
        if self.gt is not None and not value > self.gt:
            raise ValueError(f"must be greater than {self.gt:g}")
        if self.ge is not None and not value >= self.ge:
            raise ValueError(f"must be at least {self.ge:g}")
        if self.le is not None and not value <= self.le:
            raise ValueError(f"must be at most {self.le:g}")
        if self.min_length is not None and len(value) < self.min_length:
            raise ValueError(f"must have at least {self.min_length} character(s)")


def setting(
    kind: Kind, *, default: Any = _REQUIRED, default_factory: Callable[[], Any] | None = None,
    **options: Any,
) -> Any:  # fmt: skip
    """A field of a :class:`SettingsModel` (typed ``Any`` so that its annotation is the type).

    ``default=REQUIRED`` (the default): given as a keyword or by the environment, else an error.
    """
    return Setting(kind, default=default, default_factory=default_factory, **options)


@dataclass_transform(kw_only_default=True, frozen_default=True, field_specifiers=(setting,))
class SettingsModel:
    """A frozen object of the ``Setting`` fields of its class, checked when it is made."""

    model_fields: ClassVar[dict[str, Setting]] = {}
    """Every field, in the order declared (base classes first)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        fields = dict(cls.model_fields)
        fields.update({k: v for k, v in vars(cls).items() if isinstance(v, Setting)})
        cls.model_fields = fields

    def __init__(self, **values: Any) -> None:
        fields = type(self).model_fields
        problems = [
            f"{name} is not a setting of {type(self).__name__}"
            for name in values
            if name not in fields
        ]
        keywords = {k: v for k, v in values.items() if k in fields}
        # Keywords win: the environment of a field given as a keyword is not even read.
        environment = environment_values(fields, keywords, problems)
        given = {**{name: value for name, (value, _) in environment.items()}, **keywords}
        made: dict[str, Any] = {}
        for name, field in fields.items():
            if name not in given:
                if field.required:
                    problems.append(
                        f"{name} is required (pass {name}=... or set {ENV_PREFIX}{name.upper()})"
                    )
                made[name] = field.default_value()
                continue
            try:
                made[name] = field.make(given[name])
            except (ValueError, ConfigError) as error:
                # A value from the environment names its variable: the code never says it.
                source = environment[name][1] if name not in keywords else None
                problems.append(_problem(name, field, given[name], str(error), source))
        if not problems:
            object.__setattr__(self, "__dict__", made)
            object.__setattr__(self, "_fields_set", frozenset(given))
            problems = [str(error) for error in self._check_across_fields()]
        if problems:
            raise ConfigError(f"invalid {type(self).__name__}: " + "; ".join(problems))

    def _check_across_fields(self) -> Iterable[ValueError | ConfigError]:
        """Problems between fields, each naming the values (every field is valid by now)."""
        return ()

    # ------------------------------------------------------------------ an immutable value
    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(
            f"{type(self).__name__} is frozen: {name} cannot change; make new settings, or "
            "use model_copy(update={...})"
        )

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: {name} cannot be deleted")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.model_dump() == other.model_dump()

    def __hash__(self) -> int:
        return hash((type(self), *(_canonical(v) for v in self.model_dump().values())))

    def __repr__(self) -> str:
        fields = type(self).model_fields
        shown = ", ".join(
            f"{name}={for_repr(getattr(self, name), by_key=field.in_errors == 'keys')!r}"
            for name, field in fields.items()
            if field.shown
        )
        return f"{type(self).__name__}({shown})"

    __str__ = __repr__

    @property
    def model_fields_set(self) -> frozenset[str]:
        """The fields given, as keyword arguments or environment variables."""
        return self._fields_set  # type: ignore[no-any-return,attr-defined]

    def model_dump(self) -> dict[str, Any]:
        """Every field's value (secrets stay secret objects)."""
        return {name: getattr(self, name) for name in type(self).model_fields}

    def model_dump_json(self) -> str:
        """The fields as JSON: secrets as '**********', callables by name."""
        return json.dumps(
            {
                name: value if field.in_json is None or value is None else field.in_json(value)
                for (name, field), value in zip(
                    type(self).model_fields.items(), self.model_dump().values(), strict=True
                )
            },
            default=_shown,
        )

    def model_copy(self, *, update: Mapping[str, Any] | None = None) -> Any:
        """A copy with ``update`` applied, unchecked (as pydantic's ``model_copy``).

        Unchecked, but a secret in ``update`` is held as a ``SecretStr`` as the settings would
        hold it, so that no repr or dump of the copy shows it.
        """
        fields = type(self).model_fields
        changed = {
            name: _concealed(name, fields.get(name), v) for name, v in (update or {}).items()
        }
        copy = object.__new__(type(self))
        object.__setattr__(copy, "__dict__", {**self.__dict__, **changed})
        object.__setattr__(copy, "_fields_set", self.model_fields_set | set(update or {}))
        return copy


def _concealed(name: str, field: Setting | None, value: Any) -> Any:
    """``value`` as ``model_copy`` holds it: a secret field's, or a secret property's, masked.

    A URL holding credentials is refused, as the settings refuse it: masked, it would not work.
    """
    if field is None or value is None:
        return value
    # The constructor refuses credentials in such a URL (in_errors "nothing" or "masked").
    if field.shown and field.in_errors in {"nothing", "masked"} and "@" in _as_text(value):
        raise ConfigError(
            f"model_copy: {name} is a URL holding credentials (user:password@), which would "
            "show in every repr; give them where the settings keep secrets"
        )
    if not field.shown:  # a secret field: repr leaves it out, but JSON would write a str
        try:
            return secret(value)
        except ValueError:
            return SecretStr(str(value))
    if field.in_errors == "keys" and isinstance(value, Mapping):  # librdkafka properties
        return {
            key: SecretStr(str(item))
            if is_secret_key(str(key)) and isinstance(item, str | int | float)
            else item
            for key, item in value.items()
        }
    return value


def _canonical(value: Any) -> Any:
    """``value`` as a hashable form that equal values share: a dict's order does not count.

    ``==`` compares the dicts (``kafka``, ``pinned``, an Avro schema) without their order; a
    hash of their repr differed for two equal settings, and a set kept both.
    """
    if isinstance(value, Mapping):
        return ("dict", tuple(sorted((repr(k), _canonical(v)) for k, v in value.items())))
    if isinstance(value, list | tuple):
        return ("list", tuple(_canonical(item) for item in value))
    return repr(value)


def _problem(name: str, field: Setting, value: Any, message: str, source: str | None) -> str:
    if field.in_errors == "keys":
        shown = f" (keys {sorted(map(str, value)) if isinstance(value, dict) else '...'})"
    elif field.in_errors == "nothing" or (
        field.in_errors == "masked" and not isinstance(value, str | bytes)  # a list's item...
    ):
        shown = ""
    elif field.in_errors == "masked":
        shown = f"={before_last_at_masked(_as_text(value))!r}"
    else:
        shown = f"={value!r}"
    origin = "" if source is None else f" (from {source})"
    return f"{name}{shown}{origin} is not allowed: {message}"


def _as_text(value: Any) -> str:
    """A str, or bytes as the settings decode them: what a credential could hide in."""
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return value if isinstance(value, str) else ""


def _shown(value: Any) -> Any:
    """JSON for what json cannot write: a secret masked, a callable by name, sets as lists."""
    if is_secret_value(value):
        return MASK
    if callable(value):
        return f"<callable {getattr(value, '__qualname__', type(value).__name__)}>"
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    return str(value)
