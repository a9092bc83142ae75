"""The failures the service reports on purpose; `app.errors` maps each to an HTTP answer.

ResearchError
├── NotFound            unknown thread, or another key's thread        404 not_found
├── InvalidState        resume a run that is not paused or waiting    409 invalid_state
│   └── LimitReached    a collection, or a key's collections, is full  409 limit_reached
├── Unprocessable       a Platform run's input that is no topic       422 validation_error
│   └── UnreadableDocument  an upload that cannot be read             422 unreadable_document
├── UnsupportedDocument an upload that is no PDF, .docx or text       415 unsupported_media_type
├── DocumentTooLarge    an uploaded file over the size limit          413 payload_too_large
├── NotAcceptable       a report format not offered, or not installed  406 not_acceptable
├── TooManyRuns         the run queue is full                         429 too_many_runs
├── TooManyStreams      as many event streams open as served          503 too_many_streams
├── Unauthorized        a missing or unknown API key                  401 unauthorized
└── BackendUnavailable  checkpointer or event log unreachable         503 backend_unavailable
"""

from typing import Any


class ResearchError(Exception):
    """Base for failures we expect; the message is safe to show and says what to do."""

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}


class NotFound(ResearchError):
    """No such thread for this caller."""


class InvalidState(ResearchError):
    """The thread is not in a state that allows this call."""


class Unprocessable(ResearchError):
    """A well-formed request the service cannot act on (a run input that is no topic)."""


class NotAcceptable(ResearchError):
    """No format the caller accepts can be made here (`details["offered"]` lists those that can)."""


class TooManyRuns(ResearchError):
    """The queue of runs is full."""


class TooManyStreams(ResearchError):
    """As many event streams are open as the service serves at once."""


class Unauthorized(ResearchError):
    """No valid API key."""


class BackendUnavailable(ResearchError):
    """A store the service needs is unreachable."""


class UnreadableDocument(Unprocessable):
    """An uploaded file that cannot be read: malformed, encrypted, empty, a zip bomb."""


class UnsupportedDocument(ResearchError):
    """An uploaded file whose content is no format the service reads."""


class DocumentTooLarge(ResearchError):
    """An uploaded file over the size limit."""


class LimitReached(InvalidState):
    """A collection holds as many documents as allowed, or a key as many collections."""
