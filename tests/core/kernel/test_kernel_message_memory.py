"""A kernel message costs the host at most a bound in proportion to the output limit, known before
it is parsed, on both kernel backends.

JSON parses into objects of up to ~30 times its bytes, so a message within the size limit could
still cost the host hundreds of MiB (one at the old 25 MB frame limit: +651 MiB). The host bounds
the parse from the message's bytes first (:mod:`ipybox_core.kernel._json_cost`) and reports a
message over the bound as an omitted display. The attack is real kernel code sending a raw message
through its own session, as hostile code would; the host runs in a subprocess whose peak resident
set is measured through /proc. The control runs the same attack with every message parsed whole.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc
from typing import Any

import pytest

from ipybox_core.inkernel._bootstrap import display_budget
from ipybox_core.kernel._json_cost import parse_fits, parsed_size_bound
from ipybox_core.kernel._stream_limit import max_iopub_frame_bytes, max_parsed_message_bytes

MiB = 1024 * 1024
OUTPUT_LIMIT = 100_000  # the default
FRAME_LIMIT = max_iopub_frame_bytes(OUTPUT_LIMIT)  # ~25 MB: the largest message an honest kernel sends
PARSE_LIMIT = max_parsed_message_bytes(FRAME_LIMIT)


# --- the rule, without a kernel -------------------------------------------------------------------


def _rows(item: bytes, size: int, separator: bytes = b", ") -> bytes:
    return b"[" + separator.join([item] * (size // (len(item) + len(separator)))) + b"]"


def _peak_of_parsing(raw: bytes) -> int:
    tracemalloc.start()
    try:
        json.loads(raw)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


COSTLY = {  # shapes that cost the most per byte, ~22-35x
    "empty dicts": _rows(b"{}", MiB, b","),
    "dicts of one dict": _rows(b'{"a":{}}', MiB, b","),
    "nested lists": _rows(b"[[[0]]]", MiB, b","),
    "lists of a dict": _rows(b"[{}]", MiB, b","),
    "distinct keys": b"[" + b",".join(b'{"k%d":1}' % i for i in range(MiB // 12)) + b"]",
    "short strings": _rows(b'"ab"', MiB, b","),
    "wide text": b'["\xf0\x9f\x98\x80' + b"a" * MiB + b'"]',
    "numbers": _rows(b"300", MiB, b","),
}


@pytest.mark.parametrize("shape", list(COSTLY))
def test_the_bound_is_above_what_parsing_takes(shape: str) -> None:
    raw = COSTLY[shape]
    peak = _peak_of_parsing(raw)
    assert parsed_size_bound(raw) >= peak and not parse_fits(raw, peak)


def test_honest_displays_within_the_display_budget_are_parsed() -> None:
    budget = display_budget(OUTPUT_LIMIT)
    image = b'{"data": {"image/png": "' + b"A" * budget + b'", "text/plain": "<Figure>"}, "metadata": {}}'
    chart = (
        b'{"data": {"application/vnd.plotly.v1+json": {"data": [{"y": '
        + _rows(b"0.123456789", budget)
        + b"}]}}}"
    )
    table = b'{"data": {"application/json": ' + _rows(b'{"x": 1, "y": 2}', budget * 2 // 5) + b"}}"
    for content in (image, chart, table):
        assert parse_fits(content, PARSE_LIMIT)
    # ... but not the costliest shapes at the frame limit: the old limit alone let them be parsed
    hostile = b'{"data": {"application/json": ' + _rows(b'{"a": {}}', FRAME_LIMIT - 64) + b"}}"
    assert len(hostile) < FRAME_LIMIT and not parse_fits(hostile, PARSE_LIMIT)


# --- a real kernel ----------------------------------------------------------------------------------

_HOST = r"""
import asyncio, ctypes, json, sys
from ipybox_core.kernel import Kernel, KernelConfig
from ipybox_core.kernel.gateway import GatewayConfig, GatewayKernel

backend, mode, shape, size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if mode == "whole":  # the weakened host: every message parsed, whatever it may cost
    import ipybox_core.kernel._channels as channels
    import ipybox_core.kernel.gateway._websocket as websocket
    channels.parse_fits = websocket.parse_fits = lambda raw, limit: True
