"""The FastAPI + ipybox serve recipe (docs/recipes/fastapi.md) runs as written.

Its three files are copied into a fresh folder under the names the page gives them, and the page's
own ``ipybox serve`` and ``uvicorn`` command lines are run there (real processes: the service, and
uvicorn with two workers), with two changes: free ports, and the model (``recipe_app.py`` swaps
``chat_model()`` for a scripted model that runs the user's message as code). The test then drives
``/chat``, ``/threads/{id}/pending`` and ``/approve`` over HTTP.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from docs_kit import DOCS, ROOT, fenced_blocks

pytestmark = pytest.mark.slow

PAGE = DOCS / "recipes" / "fastapi.md"
FILES = {
    "fastapi_app.py": "fastapi_app.py",
    "fastapi_mcp.json": "mcp.json",
    "fastapi_rules.toml": "rules.toml",
}
TOKEN = "recipe-test-token-0123456789abcdef"
VENV_BIN = str(Path(sys.executable).parent)
ORDER = (
    "from mcptools.shop import list_products, place_order\n"
    "tools = list_products(category='tools', in_stock_only=True).products\n"
    "cheapest = min(tools, key=lambda product: product.price_usd)\n"
    "order = place_order(product_id=cheapest.id, quantity=1)\n"
    "print(f'ordered {cheapest.name}: {order.order_id}')"
)


def command(program: str) -> list[str]:
    """The page's command line that starts with ``program`` (in a ```bash block)."""
    lines = [
        line.strip()
        for block in fenced_blocks(PAGE)
        if block.language == "bash"
        for line in block.body.splitlines()
        if line.strip().startswith(f"{program} ")
    ]
    assert len(lines) == 1, f"{PAGE.name} should show one `{program}` command line: {lines}"
    return shlex.split(lines[0])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_until(ready: Callable[[], bool], what: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 120
    while not ready():
        if process.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"{what} did not start:\n{log.read_text()}")
        time.sleep(0.1)


@dataclass
class Recipe:
    folder: Path
    app: str
    app_log: Path
    service_log: Path
    env: dict[str, str]
    """The environment of the recipe's commands (its token, ``IPYBOX_URL``, the venv first on PATH)."""


def start(args: list[str], folder: Path, log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            args, cwd=folder, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env
        )


def stop(process: subprocess.Popen[bytes]) -> int:
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(60)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()


@pytest.fixture(scope="module")
def recipe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recipe]:
    """The recipe's folder, its service and its app, started together (the app's lifespan waits for
    the service: ``wait_for_service``)."""
    folder = tmp_path_factory.mktemp("recipe")
    for source, name in FILES.items():
        shutil.copy(ROOT / "examples" / source, folder / name)
    serve, uvicorn = command("ipybox"), command("uvicorn")
    assert serve[:2] == ["ipybox", "serve"] and "--approval-rules" in serve
    assert uvicorn[:2] == ["uvicorn", "fastapi_app:app"] and "--workers" in uvicorn
    service_port, app_port = free_port(), free_port()
    env = {
        **os.environ,
        "PATH": VENV_BIN + os.pathsep + os.environ["PATH"],
        "IPYBOX_MCP_TOKEN": TOKEN,
        "IPYBOX_URL": f"http://127.0.0.1:{service_port}/mcp",
    }
    service_log, app_log = folder / "serve.log", folder / "app.log"
    service = start([*serve, "--port", str(service_port)], folder, service_log, env)
    app_args = ["uvicorn", "recipe_app:app", "--app-dir", str(Path(__file__).parent), *uvicorn[2:]]
    app = start([*app_args, "--port", str(app_port)], folder, app_log, env)
    base = f"http://127.0.0.1:{app_port}"

    def serving() -> bool:
        """Both workers have entered their lifespan (RemoteSessions and the checkpointer) and serve."""
        if app_log.read_text().count("Application startup complete") < 2:
            return False
        try:
            return httpx.get(f"{base}/openapi.json", timeout=10).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until(lambda: "listening on" in service_log.read_text(), "ipybox serve", service, service_log)
        wait_until(serving, "the recipe's app", app, app_log)
        yield Recipe(folder, base, app_log, service_log, env)
    finally:
        app_code = stop(app)
        service_code = stop(service)
    logs = app_log.read_text() + service_log.read_text()
    assert (app_code, service_code) == (0, 0) and "Traceback" not in logs, logs


def post(recipe: Recipe, path: str, **body: object) -> httpx.Response:
    return httpx.post(f"{recipe.app}{path}", json=body, timeout=120)


