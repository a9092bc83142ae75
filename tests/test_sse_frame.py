"""Our SSE frames are the bytes sse_starlette writes for the same event."""

from datetime import UTC, datetime

import pytest
from sse_starlette.event import ensure_bytes

from app.sse import SEPARATOR, sse_frame
from stores.events import Event, encode


def _event(name: str, text: str, event_id: int = 7) -> Event:
    return Event(event_id, "thread", name, text, datetime.now(UTC))


@pytest.mark.parametrize(
    "payload",
    [
        {"node": "writer", "tokens": "a line\nand the next\r\nwith \u2028 and \u00e9"},
        {"empty": ""},
        [["messages", {"content": "x" * 5000}]],
    ],
)
def test_a_json_payload_frames_as_sse_starlette_frames_it(payload: object) -> None:
    event = _event("progress", encode(payload))
    expected = ensure_bytes({"id": "7", "event": "progress", "data": event.text}, SEPARATOR)
    assert sse_frame(event) == expected


def test_a_text_with_line_breaks_is_split_into_data_lines() -> None:
    event = _event("note", "one\ntwo\r\nthree")
    framed = sse_frame(event)
    assert framed == ensure_bytes({"id": "7", "event": "note", "data": event.text}, SEPARATOR)
    assert framed.count(b"data: ") == 3
