"""KernelPool: warm kernels handed out once, replaced in the background, shut down on close."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest
from _kernel_helpers import descendants, is_running

from ipybox_core.errors import ConfigError, ExecutorClosed, KernelStartError
from ipybox_core.kernel import Kernel, KernelConfig, KernelPool


async def wait_ready(pool: KernelPool, count: int, seconds: float = 60) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while pool.ready < count:
        assert loop.time() < end, f"only {pool.ready} of {count} pooled kernels became ready"
        await asyncio.sleep(0.02)


async def test_acquired_kernels_are_started_distinct_and_clean() -> None:
    async with KernelPool(KernelConfig(), size=2) as pool:
        await wait_ready(pool, 2)
        first = await pool.acquire()
        second = await pool.acquire()
        try:
            assert first.is_alive and second.is_alive
            assert first.pid != second.pid
            assert first.runtime_dir != second.runtime_dir
            await first.run("mine = 1")
            leaked = await second.run("mine")
            assert leaked.error is not None and leaked.error.ename == "NameError"
            await wait_ready(pool, 2)  # both taken kernels were replaced in the background
            third = await pool.acquire()
            assert third.pid not in (first.pid, second.pid)
            await third.shutdown()
        finally:
            await first.shutdown()
            await second.shutdown()


async def test_close_shuts_down_pooled_kernels_but_not_handed_out_ones() -> None:
    pool = KernelPool(KernelConfig(), size=2)
    await pool.start()
    await wait_ready(pool, 2)
    taken = await pool.acquire()
    await wait_ready(pool, 2)
    pooled_pids = [task.result().pid for task in pool._slots]
    await pool.close()
    assert not any(is_running(pid) for pid in pooled_pids if pid is not None)
    assert taken.is_alive
    assert (await taken.run("'still mine'")).text == "'still mine'\n"
    await taken.shutdown()
    with pytest.raises(ExecutorClosed):
        await pool.acquire()
    await pool.close()  # idempotent


async def test_close_while_kernels_are_still_starting_leaves_nothing() -> None:
    before = descendants(os.getpid())
    pool = KernelPool(KernelConfig(), size=2)
    await pool.start()
    loop = asyncio.get_running_loop()
    end = loop.time() + 60
    while len(started := descendants(os.getpid()) - before) < 2:  # both kernel processes exist
        assert loop.time() < end, f"the pool started {len(started)} of 2 kernel processes"
        await asyncio.sleep(0.005)
    starting = sum(not task.done() for task in pool._slots)
    await pool.close()
    assert starting > 0, "the kernels finished starting before close(): nothing was cut short"
    # Gone when close() returns, not later: a kernel object dropped unclosed is also killed by its
    # finalizer once collected, so waiting here would let a close() that does nothing pass.
    assert {pid for pid in started if is_running(pid)} == set()
    assert pool.ready == 0


async def test_a_kernel_that_died_in_the_pool_is_not_handed_out() -> None:
    async with KernelPool(KernelConfig(), size=1) as pool:
        await wait_ready(pool, 1)
        doomed: Kernel = pool._slots[0].result()
        assert doomed.pid is not None
        os.kill(doomed.pid, signal.SIGKILL)
        while doomed.is_alive:
            await asyncio.sleep(0.01)
        kernel = await pool.acquire()
        try:
            assert kernel is not doomed and kernel.is_alive
            assert (await kernel.run("'fine'")).text == "'fine'\n"
        finally:
            await kernel.shutdown()


async def test_start_failures_surface_on_acquire() -> None:
    async with KernelPool(KernelConfig(python="/nonexistent/python3"), size=1) as pool:
        with pytest.raises(KernelStartError):
            await pool.acquire()


async def test_bad_size_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        KernelPool(KernelConfig(), size=0)
