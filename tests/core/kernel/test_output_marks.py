"""OutputMarks: a request waits for its mark, whether the mark was read before or after it asked."""

from __future__ import annotations

import asyncio

from ipybox_core.kernel._marks import OutputMarks, mark_of
from ipybox_core.runtime import OUTPUT_MARK_MSG


async def test_a_mark_read_before_the_wait_returns_at_once() -> None:
    marks = OutputMarks()
    marks.begin()
    marks.seen("m1")
    assert await marks.wait("m1", timeout=5)


async def test_a_wait_ends_when_its_mark_is_read() -> None:
    marks = OutputMarks()
    marks.begin()
    waiting = asyncio.ensure_future(marks.wait("m2", timeout=30))
    await asyncio.sleep(0)
    assert not waiting.done()
    marks.seen("m2")
    assert await waiting


async def test_the_end_of_the_execution_releases_waiters_and_later_waits() -> None:
    marks = OutputMarks()
    marks.begin()
    waiting = asyncio.ensure_future(marks.wait("never", timeout=30))
    await asyncio.sleep(0)
    marks.end()
    assert not await waiting
    assert not await marks.wait("other", timeout=30)


def test_only_well_formed_mark_messages_count() -> None:
    assert mark_of({"msg_type": OUTPUT_MARK_MSG, "content": {"mark": "abc"}}) == "abc"
    assert mark_of({"msg_type": OUTPUT_MARK_MSG, "content": {"mark": "x" * 65}}) is None
    assert mark_of({"msg_type": OUTPUT_MARK_MSG, "content": "abc"}) is None
    assert mark_of({"msg_type": "display_data", "content": {"mark": "abc"}}) is None
