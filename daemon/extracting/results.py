"""What a worker answers for one document: its text, or why there is none."""

from __future__ import annotations

from typing import Final

import msgspec


class Reason:
    """Why a document gave no text (stable strings, shown to users as skip reasons)."""

    ENCRYPTED: Final = "encrypted"
    DAMAGED: Final = "damaged"
    NO_TEXT: Final = "no_text"
    OVER_LIMIT: Final = "over_limit"
    CRASHED: Final = "extractor_crashed"


class Extracted(msgspec.Struct, frozen=True):
    text: str
    """Pages after the first begin with a form feed at the start of a line."""
    title: str = ""


class Failed(msgspec.Struct, frozen=True):
    reason: str
    detail: str


class Request(msgspec.Struct, frozen=True):
    """What comes before a document's bytes: they follow raw, ``size`` of them (not
    inside the msgpack, which would copy a document of many MB once more)."""

    kind: str
    max_chars: int
    size: int


Outcome = Extracted | Failed


class Reply(msgspec.Struct, frozen=True):
    extracted: Extracted | None = None
    failed: Failed | None = None

    @staticmethod
    def of(outcome: Outcome) -> Reply:
        if isinstance(outcome, Extracted):
            return Reply(extracted=outcome)
        return Reply(failed=outcome)

    @property
    def outcome(self) -> Outcome:
        if self.extracted is not None:
            return self.extracted
        return self.failed or Failed(Reason.CRASHED, "an empty answer")


class TooMuchText(Exception):
    """A reader produced more than the output cap."""
