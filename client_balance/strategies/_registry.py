"""Where strategy names lead: the built-ins, registered rules, references and entry points.

:func:`get_strategy` resolves a name in this order:

1. a rule given to :func:`register_strategy` in this process (it may replace a built-in);
2. a built-in strategy (``range``, ``modulo``, ...);
3. a ``module:attr`` reference, imported and cached: a process that never registered anything
   (a Spark worker, another node) finds the rule by the name alone;
4. an entry point of the group ``client_balance.strategies`` of an installed distribution,
   loaded the first time it is asked for.

Every member of a group must resolve the name to the same rule, or their shares overlap and
leave gaps: a reference or an entry point names the rule the same way in every process, while a
registration holds only in the process that made it.
"""

from __future__ import annotations

import importlib
import re
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

from client_balance._logging import get_logger
from client_balance.errors import ConfigError
from client_balance.strategies._base import Strategy
from client_balance.strategies._modulo import HashStrategy, ModuloStrategy
from client_balance.strategies._range import RangeStrategy
from client_balance.strategies._roundrobin import RoundRobinStrategy
from client_balance.strategies._sticky import CooperativeStickyStrategy, StickyStrategy
from client_balance.strategies._user import as_strategy

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = [
    "BUILTIN_NAMES",
    "ENTRY_POINT_GROUP",
    "adopt_strategies",
    "get_strategy",
    "is_reference",
    "reference_of",
    "register_strategy",
    "registered_strategies",
    "strategy_names",
    "unregister_strategy",
]

ENTRY_POINT_GROUP = "client_balance.strategies"
"""The entry-point group whose entries (name = strategy name) are looked up by name."""

_BUILTINS: dict[str, Strategy] = {
    strategy.name: strategy
    for strategy in (
        CooperativeStickyStrategy(),
        HashStrategy(),
        ModuloStrategy(),
        RangeStrategy(),
        RoundRobinStrategy(),
        StickyStrategy(),
    )
}
BUILTIN_NAMES = tuple(sorted(_BUILTINS))
"""The names of the strategies that come with the package."""

_DOTTED = r"[^\W\d]\w*(?:\.[^\W\d]\w*)*"
_REFERENCE = re.compile(rf"({_DOTTED}):({_DOTTED})")

_log = get_logger("strategies")
_lock = threading.Lock()
_registered: dict[str, Strategy] = {}
_references: dict[str, Strategy] = {}
_declared: dict[str, EntryPoint] | None = None
_loaded: dict[str, Strategy] = {}


def is_reference(name: str) -> bool:
    """Whether ``name`` is a ``module:attr`` reference such as ``"mypkg.rules:by_topic"``."""
    return _REFERENCE.fullmatch(name) is not None


def _entry_points() -> dict[str, EntryPoint]:
    """The group's entry points by name, read once; names that cannot be used are skipped."""
    global _declared  # noqa: PLW0603 - read once per process, on first use
    with _lock:
        if _declared is None:
            # Imported here: importlib.metadata brings email, zipfile and csv, 3,000 objects that
            # every full collection of the process walks, for a lookup most processes never make.
            from importlib.metadata import entry_points  # noqa: PLC0415 - see above

            found: dict[str, EntryPoint] = {}
            for entry in entry_points(group=ENTRY_POINT_GROUP):
                if entry.name in _BUILTINS or ":" in entry.name:
                    # A plugin must not change what a built-in name means behind the user.
                    _log.warning(
                        "strategy entry point ignored", strategy=entry.name, value=entry.value
                    )
                elif entry.name not in found:
                    found[entry.name] = entry
            _declared = found
        return _declared


def strategy_names() -> tuple[str, ...]:
    """Every name :func:`get_strategy` lists, sorted: built-ins, registered, entry points.

    ``module:attr`` references resolve too, but are not listed.
    """
    return tuple(sorted({*_BUILTINS, *_registered, *_entry_points()}))


def _unknown(name: object) -> ConfigError:
    return ConfigError(
        f"unknown strategy {name!r}; valid names: {', '.join(strategy_names())}. A rule of "
        "your own is found by register_strategy(name, rule) in the same process, by a "
        f"'module:attr' reference, or by an entry point of the group {ENTRY_POINT_GROUP!r}"
    )


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not name or name != name.strip():
        raise ConfigError(
            f"strategy name {name!r} is not allowed; use a non-empty string without surrounding "
            "spaces"
        )
    if ":" in name:
        raise ConfigError(
            f"strategy name {name!r} is not allowed: a name with ':' is a 'module:attr' "
            "reference, which needs no registration"
        )
    return name


