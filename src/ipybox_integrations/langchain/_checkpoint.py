"""The one place ipybox reads LangGraph's internals: what a tool call's checkpoint holds of its interrupts.

A tool call that interrupted is re-run from the top on every resume; what it asked and what it was
answered is on the checkpoint, in private config keys and write channels (LangGraph has no public
API for it). Each reader here is defensive; ``test_langgraph_internals.py`` guards them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import langgraph.types
from langgraph.config import get_config
from langgraph.types import Interrupt

# LangGraph's private config keys and write channel (langgraph/_internal/_constants.py), read defensively.
_SCRATCHPAD_KEY = "__pregel_scratchpad"
_CHECKPOINTER_KEY = "__pregel_checkpointer"
_TASK_ID_KEY = "__pregel_task_id"
_NAMESPACE_KEY = "checkpoint_ns"
_RESUME_CHANNEL = "__resume__"
_INTERRUPT_CHANNEL = "__interrupt__"

_MISSING = object()


def interrupts_available() -> bool:
    """True inside a LangGraph task whose graph has a checkpointer: ``interrupt()`` can pause and resume."""
    try:
        configurable = get_config().get("configurable", {})
    except RuntimeError:
        return False
    return _SCRATCHPAD_KEY in configurable and configurable.get(_CHECKPOINTER_KEY) is not None


def withhold_consumed_answer() -> bool:
    """Keep an answer this tool call already consumed from answering its next question; True if one was.

    A plain ``Command(resume=...)`` is stored on the checkpoint and stays there after this call took
    it, so a later run that brings no answer of its own (``ainvoke(None)``, or an id-keyed resume for
    an earlier question) would hand it to the next ``interrupt()`` as if the human had answered it
    (langgraph#8837). A run's own plain answer is added after everything loaded from the checkpoint,
    so an answer stored *before* this call's record of the answers it consumed is an old one: it is
    consumed here, in memory only, and ``interrupt()`` asks the human again.
    """
    configurable = get_config().get("configurable", {})
    scratchpad = configurable.get(_SCRATCHPAD_KEY)
    peek = getattr(scratchpad, "get_null_resume", None)
    cells = _closure_of(peek)
    writes, answer = cells.get("pending_writes"), cells.get("null_resume_write")
    if not isinstance(writes, list) or answer is None or scratchpad is None:
        return False
    at = next((index for index, write in enumerate(writes) if write is answer), None)
    task_id = configurable.get(_TASK_ID_KEY)
    consumed = [
        index
        for index, write in enumerate(writes)
        if isinstance(write, tuple) and write[:2] == (task_id, _RESUME_CHANNEL)
    ]
    if at is None or not consumed or at > max(consumed):
        return False
    scratchpad.get_null_resume(True)
    return True


def _closure_of(function: object) -> dict[str, object]:
    code = getattr(function, "__code__", None)
    cells = getattr(function, "__closure__", None) or ()
    if code is None:
        return {}
    values: dict[str, object] = {}
    for name, cell in zip(code.co_freevars, cells, strict=False):
        try:
            values[name] = cell.cell_contents
        except ValueError:  # an empty cell
            continue
    return values


def _task_writes(channel: str) -> list[object]:
    """The values this task wrote to ``channel`` that the checkpoint holds (from an earlier run)."""
    configurable = get_config().get("configurable", {})
    scratchpad = configurable.get(_SCRATCHPAD_KEY)
    writes = _closure_of(getattr(scratchpad, "get_null_resume", None)).get("pending_writes")
    task_id = configurable.get(_TASK_ID_KEY)
    if not isinstance(writes, list) or task_id is None:
        return []
    return [
        write[2]
        for write in writes
        if isinstance(write, tuple) and len(write) == 3 and write[:2] == (task_id, channel)
    ]


def _stored_answers() -> list[object]:
    """The answers this tool call consumed in earlier runs (as saved on the checkpoint)."""
    for value in _task_writes(_RESUME_CHANNEL):
        return list(value) if isinstance(value, list) else [value]
    return []


def shown_before() -> Interrupt | None:
    """The last interrupt this tool call raised (saved on the checkpoint), or ``None``."""
    for value in _task_writes(_INTERRUPT_CHANNEL):
        interrupts = value if isinstance(value, (list, tuple)) else [value]
        for item in interrupts:
            return item if isinstance(item, Interrupt) else None
    return None


def answers_when_asked(shown: Interrupt | None) -> int:
    """How many of this tool call's own questions were answered when it raised ``shown``.

    LangGraph derives an interrupt's id from the task's namespace and the answers the task had
    (``langgraph.types._interrupt_id``), so the id tells the index of ``shown`` exactly (the stored
    answers can also hold an id-keyed answer given for ``shown`` in this run); the interrupts the
    task raised before this call's body ran (a HITL ``per_call`` gate on ``execute_code``) are
    not its own.
    """
    scratchpad = get_config().get("configurable", {}).get(_SCRATCHPAD_KEY)
    answers = list(getattr(scratchpad, "resume", None) or [])
    index = _index_of(shown, len(answers))
    if index is None:
        index = len(_stored_answers())
    others = _interrupts_before()
    if others is None:  # the answers before this call's first own one are another's
        before = answers[:index]
        others = next((at for at, value in enumerate(before) if is_own_answer(value)), len(before))
    return index - others


def _interrupts_before() -> int | None:
    """How many interrupts this task raised before this tool call's body ran (a HITL ``per_call``
    gate on ``execute_code``): the next value of LangGraph's interrupt counter; ``None`` if unknown."""
    scratchpad = get_config().get("configurable", {}).get(_SCRATCHPAD_KEY)
    counter = getattr(getattr(scratchpad, "interrupt_counter", None), "_counter", _MISSING)
    if counter is None:  # not called yet in this run
        return 0
    found = re.fullmatch(r"count\((\d+)\)", repr(getattr(counter, "__self__", None)))
    return int(found.group(1)) if found else None


def _index_of(shown: Interrupt | None, most: int) -> int | None:
    make_id = getattr(langgraph.types, "_interrupt_id", None)
    if shown is None or not callable(make_id):
        return None
    namespace = get_config().get("configurable", {}).get(_NAMESPACE_KEY, "")
    return next((count for count in range(most + 1) if make_id(namespace, count) == shown.id), None)


def is_own_answer(value: object) -> bool:
    """True for an answer shaped like this tool's (a ``HITLResponse``, one ``per_call`` decision, or
    the answer to an MCP server's question)."""
    return isinstance(value, Mapping) and ("decisions" in value or "type" in value or "action" in value)


def answered_before() -> bool:
    """True when LangGraph holds answers for this tool call's approval questions: it was suspended before.

    Looks at the answers stored for this task and at a pending plain ``Command(resume=...)`` value.
    """
    scratchpad = get_config().get("configurable", {}).get(_SCRATCHPAD_KEY)
    values = list(getattr(scratchpad, "resume", None) or [])
    peek = getattr(scratchpad, "get_null_resume", None)
    if callable(peek):
        values.append(peek(False))
    return any(is_own_answer(value) for value in values)
