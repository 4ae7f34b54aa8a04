"""The one place ipybox reads LangGraph internals (``_checkpoint.py``) still matches the installed LangGraph.

``interrupts_available``, ``answered_before``, ``answers_when_asked`` and ``withhold_consumed_answer``
read private config keys, the scratchpad's ``resume`` / ``get_null_resume``, the names
``get_null_resume`` closes over and how ``langgraph.types._interrupt_id`` numbers a task's interrupts. If a LangGraph release renames them, this test fails naming what
changed; pyproject.toml pins the LangGraph range these tests ran against.
"""

from __future__ import annotations

from typing import Any, TypedDict

import langgraph.types
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from ipybox_integrations.langchain import _checkpoint


class State(TypedDict):
    seen: dict[str, Any]


def _probe(state: State) -> State:
    configurable = get_config().get("configurable", {})
    scratchpad = configurable.get(_checkpoint._SCRATCHPAD_KEY)
    return {
        "seen": {
            "scratchpad": scratchpad is not None,
            "resume": isinstance(getattr(scratchpad, "resume", None), list),
            "get_null_resume": callable(getattr(scratchpad, "get_null_resume", None)),
            "checkpointer": configurable.get(_checkpoint._CHECKPOINTER_KEY) is not None,
            "task_id": isinstance(configurable.get(_checkpoint._TASK_ID_KEY), str),
            "closure": sorted(_checkpoint._closure_of(getattr(scratchpad, "get_null_resume", None))),
            "interrupts_available": _checkpoint.interrupts_available(),
            "answered_before": _checkpoint.answered_before(),
        }
    }


def _graph_with(checkpointer: InMemorySaver | None) -> Any:
    builder = StateGraph(State)
    builder.add_node("probe", _probe)
    builder.add_edge(START, "probe")
    builder.add_edge("probe", END)
    return builder.compile(checkpointer=checkpointer)


async def test_the_private_config_keys_ipybox_reads_are_still_there() -> None:
    out = await _graph_with(InMemorySaver()).ainvoke({"seen": {}}, {"configurable": {"thread_id": "t"}})
    assert out["seen"] == {
        "scratchpad": True,
        "resume": True,
        "get_null_resume": True,
        "checkpointer": True,
        "task_id": True,
        "closure": ["null_resume_write", "parent_scratchpad", "pending_writes"],
        "interrupts_available": True,
        "answered_before": False,
    }, "LangGraph changed the internals read in ipybox_integrations/langchain/_checkpoint.py"


async def test_without_a_checkpointer_interrupts_are_not_available() -> None:
    out = await _graph_with(None).ainvoke({"seen": {}})
    assert out["seen"]["scratchpad"] and not out["seen"]["interrupts_available"]
    assert not _checkpoint.interrupts_available()  # outside any graph


class Asked(TypedDict):
    answers: list[Any]


def _asks_twice(state: Asked) -> Asked:
    first = interrupt("first")
    counted = _checkpoint._interrupts_before()  # read off LangGraph's interrupt counter
    return {"answers": [first, counted, interrupt("second")]}


async def test_an_interrupts_id_still_tells_how_many_answers_its_task_had() -> None:
    # _answers_when_asked decodes the index of a pending question from its interrupt id.
    builder = StateGraph(Asked)
    builder.add_node("ask", _asks_twice)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    graph = builder.compile(checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "ids"}}
    first = (await graph.ainvoke({"answers": []}, thread, version="v2")).interrupts[0]
    second = (await graph.ainvoke(Command(resume=1), thread, version="v2")).interrupts[0]
    (task,) = (await graph.aget_state(thread)).tasks
    namespace = f"ask:{task.id}"  # the task's config[_checkpoint._NAMESPACE_KEY]
    make_id = langgraph.types._interrupt_id
    assert (make_id(namespace, 0), make_id(namespace, 1)) == (first.id, second.id)
    out = await graph.ainvoke(Command(resume=2), thread)
    assert out["answers"] == [1, 1, 2]  # one interrupt had been raised before the counter was read


def test_the_resume_channel_name_is_langgraphs() -> None:
    from langgraph._internal._constants import CONFIG_KEY_CHECKPOINT_NS, CONFIG_KEY_TASK_ID, RESUME

    assert (_checkpoint._RESUME_CHANNEL, _checkpoint._TASK_ID_KEY) == (RESUME, CONFIG_KEY_TASK_ID)
    assert _checkpoint._NAMESPACE_KEY == CONFIG_KEY_CHECKPOINT_NS
