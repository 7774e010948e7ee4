"""Lenient reading of tool arguments sent by a model.

Models are sloppy in predictable ways: integers arrive as strings (``"5"``) or floats
(``5.0``), flags as ``"true"``, optional arguments arrive as ``null`` or ``""``, and
extra arguments appear that the schema never declared. Each of those is accepted here;
anything that cannot be read raises ArgumentError with one sentence saying what to send
instead. The JSON Schema the tools advertise stays strict (it documents what to send);
this module is what is accepted.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any


class ArgumentError(ValueError):
    """A tool argument is missing or unusable; the message is shown to the model as is."""


class Arguments:
    """The arguments of one tool call, read one by one, remembering which were used."""

    def __init__(self, raw: Mapping[str, Any] | None, known: Iterable[str]) -> None:
        if raw is not None and not isinstance(raw, Mapping):
            raise ArgumentError("Arguments must be a JSON object of named values.")
        self._raw: Mapping[str, Any] = raw or {}
        self._known = frozenset(known)
        self.notes: list[str] = []
        """Short remarks for the model about what was adjusted (clamped, ignored)."""
        unknown = sorted(k for k in self._raw if k not in self._known)
        if unknown:
            # Accepted, not rejected: failing a whole call over a stray argument costs the
            # model a round trip, while a note tells it what to drop next time.
            names = ", ".join(unknown)
            self.notes.append(
                f"Ignored unknown argument(s): {names} "
                f"(this tool takes: {', '.join(sorted(self._known)) or 'no arguments'})."
            )

    def _value(self, name: str) -> Any:
        value = self._raw.get(name)
        if isinstance(value, str) and not value.strip():
            return None
        return value

    def string(
        self, name: str, *, required: bool = False, max_length: int = 4096, strip: bool = True
    ) -> str | None:
        """``strip=False`` keeps the value as sent (a grep pattern's spaces are part of it);
        only the empty string then counts as missing."""
        value = self._value(name) if strip else self._raw.get(name)
        if value is None or value == "":
            if required:
                raise ArgumentError(
                    f"The argument '{name}' is required and must be a non-empty string."
                )
            return None
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ArgumentError(f"The argument '{name}' must be a string, not {_json_kind(value)}.")
        text = str(value).strip() if strip else str(value)
        if len(text) > max_length:
            raise ArgumentError(
                f"The argument '{name}' is too long ({len(text)} characters; at most {max_length})."
            )
        return text

    def text(self, name: str, *, required: bool = False) -> str | None:
        """A string exactly as sent, the empty string included: a note's content, the
        text an edit puts in (empty deletes), or ``if_match=""`` (must not exist yet).
        Its size is bounded by what one request can carry, not here."""
        value = self._raw.get(name)
        if value is None:
            if required:
                raise ArgumentError(f"The argument '{name}' is required and must be a string.")
            return None
        if not isinstance(value, str):
            raise ArgumentError(f"The argument '{name}' must be a string, not {_json_kind(value)}.")
        return value

    def boolean(self, name: str, *, default: bool) -> bool:
        """Read a flag; ``"true"``, ``"false"``, ``1`` and ``0`` count too."""
        value = self._value(name)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        if isinstance(value, int | float) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in _FLAGS:
            return _FLAGS[value.strip().lower()]
        raise ArgumentError(f"The argument '{name}' must be true or false; got {value!r}.")

    def integer(
        self,
        name: str,
        *,
        default: int | None,
        minimum: int,
        maximum: int | None = None,
        clamp_high: bool = False,
        clamp_low: bool = False,
    ) -> int | None:
        """Read an integer; ``"5"`` and ``5.0`` count as 5.

        Out of bounds, either clamp (with a note) or refuse. A count below its minimum is
        refused by default (a zero or negative limit is a misunderstanding, not an
        overshoot); a start position below it just means "from the start".
        """
        value = self._value(name)
        if value is None:
            return default
        number = _to_int(value)
        bounds = f"from {minimum} to {maximum}" if maximum is not None else f"of at least {minimum}"
        if number is None:
            raise ArgumentError(
                f"The argument '{name}' must be an integer {bounds}; got {value!r}."
            )
        if number < minimum and clamp_low:
            self.notes.append(f"{name}={number} is below {minimum}; used {minimum}.")
            number = minimum
        if number < minimum:
            raise ArgumentError(f"The argument '{name}' must be an integer {bounds}; got {number}.")
        if maximum is not None and number > maximum:
            if not clamp_high:
                raise ArgumentError(
                    f"The argument '{name}' must be an integer {bounds}; got {number}."
                )
            self.notes.append(f"{name}={number} is above the maximum; used {maximum}.")
            number = maximum
        return number


_FLAGS = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}


def _to_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and value.is_integer() else None
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            pass
        try:
            number = float(text)
        except ValueError:
            return None
        return int(number) if math.isfinite(number) and number.is_integer() else None
    return None


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "an array"
    return type(value).__name__