def register_strategy(name: str, rule: object, *, replace: bool = False) -> Strategy:
    """Make ``rule`` the strategy ``name`` in this process, and return it.

    ``rule`` is a function ``rule(partitions, members) -> {member id: partitions}``, or an
    object with the :class:`Strategy` ``assign`` (a class is made with no arguments). It gets
    its input in one order and its answers are checked (see :class:`UserStrategy`). A name that
    is taken (built-in, registered, or an entry point's) raises :class:`ConfigError` unless
    ``replace``. Other processes find the rule only if they register it too: give them a
    ``module:attr`` reference or an entry point instead.
    """
    _check_name(name)
    strategy = as_strategy(name, rule)
    taken = name in _BUILTINS or name in _registered or name in _entry_points()
    if taken and not replace:
        raise ConfigError(
            f"strategy name {name!r} is taken; pass replace=True to replace it (in this process "
            f"only), or pick another name. Taken: {', '.join(strategy_names())}"
        )
    with _lock:
        _registered[name] = strategy
    return strategy


def unregister_strategy(name: str) -> None:
    """Forget the rule registered as ``name``; a built-in it replaced is back.

    A name that nobody registered raises :class:`ConfigError`.
    """
    with _lock:
        if _registered.pop(name, None) is None:
            raise ConfigError(
                f"strategy {name!r} is not registered here; registered: "
                f"{', '.join(sorted(_registered)) or 'none'}"
            )


def registered_strategies() -> dict[str, Strategy]:
    """The rules registered in this process (to hand them to another one, as Spark's do)."""
    with _lock:
        return dict(_registered)


def adopt_strategies(strategies: Mapping[str, Strategy]) -> None:
    """Register rules another process registered (a Spark worker adopts the driver's)."""
    with _lock:
        _registered.update(strategies)


def _unfound(name: str, why: str) -> ConfigError:
    return ConfigError(
        f"strategy {name!r} cannot be loaded: {why}; a strategy named by a reference or an entry "
        "point must be importable in every process that uses it"
    )


def _import_reference(name: str) -> Strategy:
    module_name, attribute = name.split(":")
    try:
        found: object = importlib.import_module(module_name)
    except ImportError as error:
        why = f"module {module_name!r} cannot be imported ({type(error).__name__}: {error})"
        raise _unfound(name, why) from error
    except Exception as error:  # only the type, as for entry points
        why = f"importing module {module_name!r} raised {type(error).__name__}"
        raise _unfound(name, why) from error
    for part in attribute.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            why = f"module {module_name!r} has no attribute {attribute!r}"
            raise _unfound(name, why) from None
    return as_strategy(name, found)


def _from_entry_point(name: str) -> Strategy | None:
    entry = _entry_points().get(name)
    if entry is None:
        return None
    try:
        found = entry.load()
    except (ImportError, AttributeError) as error:
        why = f"its entry point {entry.value!r} failed ({type(error).__name__}: {error})"
        raise _unfound(name, why) from error
    except Exception as error:
        # Only the type: the message of an arbitrary error in someone's import may say anything.
        why = f"its entry point {entry.value!r} raised {type(error).__name__}"
        raise _unfound(name, why) from error
    return as_strategy(name, found)


def get_strategy(name: str) -> Strategy:
    """The strategy ``name`` leads to (see the module's docstring for the order).

    An unknown name raises :class:`ConfigError` listing the valid names and how to add one.
    """
    if not isinstance(name, str):
        raise _unknown(name)
    found = _registered.get(name) or _BUILTINS.get(name) or _references.get(name)
    if found is None:
        found = _loaded.get(name)
    if found is not None:
        return found
    if is_reference(name):
        strategy: Strategy | None = _import_reference(name)
        cache = _references
    else:
        strategy = _from_entry_point(name)
        cache = _loaded
    if strategy is None:
        raise _unknown(name)
    with _lock:
        # Two threads may import at once; both get the first one cached, so a name means one
        # object in this process.
        return cache.setdefault(name, strategy)


def reference_of(strategy: Strategy) -> str | None:
    """A name that finds ``strategy``'s rule in a fresh process, or None if there is none.

    Built-ins, references and entry points are found by their name; a registered function
    defined at the top level of an importable module by ``module:qualname``. A registered
    object is not: its class could be made again, but not with the arguments it was made with.
    """
    name = strategy.name
    if strategy is _BUILTINS.get(name) or is_reference(name) or name in _entry_points():
        return name
    rule = getattr(strategy, "rule", None)
    if not callable(rule) or hasattr(rule, "assign"):
        return None
    module, qualname = getattr(rule, "__module__", None), getattr(rule, "__qualname__", "")
    if not module or module == "__main__" or "<" in qualname:
        return None
    reference = f"{module}:{qualname}"
    try:
        again = _import_reference(reference)
    except ConfigError:
        return None
    return reference if getattr(again, "rule", None) is rule else None
