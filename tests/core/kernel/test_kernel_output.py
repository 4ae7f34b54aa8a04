"""Output bounding and folding, and traceback cleaning (pure functions, no kernel)."""

from __future__ import annotations

import base64

from ipybox_core.errors import CodeError
from ipybox_core.kernel import (
    ClearOutput,
    DisplayData,
    ExecutionError,
    ExecutionFinished,
    KernelEvent,
    OutputCollector,
    OutputTruncated,
    StreamText,
)
from ipybox_core.kernel._stream_limit import StreamLimiter
from ipybox_core.kernel._text import HeadTailText, strip_ansi
from ipybox_core.kernel._traceback import clean_traceback, hidden_path_prefixes


def test_head_tail_keeps_both_ends_and_counts_the_middle() -> None:
    buffer = HeadTailText(10)
    for chunk in ["abc", "defgh", "ijklmnop", "qrstuvwxyz"]:
        buffer.append(chunk)
    assert buffer.omitted == 26 - 10
    assert buffer.render() == "abcde\n[... 16 characters omitted ...]\nvwxyz"


def test_head_tail_is_exact_below_the_limit() -> None:
    buffer = HeadTailText(10)
    buffer.append("0123456789")
    assert buffer.render() == "0123456789"
    assert buffer.omitted == 0


def test_stream_limiter_streams_the_head_live_and_the_tail_at_the_end() -> None:
    limiter = StreamLimiter(10)
    live = [limiter.feed("stdout", c) for c in ["0123", "4567", "89AB", "CDEFGHIJ"]]
    assert [e.text for e in live if e is not None] == ["0123", "4567", "89"]
    assert limiter.feed("stderr", "KLM") is None
    # held back: "AB" + "CDEFGHIJ" + "KLM"; the last 5 characters are kept
    assert limiter.finish() == [
        OutputTruncated(omitted_chars=8),
        StreamText("stdout", "IJ"),
        StreamText("stderr", "KLM"),
    ]


def test_stream_limiter_merges_held_back_chunks_of_one_stream() -> None:
    limiter = StreamLimiter(4)
    for _ in range(100):
        limiter.feed("stdout", "ab")
    end = limiter.finish()
    assert end == [OutputTruncated(omitted_chars=200 - 4 - 2), StreamText("stdout", "ab")]


def test_collector_folds_events_in_order() -> None:
    png = base64.b64encode(b"\x89PNG fake").decode()
    collector = OutputCollector(limit=1000)
    events: list[KernelEvent] = [
        StreamText("stdout", "hello\r\n"),
        StreamText("stderr", "\x1b[31mwarn\x1b[0m\n"),
        DisplayData({"text/plain": "<Figure>", "image/png": png}),
        DisplayData({"text/plain": "fallback", "text/markdown": "# Title"}),
        DisplayData({"text/plain": "42"}, is_result=True),
        ExecutionError("ValueError", "bad", "Traceback...\nValueError: bad"),
        ExecutionFinished(status="error", execution_count=7, duration=0.1),
    ]
    for event in events:
        collector.add(event)
    output = collector.output()
    assert output.text == "hello\nwarn\n# Title\n42\n"
    assert output.images == (b"\x89PNG fake",)
    assert len(output.displays) == 3
    assert output.result is not None and output.result.text == "42"
    assert isinstance(output.error, CodeError)
    assert (output.error.ename, output.error.evalue) == ("ValueError", "bad")
    assert (output.status, output.execution_count) == ("error", 7)


def test_collector_respects_its_limit_and_the_kernels_truncation() -> None:
    collector = OutputCollector(limit=10)
    collector.add(StreamText("stdout", "0123456789"))
    collector.add(OutputTruncated(1000))
    collector.add(StreamText("stdout", "abcde"))
    output = collector.output()
    assert output.text == "01234\n[... 1,005 characters omitted ...]\nabcde"
    assert output.omitted_chars == 1005


def test_collector_clear_output_and_display_updates() -> None:
    collector = OutputCollector()
    collector.add(StreamText("stdout", "progress 1\n"))
    collector.add(DisplayData({"text/plain": "v1"}, display_id="d"))
    collector.add(DisplayData({"text/plain": "v2"}, display_id="d", is_update=True))
    assert [d.text for d in collector.output().displays] == ["v2"]
    collector.add(ClearOutput())
    collector.add(StreamText("stdout", "done\n"))
    assert collector.output().text == "done\n"
    assert collector.output().displays == ()


def test_traceback_cleaning_hides_internal_frames_and_ansi(tmp_path) -> None:  # type: ignore[no-untyped-def]
    internal = tmp_path / "pkg"
    prefixes = hidden_path_prefixes([internal], home=str(tmp_path))
    entries = [
        "\x1b[31m---------------------------------------------------------------------------\x1b[39m",
        "\x1b[31mToolError\x1b[39m                                 Traceback (most recent call last)",
        "\x1b[36mCell\x1b[39m In[3], line 1\n----> 1 add(a=1)\n",
        f"File {internal}/runtime.py:10, in call_tool(server)\n---> 10 raise ToolError()\n",
        "File ~/pkg/runtime.py:20, in _raise()\n---> 20 raise\n",
        "    [... skipping hidden 1 frame]\n",
        "ToolError: the server said no",
    ]
    text = clean_traceback(entries, prefixes)
    assert text == (
        "ToolError                                 Traceback (most recent call last)\n"
        "Cell In[3], line 1\n----> 1 add(a=1)\n\nToolError: the server said no"
    )
    assert strip_ansi(text) == text
