"""Read-only JSON values for frozen results (SPEC 7.1).

A frozen dataclass only stops its attributes being set; a dict it holds can still be
changed, and then ``to_json()`` no longer says what the attributes say. ``freeze`` turns
a JSON value into ``FrozenDict`` and ``FrozenList``: a ``dict`` and a ``list`` still (so
``==``, ``isinstance``, ``orjson`` and ``jsonschema`` see what they saw), that refuse
every change, hash by content, and copy (``copy.deepcopy``, ``dict()``) into ordinary,
changeable values.
"""

from __future__ import annotations

import copy
from typing import Any, NoReturn


def _refuse(self: object, *args: object, **kwargs: object) -> NoReturn:
    raise TypeError(f"{type(self).__name__} is read-only (a result is frozen); copy it first")


class FrozenDict(dict[str, Any]):
    """A ``dict`` that cannot be changed."""

    __setitem__ = __delitem__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse
    __ior__ = _refuse

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return {k: copy.deepcopy(v, memo) for k, v in self.items()}

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))


class FrozenList(list[Any]):
    """A ``list`` that cannot be changed."""

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = clear = extend = insert = pop = remove = reverse = sort = _refuse

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self))

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [copy.deepcopy(v, memo) for v in self]

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self),))


def freeze(value: Any) -> Any:
    """``value`` with every dict and list (and tuple) in it read-only, recursively."""
    if isinstance(value, FrozenDict | FrozenList):
        return value
    if isinstance(value, dict):
        return FrozenDict({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return FrozenList(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """An ordinary, changeable copy of ``value`` (plain dicts and lists)."""
    return copy.deepcopy(value)
