"""What the schema's types say, sent as the schema says (issue 27, item 7): integers as JSON integers,
string formats as Python types, no lax coercion. Calls go through the real tool server."""

from __future__ import annotations

import base64
import datetime as dt
import enum
import inspect
import json
import re
import uuid
import warnings
from typing import Any

import pytest
from codegen_kit import (
    Generator,
    Outcome,
    ThreadedToolServer,
    generate_fixture,
    one,
    sent,
    served_fixture,
    tool,
)
from pydantic import ValidationError

served = served_fixture()
generate = generate_fixture()

UTC = dt.UTC
SCHEDULE = tool(
    "schedule",
    {
        "when": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"},
        "ident": {"type": "string", "format": "uuid"},
        "site": {"type": "string", "format": "uri"},
    },
    required=["when"],
)


class _Index:
    """An integer that is not an int (as numpy's are): ``operator.index`` reads it."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


def _wire(served: ThreadedToolServer, fn: Any, **kwargs: Any) -> str:
    """The arguments as JSON text, as the tool server received them."""
    return json.dumps(sent(served, fn, **kwargs), sort_keys=True)


def test_integers_arrive_as_json_integers(generate: Generator, served: ThreadedToolServer) -> None:
    fn = one(generate, tool("f", {"count": {"type": "integer"}, "factor": {"type": "number"}}))
    assert _wire(served, fn, count=3.0, factor=5) == '{"count": 3, "factor": 5}'  # was 5.0
    assert _wire(served, fn, factor=2.0) == '{"factor": 2}'  # integer-valued: sent as an integer
    assert _wire(served, fn, factor=2.5) == '{"factor": 2.5}'
    big = 2**53 + 1  # not a double: sent exactly, not as the nearest float
    assert sent(served, fn, factor=big, count=big) == {"factor": big, "count": big}
    assert sent(served, fn, factor=-(10**400)) == {"factor": -(10**400)}


def test_number_bounds_hold_for_ints_and_floats(generate: Generator, served: ThreadedToolServer) -> None:
    fn = one(
        generate, tool("f", {"price": {"type": "number", "minimum": 0, "maximum": 10, "multipleOf": 0.01}})
    )
    assert _wire(served, fn, price=7) == '{"price": 7}'
    assert _wire(served, fn, price=0.07) == '{"price": 0.07}'
    for wrong in (11, 10.5, -1, 10**400, 0.005):
        with pytest.raises(ValidationError):
            fn(price=wrong)


def test_no_lax_coercion(generate: Generator, served: ThreadedToolServer) -> None:
    fn = one(
        generate,
        tool(
            "f",
            {
                "dry_run": {"type": "boolean"},
                "count": {"type": "integer"},
                "factor": {"type": "number"},
                "level": {"enum": [1, 2, 3]},
                "on": {"const": True},
            },
        ),
    )
    before = len(served.backend.calls)
    for kwargs in (
        {"dry_run": "yes"},
        {"dry_run": 1},
        {"dry_run": "true"},
        {"count": True},
        {"count": "3"},
        {"count": 2.5},
        {"factor": True},
        {"factor": "1.5"},
        {"level": True},
        {"on": 1},
    ):
        with pytest.raises(ValidationError):
            fn(**kwargs)
    assert len(served.backend.calls) == before  # nothing was sent
    with pytest.raises(ValidationError, match="not the bool True"):
        fn(count=True)
    # valid inputs stay valid: an int for a number, an integral float for an integer, numpy-like ints
    assert sent(served, fn, dry_run=False, count=_Index(4), factor=3, level=2.0, on=True) == {
        "dry_run": False,
        "count": 4,
        "factor": 3,
        "level": 2,
        "on": True,
    }


def test_formats_become_python_types_sent_as_strings(generate: Generator, served: ThreadedToolServer) -> None:
    fn = one(generate, SCHEDULE)
    signature = str(inspect.signature(fn))
    assert "when: datetime" in signature and "day: date | None" in signature
    assert "ident: UUID | None" in signature and "site: str | None" in signature
    ident = uuid.UUID("12345678-1234-5678-1234-567812345678")
    when = dt.datetime(2026, 12, 3, 14, 30, tzinfo=UTC)
    assert sent(served, fn, when=when, day=dt.date(2026, 12, 4), ident=ident) == {
        "when": "2026-12-03T14:30:00Z",
        "day": "2026-12-04",
        "ident": "12345678-1234-5678-1234-567812345678",
    }
    plus_one = dt.datetime(2026, 12, 3, 14, 30, 0, 500000, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert sent(served, fn, when=plus_one)["when"] == "2026-12-03T14:30:00.500000+01:00"
    assert sent(served, fn, when="2026-12-03T14:30:00+01:00", day="2026-12-04", ident=str(ident).upper()) == {
        "when": "2026-12-03T14:30:00+01:00",
        "day": "2026-12-04",
        "ident": "12345678-1234-5678-1234-567812345678",
    }


def test_an_integer_beside_a_uuid_in_a_union_is_sent_as_an_integer(
    generate: Generator, served: ThreadedToolServer
) -> None:
    # Found by test_codegen_properties: the UUID's serializer turned the union's int 0 into "0".
    items = {"anyOf": [{"type": "string", "format": "uuid"}, {"type": "integer"}]}
    fn = one(generate, tool("f", {"ids": {"type": "array", "items": items}}))
    assert sent(served, fn, ids=[0, uuid.UUID(int=5)]) == {"ids": [0, str(uuid.UUID(int=5))]}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"when": "tomorrow"}, "'tomorrow' is not a date-time"),
        ({"when": "2026-12-03T14:30:00"}, "needs a UTC offset"),
        ({"when": dt.datetime(2026, 12, 3)}, "needs a UTC offset"),
        ({"when": "2026-13-03T14:30:00Z"}, "is not a date-time"),
        ({"when": 1764772200}, "expected a date-time"),
        ({"when": "2026-12-03T14:30:00Z", "day": "2026-02-30"}, "is not a date"),
        ({"when": "2026-12-03T14:30:00Z", "day": dt.datetime(2026, 2, 3, tzinfo=UTC)}, "value.date()"),
        ({"when": "2026-12-03T14:30:00Z", "ident": "not-a-uuid"}, "is not a UUID"),
        ({"when": "2026-12-03T14:30:00Z", "ident": 5}, "expected a UUID"),
    ],
)
def test_an_invalid_format_is_refused_before_anything_is_sent(
    generate: Generator, served: ThreadedToolServer, kwargs: dict[str, Any], message: str
) -> None:
    fn = one(generate, SCHEDULE)
    before = len(served.backend.calls)
    with pytest.raises(ValidationError, match=re.escape(message)):
        fn(**kwargs)
    assert len(served.backend.calls) == before


def test_formats_in_results_and_models(generate: Generator, served: ThreadedToolServer) -> None:
    output = {
        "type": "object",
        "title": "Job",
        "properties": {
            "at": {"type": "string", "format": "date-time"},
            "id": {"type": "string", "format": "uuid"},
            "runs": {"type": "array", "items": {"type": "string", "format": "date"}},
            "score": {"type": "number"},
        },
    }
    imported = generate("srv", [tool("job", output_schema=output)])
    served.backend.reply = Outcome(
        structured={
            "at": "2026-12-03T14:30:00Z",
            "id": str(uuid.UUID(int=7)),
            "runs": ["2026-01-02"],
            "score": 3,
        }
    )
    job = imported.module.job()
    assert job.at == dt.datetime(2026, 12, 3, 14, 30, tzinfo=UTC)
    assert job.id == uuid.UUID(int=7) and job.runs == [dt.date(2026, 1, 2)]
    assert job.score == 3 and isinstance(job.score, int)  # a number the server sent as 3 stays 3
    assert json.loads(str(job))["at"] == "2026-12-03T14:30:00Z"
    assert (
        "class Job: at: datetime | None = None; id: UUID | None = None" in imported.package.models["Job"].line
    )
    # a server that writes a date-time without offset in its own result: kept as text, no warning
    served.backend.reply = Outcome(structured={"at": "2026-12-03 14:30", "id": "x", "runs": []})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lenient = imported.module.job()
    assert lenient.at == "2026-12-03 14:30" and lenient.id == "x"


def test_a_model_argument_checks_its_fields_strictly(generate: Generator, served: ThreadedToolServer) -> None:
    item = {
        "type": "object",
        "properties": {"due": {"type": "string", "format": "date"}, "done": {"type": "boolean"}},
    }
    fn = one(generate, tool("add", {"item": item}, required=["item"]))
    with pytest.raises(ValidationError):
        fn(item={"due": "soon"})
    with pytest.raises(ValidationError):
        fn(item={"done": "no"})
    assert sent(served, fn, item={"due": dt.date(2026, 1, 2), "done": True}) == {
        "item": {"due": "2026-01-02", "done": True}
    }


class _Colour(enum.StrEnum):
    RED = "red"


_TEXTS = tool(
    "texts",
    {
        "name": {"type": "string"},
        "code": {"type": "string", "maxLength": 4, "pattern": "^[a-z]+$"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "owner": {"type": "object", "title": "Owner", "properties": {"login": {"type": "string"}}},
        "image": {"type": "string", "contentEncoding": "base64", "maxLength": 12},
    },
)


def test_bytes_are_not_taken_for_a_string(generate: Generator, served: ThreadedToolServer) -> None:
    """pydantic's lax default decoded ``b'...'`` as UTF-8 text; a string takes a str only."""
    fn = one(generate, _TEXTS)
    before = len(served.backend.calls)
    for kwargs in (
        {"name": b"ann"},
        {"name": bytearray(b"ann")},
        {"code": b"abc"},
        {"tags": ["a", b"b"]},
        {"labels": {"k": b"v"}},
        {"owner": {"login": b"ann"}},
    ):
        with pytest.raises(ValidationError, match="expected a string, not byte"):
            fn(**kwargs)
    for raw in (b"\x89PNG\r\n", b"not base64!"):  # raw data is not encoded silently
        with pytest.raises(ValidationError, match=r"not base64: pass base64\.b64encode"):
            fn(image=raw)
    with pytest.raises(ValidationError, match="at most 4 characters"):  # the bounds still read as a str's
        fn(code="abcde")
    with pytest.raises(ValidationError, match="at most 12 characters"):
        fn(image=base64.b64encode(b"0123456789"))
    assert len(served.backend.calls) == before  # nothing was sent
    # what was valid stays valid: str subclasses (a str Enum), and base64 text as bytes or str
    assert sent(
        served, fn, name=_Colour.RED, code="abc", tags=["a"], labels={"k": "v"}, owner={"login": "x"}
    ) == {
        "name": "red",
        "code": "abc",
        "tags": ["a"],
        "labels": {"k": "v"},
        "owner": {"login": "x"},
    }
    assert sent(served, fn, image=base64.b64encode(b"\x89PNG")) == {"image": "iVBORw=="}
    assert sent(served, fn, image="iVBORw==") == {"image": "iVBORw=="}
    signature = str(inspect.signature(fn))
    assert "image: str | None = None" in signature and "name: str | None = None" in signature
