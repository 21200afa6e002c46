"""Server-sent events, read as the WHATWG spec says, and `/v1/answer`'s events made typed.

`EventParser` is pure and incremental: feed it text as it arrives (any split, a CRLF cut in
two included) and it returns the complete events. Lines are split by `_http.LineSplitter`:
at CRLF, LF or CR only — not at the other characters `str.splitlines` breaks on (U+2028 may
sit raw inside JSON data);
``:`` lines are comments (keep-alives); ``data`` lines join with LF; a blank line dispatches;
an event without data, and a last event that no blank line ended, are dropped.

`AnswerEvents` turns ``retrieved`` / ``delta`` / ``done`` into `RemoteAnswerEvent`s, raises
`ServerError` for ``error`` and for a stream that ends before ``done``, and skips event names
it does not know (a newer server may send more).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .._errors import ServerError
from .._http import LineSplitter
from ._results import RemoteAnswer, RemoteAnswerEvent, RemoteResult

MIDSTREAM_STATUS = 502  # what /v1/answer answers for the same failure without streaming


@dataclass(frozen=True, slots=True)
class Event:
    name: str
    data: str
    id: str | None = None


class EventParser:
    def __init__(self) -> None:
        self._lines = LineSplitter()
        self._name = ""
        self._data: list[str] = []
        self._last_id: str | None = None

    def feed(self, text: str) -> list[Event]:
        return self._events(self._lines.feed(text))

    def close(self) -> list[Event]:
        """The end of the stream: a lone CR left over still ends its line; an event that no
        blank line ended is dropped."""
        events = self._events(self._lines.close())
        self._name, self._data = "", []
        return events

    def _events(self, lines: list[str]) -> list[Event]:
        return [event for line in lines if (event := self._line(line)) is not None]

    def _line(self, line: str) -> Event | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._name = value
        elif name == "data":
            self._data.append(value)
        elif name == "id" and "\0" not in value:
            self._last_id = value
        return None  # "retry" and unknown fields are ignored, as the spec says

    def _dispatch(self) -> Event | None:
        name, data = self._name or "message", self._data
        self._name, self._data = "", []
        if not data:
            return None
        return Event(name, "\n".join(data), self._last_id)


class AnswerEvents:
    """`/v1/answer`'s stream, event by event; `finish()` at its end."""

    def __init__(self) -> None:
        self.parser = EventParser()
        self.done = False

    def feed(self, text: str) -> list[RemoteAnswerEvent]:
        return [found for event in self.parser.feed(text) if (found := self._typed(event))]

    def finish(self) -> list[RemoteAnswerEvent]:
        found = [typed for event in self.parser.close() if (typed := self._typed(event))]
        if not self.done:
            raise ServerError("the answer stream ended before its done event (the server or a "
                              "proxy cut it)", status=0, type="incomplete_stream")
        return found

    def _typed(self, event: Event) -> RemoteAnswerEvent | None:
        if self.done or event.name not in ("retrieved", "delta", "done", "error"):
            return None
        data = _json(event)
        if event.name == "error":
            raise _stream_error(data)
        if event.name == "retrieved":
            return RemoteAnswerEvent("retrieved", result=RemoteResult.from_dict(data))
        if event.name == "delta":
            return RemoteAnswerEvent("delta", text=str(data.get("text", "")))
        self.done = True
        return RemoteAnswerEvent("done", answer=RemoteAnswer.from_dict(data))


def _json(event: Event) -> dict[str, Any]:
    try:
        data = json.loads(event.data)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise ServerError(f"the server's {event.name!r} event is not a JSON object: {event.data[:200]!r}",
                          status=0, type="bad_event")
    return data


def _stream_error(data: dict[str, Any]) -> ServerError:
    error = data.get("error")
    error = error if isinstance(error, dict) else {}
    message = error.get("message") or "the server sent an error event"
    return ServerError(f"the answer failed mid-stream: {message}", status=MIDSTREAM_STATUS,
                       type=str(error.get("type", "")), field=error.get("field"),
                       request_id=str(data.get("request_id", "")), body=data)
