"""The one approval question format, and answers read from pipes, files and cancelled reads."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ipybox_core.terminal import approval_question, ask


@dataclass
class Call:
    name: str
    args: dict[str, Any]
    hints: list[str] = field(default_factory=list)


def test_the_question_reads_like_a_python_call() -> None:
    assert (
        approval_question(Call("shop.place_order", {"product_id": "b-101", "quantity": 1}, ["destructive"]))
        == "approve shop.place_order(product_id='b-101', quantity=1) [destructive]?"
    )
    assert approval_question(Call("shop.list", {})) == "approve shop.list()?"
    assert approval_question(Call("shell", {"command": "ls -l"})) == "approve shell command 'ls -l'?"
    long = approval_question(Call("ledger.file", {"body": "a\nb\nc", "ids": list(range(100))}))
    assert long.startswith("approve ledger.file(body=<3 lines>, ids=[0, 1, 2,") and "...)" in long
    assert len(long) < 130


@pytest.fixture
def pipe() -> Iterator[tuple[io.TextIOWrapper, int]]:
    """(a text reader like stdin, the write end's descriptor)."""
    read_fd, write_fd = os.pipe()
    reader = open(read_fd, encoding="utf-8")  # noqa: SIM115 - closed below
    yield reader, write_fd
    reader.close()
    with contextlib.suppress(OSError):
        os.close(write_fd)


async def test_piped_answers_are_echoed_and_end_of_input_is_no_answer(
    pipe: tuple[io.TextIOWrapper, int],
) -> None:
    reader, write_fd = pipe
    os.write(write_fd, b"maybe\ny\nN\n")
    os.close(write_fd)
    shown = io.StringIO()
    assert await ask("approve a()?", source=reader, prompt=shown) is True
    assert await ask("approve b()?", source=reader, prompt=shown) is False
    assert await ask("approve c()?", source=reader, prompt=shown) is None
    assert shown.getvalue().splitlines() == [
        "approve a()? [y/N] maybe",
        "please answer y or n",
        "approve a()? [y/N] y",
        "approve b()? [y/N] N",
        "approve c()? [y/N] ",
    ]


async def test_answers_from_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "answers").write_text("yes\n")
    with open(tmp_path / "answers", encoding="utf-8") as source:
        assert await ask("approve a()?", source=source, prompt=io.StringIO()) is True


async def test_a_cancelled_question_stops_reading_at_once(pipe: tuple[io.TextIOWrapper, int]) -> None:
    reader, write_fd = pipe
    waiting = asyncio.create_task(ask("approve a()?", source=reader, prompt=io.StringIO()))
    await asyncio.sleep(0.05)
    waiting.cancel()  # what Ctrl-C does under asyncio.run
    with pytest.raises(asyncio.CancelledError):
        await waiting
    os.write(write_fd, b"y\n")  # the next question reads the next answer: nothing was consumed
    assert await ask("approve b()?", source=reader, prompt=io.StringIO()) is True


async def test_auto_shows_the_question_answered() -> None:
    shown = io.StringIO()
    assert await ask("approve a()?", auto=True, prompt=shown) is True
    assert shown.getvalue() == "approve a()? [y/N] y (auto)\n"
