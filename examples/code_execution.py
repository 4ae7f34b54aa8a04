"""Code execution without MCP: state, output, errors, shell commands, images, timeouts and reset.

    python examples/code_execution.py

Each section is one feature of ``CodeExecutor``; the docs page "Code execution" shows them.
"""

from __future__ import annotations

import asyncio
import tempfile

from ipybox_core import CodeExecutor, ExecutionTimeout, OutputChunk


async def main(workspace: str) -> None:
    # --8<-- [start:state]
    async with CodeExecutor(workspace=workspace, timeout=60) as executor:
        await executor.execute("import math\nradius = 2.0")
        result = await executor.execute("area = math.pi * radius**2\nprint('area:', round(area, 2))\narea")
        print(result.text, end="")  # what the code printed, then the value of the last expression
        # --8<-- [end:state]

        # --8<-- [start:stream]
        async for event in executor.stream("import time\nfor i in range(3):\n    print(i); time.sleep(0.1)"):
            if isinstance(event, OutputChunk):  # arrives while the code runs
                print(f"{event.stream}: {event.text!r}")
        # --8<-- [end:stream]

        # --8<-- [start:errors]
        result = await executor.execute("1 / 0")
        assert result.error is not None  # the code raised: a result, not an exception
        print(result.error.ename, "-", result.error.evalue)
        print(result.to_text())  # output plus traceback: what a model should read
        # --8<-- [end:errors]

        # --8<-- [start:shell]
        result = await executor.execute("!echo hello from the shell\nfiles = !ls\n'notes.txt' in files")
        print(result.text, end="")
        # --8<-- [end:shell]

        # --8<-- [start:images]
        result = await executor.execute(
            "import matplotlib.pyplot as plt\nplt.plot([1, 4, 9, 16])\nplt.title('squares')\nplt.show()"
        )
        png = result.images[0]  # PNG bytes; result.displays has every rich output as a MIME bundle
        print(f"{len(result.images)} image(s), {len(png):,} bytes, starts with {png[:4]!r}")
        # --8<-- [end:images]

        # --8<-- [start:timeout]
        try:
            await executor.execute("counter = 0\nwhile True:\n    counter += 1", timeout=1)
        except ExecutionTimeout as error:
            print("timed out:", error)
        result = await executor.execute("counter > 0 and radius == 2.0")  # state survives a timeout
        print("state kept:", result.text.strip())
        # --8<-- [end:timeout]

        # --8<-- [start:reset]
        await executor.reset()  # a fresh kernel: variables are gone, the generated API stays
        result = await executor.execute("'radius' in globals()")
        print("after reset:", result.text.strip())
        # --8<-- [end:reset]


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="ipybox-execution-") as tmp:
        open(f"{tmp}/notes.txt", "w").close()
        asyncio.run(main(tmp))
