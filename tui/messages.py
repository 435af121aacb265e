"""Messages the workers post back to the app: small dataclasses, no widgets inside."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message


@dataclass
class Progress(Message):
    """A background job moved on: `text` for the status line; `done` when it finished."""

    job: str
    text: str
    done: bool = False
    fraction: float | None = None

    def can_replace(self, message: Message) -> bool:
        # Textual asks this of the message it is about to handle, with the next one waiting:
        # a newer state of the same job supersedes this one, so only the latest is drawn.
        return isinstance(message, Progress) and message.job == self.job


@dataclass
class CaptureLoaded(Message):
    session: Any  # tui.session.CaptureSession
    seconds: float
    reload: bool = False  # new records of a capture being written
    final: bool = True  # False: more of the capture is still being indexed


@dataclass
class CaptureFailed(Message):
    path: str
    error: str


@dataclass
class FindingsReady(Message):
    findings: list
    badges: dict
    notes: list
    not_run: list
    seconds: float
    error: str | None = None


@dataclass
class ViewReady(Message):
    """Content for one view, computed in a worker for the place it was asked for."""

    view: str  # code | pass-diff | rank-diff | symbols | devices
    place: Any
    payload: Any
    extra: Any = None
    error: str | None = None
    request: int = 0
