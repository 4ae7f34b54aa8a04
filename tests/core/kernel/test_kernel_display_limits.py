"""Rich display data counts against the output limit: in the kernel (honest code never ships huge
displays) and on the host (hostile code that bypasses the kernel's cap costs the host nothing lasting).

The attack runs in a subprocess whose memory is measured through /proc; small PNGs displayed before
the flood and in the next execution are the control: they arrive intact.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from _backends import BACKENDS, make_kernel

from ipybox_core.inkernel._bootstrap import (
    DISPLAY_OMITTED_MIME,
    TRUNCATION_MIME,
    display_budget,
    fit_display,
)
from ipybox_core.kernel import (
    ClearOutput,
    DisplayData,
    Kernel,
    KernelConfig,
    KernelEvent,
    OutputCollector,
    StreamText,
)
from ipybox_core.kernel._base import KernelBase
from ipybox_core.kernel._iopub import output_events
from ipybox_core.kernel._stream_limit import DisplayBudget, StreamLimiter, max_iopub_frame_bytes
from ipybox_core.kernel.events import DisplayOmitted

LIMIT = 1000
BUDGET = display_budget(LIMIT)
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 100  # 25 KB: a small plot


def _png_b64(size: int) -> str:
    return "A" * size


# --- the rule, without a kernel -------------------------------------------------------------------


def test_fit_display_keeps_whole_displays_then_the_smallest_parts() -> None:
    data = {"text/plain": "<Figure>", "image/png": _png_b64(500), "text/html": "x" * 5000}
    kept, metadata, used, dropped, size = fit_display(data, {"image/png": {"width": 3}}, 10_000)
    assert kept == data and metadata == {"image/png": {"width": 3}} and not dropped and size == 0
    kept, metadata, used, dropped, size = fit_display(data, {"image/png": {"width": 3}}, 1000)
    assert list(kept) == ["text/plain", "image/png"] and dropped == ["text/html"]
    assert used <= 1000 and size >= 5000
    assert metadata == {"image/png": {"width": 3}}
    kept, metadata, used, dropped, size = fit_display(data, None, 5)
    assert kept == {} and used == 0 and sorted(dropped) == sorted(data)


def test_stream_budget_drops_what_does_not_fit_and_says_so() -> None:
    limiter = StreamLimiter(LIMIT)
    small = {"data": {"text/plain": "<Figure>", "image/png": base64.b64encode(PNG).decode()}}
    huge = {"data": {"text/plain": "<big>", "image/png": _png_b64(BUDGET)}}
    events: list[KernelEvent] = []
    for content in (small, huge, huge, small):
        events += output_events(
            "display_data", content, limiter, timed_out=False, hidden_prefixes=(), text_limit=LIMIT
        )
    displays = [e for e in events if isinstance(e, DisplayData)]
    omissions = [e for e in events if isinstance(e, DisplayOmitted)]
    assert [d.png for d in displays] == [PNG, None, None, PNG]  # the huge images lost their PNG
    assert [d.text for d in displays] == ["<Figure>", "<big>", "<big>", "<Figure>"]
    assert omissions == [DisplayOmitted(trimmed=1, size=BUDGET + 11, mime_types=("image/png",))] * 2
    forwarded = sum(len(v) for d in displays for v in d.data.values())
    assert forwarded <= BUDGET


def test_hostile_markers_and_malformed_display_messages_do_not_raise() -> None:
    limiter = StreamLimiter(LIMIT)
    contents: list[dict[str, object]] = [
        {"data": {TRUNCATION_MIME: {"omitted_chars": "x" * 10_000}}},
        {"data": {DISPLAY_OMITTED_MIME: {"displays": "9" * 5000, "mime_types": ["a" * 10**6] * 1000}}},
        {"data": [1, 2], "metadata": "nope", "transient": [3]},
        {"data": {"text/plain": "ok"}, "transient": {"display_id": {"nested": "x" * 10**6}}},
        {"data": {"application/json": [[[[{"k": "v" * 100}]]]] * 50_000}},
    ]
    events: list[KernelEvent] = []
    for content in contents:
        events += output_events(
            "display_data", content, limiter, timed_out=False, hidden_prefixes=(), text_limit=LIMIT
        )
    marker = next(e for e in events if isinstance(e, DisplayOmitted))
    assert marker.displays == 0 and len(marker.mime_types) <= 16
    assert all(len(name) <= 100 for name in marker.mime_types)
    display = next(e for e in events if isinstance(e, DisplayData) and e.text == "ok")
    assert display.display_id is None
    json_omitted = [e for e in events if isinstance(e, DisplayOmitted) and e.mime_types]
    assert json_omitted[-1].mime_types == ("application/json",)


def test_collector_bounds_kept_displays_whatever_events_it_gets() -> None:
    collector = OutputCollector(LIMIT)
    collector.add(DisplayData({"text/plain": "<Figure>", "image/png": base64.b64encode(PNG).decode()}))
    third = BUDGET // 12 * 4  # valid base64 length
    for _ in range(20):  # events that did not pass a stream budget
        collector.add(DisplayData({"text/plain": "<big>", "image/png": _png_b64(third)}))
    output = collector.output()
    kept = sum(len(v) for d in output.displays for v in d.data.values())
    assert kept <= BUDGET
    assert output.images[0] == PNG and len(output.images) == 3  # the first two huge ones fit
    assert output.omitted_displays == 18
    assert output.text.endswith(
        f"[... parts of 18 displays omitted ({18 * (third + 2 + 9):,} characters of image/png): "
        "over the output limit ...]\n"
    )
    # updates give back the size of what they replace; clear_output frees everything
    collector = OutputCollector(LIMIT)
    for _ in range(50):
        collector.add(DisplayData({"image/png": _png_b64(BUDGET // 2)}, display_id="p", is_update=True))
    assert collector.output().omitted_displays == 0 and len(collector.output().displays) == 1
    collector.add(ClearOutput())
    collector.add(StreamText("stdout", "after\n"))
    assert collector.output().text == "after\n"


def test_the_frame_limit_for_the_iopub_socket_admits_every_honest_message() -> None:
    assert max_iopub_frame_bytes(LIMIT) >= 6 * (BUDGET + LIMIT)
    assert max_iopub_frame_bytes(100_000) < 32_000_000


# --- a real kernel --------------------------------------------------------------------------------

pytestmark_async = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=BACKENDS)
async def kernel(request: pytest.FixtureRequest) -> AsyncIterator[KernelBase]:
    async with make_kernel(request, request.param, KernelConfig(output_limit=LIMIT)) as started:
        yield started


async def _events(kernel: Kernel, code: str) -> list[KernelEvent]:
    return [event async for event in kernel.execute(code)]


@pytestmark_async
async def test_honest_displays_beyond_the_budget_never_leave_the_kernel(
    kernel: Kernel, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The host's own budget is switched off: what arrives is what the kernel sent.
    monkeypatch.setattr(DisplayBudget, "admit", lambda self, display: [display])
    code = textwrap.dedent(
        f"""
        from IPython.display import display, Image, HTML
        display(Image(data=bytes.fromhex({PNG.hex()!r}), format="png"))
        for i in range(3):
            display(Image(data=b"\\x89PNG" + b"x" * {BUDGET // 2}, format="png"))
        display(HTML("<b>" + "y" * {2 * BUDGET} + "</b>"))
        b"z" * {BUDGET}
        """
    )
    events = await _events(kernel, code)
    displays = [e for e in events if isinstance(e, DisplayData)]
    sent = sum(len(v) for d in displays for v in d.data.values() if isinstance(v, str))
    assert sent <= BUDGET
    assert displays[0].png == PNG
    omissions = [e for e in events if isinstance(e, DisplayOmitted)]
    # one big image fits, two more keep only their text; long text keeps its head and tail
    assert sum(o.trimmed for o in omissions) == 2 and sum(o.displays for o in omissions) == 0
    assert {m for o in omissions for m in o.mime_types} == {"image/png"}
    assert [d.png is not None for d in displays] == [True, True, False, False, False, False]
    html, result = displays[4].data["text/html"], displays[5]
    assert len(html) <= LIMIT and html.startswith("<b>yyy") and html.endswith("yyy</b>")
    assert result.is_result and len(result.data["text/plain"]) <= LIMIT
    assert "characters omitted ...]" in result.data["text/plain"]


@pytestmark_async
async def test_a_plot_after_a_flood_in_the_next_execution_arrives_intact(kernel: Kernel) -> None:
    flood = await kernel.run(
        f"from IPython.display import display\n"
        f"display({{'image/png': 'A' * {BUDGET - 2 * LIMIT}}}, raw=True)\n"
        f"display({{'image/png': 'A' * {2 * BUDGET}, 'text/plain': 'y' * {10 * LIMIT}}}, raw=True)"
    )
    # the first image uses up the budget; of the second display only its text is left, head and tail
    assert flood.omitted_displays == 1 and len(flood.images) == 1
    assert flood.text.startswith("y" * 400) and "characters omitted ...]" in flood.text
    assert flood.text.endswith(
        f"parts of 1 display omitted ({2 * BUDGET + 2 + 9:,} characters of image/png): over the output limit ...]\n"
    )
    # the budget is per execution
    show = f"from IPython.display import display, Image\ndisplay(Image(data=bytes.fromhex({PNG.hex()!r}), format='png'))"
    output = await kernel.run(show)
    assert output.images == (PNG,) and output.omitted_displays == 0


# --- hostile code: raw messages that bypass the kernel's cap ---------------------------------------

_ATTACK = r"""
import asyncio, gc, json, sys
from ipybox_core.kernel import DisplayData, Kernel, KernelConfig, OutputCollector

COUNT, SIZE, LIMIT, PNG_HEX = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]

def memory_kb():
    with open("/proc/self/status") as status:
        return {l.split(":")[0]: int(l.split()[1]) for l in status if l.startswith(("VmRSS", "VmHWM"))}

SHOW_PNG = "from IPython.display import display, Image\n" \
    f"display(Image(data=bytes.fromhex({PNG_HEX!r}), format='png'))\n"
FLOOD = f'''
ip = get_ipython()
pub = ip.display_pub
blob = "A" * {SIZE}
for i in range({COUNT}):
    pub.session.send(pub.pub_socket, "display_data",
        {{"data": {{"image/png": blob, "text/plain": "raw %d" % i}}, "metadata": {{}}, "transient": {{}}}},
        parent=pub.parent_header, ident=pub.topic)
del blob
print("sent")
'''

async def main():
    async with Kernel(KernelConfig(output_limit=LIMIT)) as kernel:
        await kernel.run("1")
        gc.collect()
        before = memory_kb()
        collector = OutputCollector(LIMIT)
        forwarded = 0
        async for event in kernel.execute(SHOW_PNG + FLOOD):
            collector.add(event)
            if isinstance(event, DisplayData):
                forwarded += sum(len(v) for v in event.data.values() if isinstance(v, str))
        output = collector.output()
        gc.collect()
        after = memory_kb()  # the collected output is still alive here
        second = await kernel.run(SHOW_PNG)
        print(json.dumps({
            "kept_growth_mb": (after["VmRSS"] - before["VmRSS"]) / 1024,
            "peak_growth_mb": (after["VmHWM"] - before["VmRSS"]) / 1024,
            "forwarded": forwarded,
            "text": output.text[-500:],
            "omitted_displays": getattr(output, "omitted_displays", None),
            "first_png": output.images[:1] == (bytes.fromhex(PNG_HEX),),
            "images": len(output.images),
            "second_png": second.images == (bytes.fromhex(PNG_HEX),),
        }))

asyncio.run(main())
"""


def test_raw_displays_that_bypass_the_kernel_cap_cost_the_host_nothing_lasting() -> None:
    count, size, limit = 12, 40_000_000, 100_000  # 480 MB of "PNG" (mmap-sized: freed at once)
    done = subprocess.run(
        [sys.executable, "-c", _ATTACK, str(count), str(size), str(limit), PNG.hex()],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    # Control: the small plot before the flood and the one in the next execution arrive intact.
    assert result["first_png"] and result["images"] == 1
    assert result["second_png"]
    # The flood was dropped: the events carried at most the budget, the host keeps ~nothing of it.
    assert result["forwarded"] <= display_budget(limit)
    assert result["omitted_displays"] == count
    # each message is over the largest frame an honest kernel sends: dropped unparsed at the channel
    assert f"[... {count} displays omitted (" in result["text"], result["text"]
    assert "sent" in result["text"]
    assert result["kept_growth_mb"] < 150, result