def test_an_order_waits_the_approval_is_answered_over_http_and_the_code_goes_on(recipe: Recipe) -> None:
    asked = post(recipe, "/chat", thread_id="alice-1", message=ORDER)
    assert asked.status_code == 200, asked.text
    (pending,) = asked.json()["pending"]  # list_products is read-only: rules.toml let it run
    assert asked.json()["reply"] is None
    assert (pending["tool"], pending["args"]) == ("shop.place_order", {"product_id": "t-302", "quantity": 1})
    listed = httpx.get(f"{recipe.app}/threads/alice-1/pending", timeout=60).json()
    assert [item["interrupt_id"] for item in listed] == [pending["interrupt_id"]]
    done = post(recipe, "/approve", thread_id="alice-1", interrupt_id=pending["interrupt_id"], approve=True)
    assert done.status_code == 200, done.text
    assert done.json()["pending"] == []
    assert "ordered Digital multimeter: ord-" in done.json()["reply"]
    again = post(recipe, "/chat", thread_id="alice-1", message="print(cheapest.name, order.quantity)")
    assert again.json()["reply"].strip() == "Digital multimeter 1"  # the same kernel, its variables
    assert httpx.get(f"{recipe.app}/threads/alice-1/pending", timeout=60).json() == []


def test_a_rejection_reaches_the_code_and_a_stale_id_is_refused(recipe: Recipe) -> None:
    asked = post(recipe, "/chat", thread_id="bob-1", message=ORDER).json()
    (pending,) = asked["pending"]
    wrong = post(recipe, "/approve", thread_id="bob-1", interrupt_id="no-such-interrupt", approve=True)
    assert wrong.status_code == 404 and "does not wait for 'no-such-interrupt'" in wrong.text
    rejected = post(
        recipe,
        "/approve",
        thread_id="bob-1",
        interrupt_id=pending["interrupt_id"],
        approve=False,
        reason="not today",
    ).json()
    assert (
        rejected["pending"] == []
        and "PermissionError" in rejected["reply"]
        and "not today" in rejected["reply"]
    )
    stale = post(recipe, "/approve", thread_id="bob-1", interrupt_id=pending["interrupt_id"], approve=True)
    assert stale.status_code == 404


def test_the_inbox_lists_what_waits_across_threads_and_answers_it(recipe: Recipe) -> None:
    carol = post(recipe, "/chat", thread_id="carol-1", message=ORDER).json()
    dave = post(recipe, "/chat", thread_id="dave-1", message=ORDER).json()
    assert len(carol["pending"]) == len(dave["pending"]) == 1
    inbox = httpx.get(f"{recipe.app}/approvals", timeout=60).json()
    mine = {item["conversation"]: item for item in inbox if item["conversation"] in ("carol-1", "dave-1")}
    assert [item["conversation"] for item in inbox][-2:] == ["carol-1", "dave-1"]  # oldest first
    for item in mine.values():
        assert (item["server"], item["tool"], item["arguments"]) == (
            "shop",
            "place_order",
            {"product_id": "t-302", "quantity": 1},
        )
        assert item["asked_by"] and item["waiting_for"] >= 0 and item["read_only"] is False
    only_dave = httpx.get(f"{recipe.app}/approvals", params={"thread_id": "dave-1"}, timeout=60).json()
    assert [item["id"] for item in only_dave] == [mine["dave-1"]["id"]]
    approved = post(recipe, f"/approvals/{mine['carol-1']['id']}", approve=True).json()
    assert approved["pending"] == [] and "ordered Digital multimeter: ord-" in approved["reply"]
    rejected = post(recipe, f"/approvals/{mine['dave-1']['id']}", approve=False, reason="over budget").json()
    assert rejected["pending"] == [] and "over budget" in rejected["reply"]
    assert httpx.get(f"{recipe.app}/threads/dave-1/pending", timeout=60).json() == []
    again = post(recipe, f"/approvals/{mine['dave-1']['id']}", approve=True)
    assert again.status_code == 404
    left = httpx.get(f"{recipe.app}/approvals", timeout=60).json()
    assert not [item for item in left if item["conversation"] in ("carol-1", "dave-1")]


def test_an_answer_from_ipybox_approvals_is_the_one_the_thread_gets(recipe: Recipe) -> None:
    (pending,) = post(recipe, "/chat", thread_id="erin-1", message=ORDER).json()["pending"]
    (waiting,) = httpx.get(f"{recipe.app}/approvals", params={"thread_id": "erin-1"}, timeout=60).json()
    cli = subprocess.run(
        ["ipybox", "approvals", "approve", waiting["id"], "--client-name", "ops"],
        capture_output=True,
        text=True,
        timeout=120,
        env=recipe.env,
        check=False,
    )
    assert cli.returncode == 0, cli.stderr
    late = post(recipe, "/approve", thread_id="erin-1", interrupt_id=pending["interrupt_id"], approve=False)
    assert late.status_code == 200, late.text
    assert late.json()["pending"] == [] and "ordered Digital multimeter: ord-" in late.json()["reply"]


def test_the_app_runs_on_two_workers(recipe: Recipe) -> None:
    log = recipe.app_log.read_text()
    assert len(set(re.findall(r"Started server process \[(\d+)\]", log))) == 2, log


def test_the_service_says_what_the_page_says(recipe: Recipe) -> None:
    url = recipe.env["IPYBOX_URL"]
    assert f"ipybox MCP server listening on {url}" in recipe.service_log.read_text()
    ready = httpx.get(url.removesuffix("/mcp") + "/readyz", timeout=60)
    assert (ready.status_code, ready.json()["status"]) == (200, "ready"), ready.text