if mode == "old-size":  # the gateway client's size limit as it was: 256 MiB whatever the output limit
    import ipybox_core.kernel.gateway._websocket as websocket
    websocket.max_iopub_frame_bytes = lambda output_limit: 256 * 1024 * 1024

def memory():
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/status") as status:
        return {l.split(":")[0]: int(l.split()[1]) * 1024 for l in status if l.startswith(("VmRSS", "VmHWM"))}

# Hostile code: one display message through the kernel's own session, bypassing its output cap;
# its JSON is about `size` bytes of {"a": {}} (a list of one dict: the kernel's own cost stays
# small), or of plain text.
DATA = f'[{{"a": {{}}}}] * ({size} // 11)' if shape == "rows" else f'"A" * {size}'
SEND = f'''
ip = get_ipython()
pub = ip.display_pub
data = {DATA}
pub.session.send(pub.pub_socket, "display_data", {{"data": {{"application/json": data}}, "metadata": {{}}}},
    parent=pub.parent_header, ident=pub.topic)
del data
print("sent")
'''

async def main():
    config = KernelConfig(output_limit=int(sys.argv[5]))
    if backend == "gateway":
        kernel = GatewayKernel(GatewayConfig(url=sys.argv[6], token=sys.argv[7]), config)
    else:
        kernel = Kernel(config)
    async with kernel:
        await kernel.run("x = 42")
        before = memory()
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")  # the peak resident set starts again from here
        try:
            output = await kernel.run(SEND)
            text, omitted = output.text, output.omitted_displays
        except Exception as exc:
            text, omitted = f"{type(exc).__name__}: {exc}", None
        after = memory()
        state = await kernel.run("print(x)")
        print(json.dumps({"peak_growth": after["VmHWM"] - before["VmRSS"], "text": text[-600:],
                          "omitted": omitted, "state": state.text.strip()}))

asyncio.run(main())
"""


def _attack(
    request: pytest.FixtureRequest, backend: str, mode: str, size: int, shape: str = "rows"
) -> dict[str, Any]:
    argv = [sys.executable, "-c", _HOST, backend, mode, shape, str(size), str(OUTPUT_LIMIT)]
    if backend == "gateway":
        gateway = request.getfixturevalue("kernel_gateway")
        argv += [gateway.url, gateway.token]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("backend", ["local", "gateway"])
def test_a_message_too_costly_to_parse_is_reported_not_parsed(
    request: pytest.FixtureRequest, backend: str
) -> None:
    size = FRAME_LIMIT - MiB  # within the size limit (with the gateway's envelope): only its cost is over
    bound = 5 * size  # the message's bytes, a copy of them and the counting (~30x when parsed)

    result = _attack(request, backend, "bounded", size)
    assert result["peak_growth"] < bound, f"the host grew by {result['peak_growth'] >> 20} MiB"
    assert "sent" in result["text"] and result["omitted"] == 1, result
    assert "[... 1 display omitted (" in result["text"], result["text"]
    assert result["state"] == "42"  # the kernel and its state are still there

    # Control: parsing the same message whole costs more than the bound, by far.
    whole = _attack(request, backend, "whole", size)
    assert whole["peak_growth"] > 3 * bound, (
        f"the whole parse grew the host by only {whole['peak_growth'] >> 20} MiB"
    )


def test_a_gateway_message_over_the_size_limit_ends_the_execution_not_the_kernel(
    request: pytest.FixtureRequest,
) -> None:
    """websockets refuses a message over ``max_size`` unread (the size limit, not the gateway's
    256 MiB default); the execution says why, the next one reconnects to the same kernel."""
    result = _attack(request, "gateway", "bounded", FRAME_LIMIT + MiB, shape="text")
    assert result["omitted"] is None and result["text"].startswith("KernelDied: "), result
    assert f"the kernel sent a message over {FRAME_LIMIT} bytes" in result["text"]
    assert result["state"] == "42"
    assert result["peak_growth"] < 4 * FRAME_LIMIT, f"the host grew by {result['peak_growth'] >> 20} MiB"

    # Control: with the old size limit the same message is read and parsed (its text then cut).
    accepted = _attack(request, "gateway", "old-size", FRAME_LIMIT + MiB, shape="text")
    assert "sent" in accepted["text"] and accepted["omitted"] == 1, accepted
