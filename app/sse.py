"""An event of a thread's log as its Server-Sent-Events frame.

sse_starlette frames a dict by splitting each field on a line-break regex, a cost paid
for every event of every stream (bench/service_load.py shows it). An event's payload is
JSON from `stores.events.encode`, which never holds a raw line break, so its frame is
three lines joined; the rare text that does break falls back to sse_starlette's
framing. The bytes are the same either way.
"""

from sse_starlette import ServerSentEvent

from stores.events import Event

SEPARATOR = "\r\n"  # sse_starlette's default, which the responses keep


def sse_frame(event: Event) -> bytes:
    """The frame of `event` (id, event name, data), as EventSourceResponse would write it."""
    text = event.text
    if "\n" in text or "\r" in text or "\n" in event.name or "\r" in event.name:
        return ServerSentEvent(text, event=event.name, id=str(event.id), sep=SEPARATOR).encode()
    return f"id: {event.id}\r\nevent: {event.name}\r\ndata: {text}\r\n\r\n".encode()
