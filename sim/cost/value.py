"""The base of the cost model's value classes (StepPrice, StepCost, Work, DensePrice, AttentionCost,
Bilinear)."""
from __future__ import annotations

from typing import ClassVar


class Value:
    """A plain class that compares, hashes and prints by the fields it names (``_fields``), for
    the values made per step priced: compiled, its subclasses' constructors are native, a
    NamedTuple's or dataclass's run Python code (sim/README.md, "Speed")."""

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()

    def astuple(self) -> tuple:
        """The fields' values, in ``_fields`` order."""
        return tuple([getattr(self, name) for name in self._fields])

    def asdict(self) -> dict:
        """Field name -> value, in ``_fields`` order."""
        return dict(zip(self._fields, self.astuple()))

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and isinstance(other, Value) and self.astuple() == other.astuple()

    def __hash__(self) -> int:
        return hash(self.astuple())

    def __repr__(self) -> str:
        return f"{type(self).__name__}(" + ", ".join(
            f"{name}={value!r}" for name, value in zip(self._fields, self.astuple())) + ")"
