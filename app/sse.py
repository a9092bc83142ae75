"""Server-Sent Events: a log event as its frame (three lines joined, as sse_starlette writes them), and the response."""

from collections.abc import AsyncIterator, Mapping

from sse_starlette import EventSourceResponse, ServerSentEvent

from app.edge import StreamSlots
from stores.events import Event

HEARTBEAT_S = 15
SEPARATOR = "\r\n"  # sse_starlette's default, which the responses keep


def sse_frame(event: Event) -> bytes:
    """Return the frame of `event` (id, event name, data), as EventSourceResponse writes it."""
    text = event.text
    if "\n" in text or "\r" in text or "\n" in event.name or "\r" in event.name:
        return ServerSentEvent(text, event=event.name, id=str(event.id), sep=SEPARATOR).encode()
    return f"id: {event.id}\r\nevent: {event.name}\r\ndata: {text}\r\n\r\n".encode()


def event_stream(
    streams: StreamSlots, frames: AsyncIterator[bytes], headers: Mapping[str, str] | None = None
) -> EventSourceResponse:
    """Return `frames` as an SSE response, counted as an open stream (TooManyStreams past the cap)."""
    streams.check()
    return EventSourceResponse(streams.counted(frames), ping=HEARTBEAT_S, headers=headers)
