"""Code generation benchmark: speed against datamodel-code-generator, import time, prompt size.

Run: ``.venv/bin/python benchmarks/bench_codegen.py [--tools 200] [--seed 7]``. Every figure is
measured in this run; ratios compare against a baseline measured in the same run.

1. Generation time of a synthetic server (varied schemas, fixed seed) with
   ``generate_server_package``, against datamodel-code-generator generating one pydantic model per
   tool input schema in-process (default formatters, as a typical integration does, and with only
   its builtin formatter). Goal: at least 20x faster. (The baseline needs the ``bench`` extra,
   ``pip install 'ipybox[bench]'``; without it only ipybox's own times are printed.)
2. Import time of the generated package in a fresh interpreter (lazy ``import`` and importing all
   tools), next to the interpreter's own start with pydantic imported.
3. Prompt size: ``api_reference()`` against the same tools as function-calling specs
   (``{"type": "function", "function": {"name", "description", "parameters"}}``). Goal: at most 40%.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from ipybox_core.codegen import api_reference, generate_server_package
from ipybox_core.codegen.package import build_package_files
from ipybox_core.mcp.types import ToolInfo

#: Arguments for a seconds-long run that only checks the benchmark still works (tests/test_benchmarks.py).
TINY_ARGS = ["--tools", "5", "--rounds", "1"]

DATA = Path(__file__).parent.parent / "tests" / "core" / "codegen" / "data"
WORDS = [
    "user",
    "repo",
    "issue",
    "label",
    "query",
    "page",
    "limit",
    "owner",
    "state",
    "sort",
    "order",
    "since",
    "path",
    "branch",
    "title",
    "body",
]


def _description(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 14))).capitalize() + "."


def _property(rng: random.Random, depth: int) -> dict[str, Any]:
    kind = rng.choice(
        ["string", "integer", "number", "boolean", "enum", "array", "object", "nullable", "ref"]
    )
    if depth > 2 and kind in ("array", "object", "ref"):
        kind = "string"
    schema: dict[str, Any]
    if kind == "enum":
        schema = {"type": "string", "enum": rng.sample(WORDS, rng.randint(2, 6))}
    elif kind == "array":
        schema = {"type": "array", "items": _property(rng, depth + 1)}
    elif kind == "object":
        schema = _object(rng, depth + 1, rng.randint(1, 4))
    elif kind == "nullable":
        schema = {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}
    elif kind == "ref":
        schema = {"$ref": "#/$defs/Shared"}
    else:
        schema = {"type": kind}
        if kind == "integer" and rng.random() < 0.5:
            schema.update(minimum=0, maximum=100, default=rng.randint(0, 100))
    if rng.random() < 0.7:
        schema["description"] = _description(rng)
    return schema


def _object(rng: random.Random, depth: int, size: int) -> dict[str, Any]:
    names = rng.sample(WORDS, size)
    properties = {name: _property(rng, depth) for name in names}
    required = [name for name in names if rng.random() < 0.4]
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def synthetic_tools(count: int, seed: int) -> list[ToolInfo]:
    rng = random.Random(seed)
    tools = []
    for index in range(count):
        schema = _object(rng, 0, rng.randint(1, 7))
        schema["$defs"] = {"Shared": _object(rng, 2, 3)}
        output = None
        if rng.random() < 0.3:
            output = _object(rng, 1, rng.randint(2, 6))
            output["$defs"] = schema["$defs"]
        name = f"{rng.choice(WORDS)}_{rng.choice(WORDS)}-{index}"
        tools.append(
            ToolInfo(name=name, description=_description(rng), input_schema=schema, output_schema=output)
        )
    return tools


def load_tools(name: str) -> list[ToolInfo]:
    return [
        ToolInfo(
            name=t["name"],
            description=t.get("description", ""),
            input_schema=t["inputSchema"],
            output_schema=t.get("outputSchema"),
        )
        for t in json.loads((DATA / name).read_text())
    ]


def function_specs(tools: list[ToolInfo]) -> str:
    return json.dumps(
        [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
            }
            for t in tools
        ]
    )


def time_ours(tools: list[ToolInfo], root: Path) -> tuple[float, float]:
    """Seconds for one complete generation (written to disk) and for building it in memory."""
    start = time.perf_counter()
    generate_server_package("bench", tools, root)
    middle = time.perf_counter()
    build_package_files("bench", tools)
    return middle - start, time.perf_counter() - middle


def time_datamodel_codegen(tools: list[ToolInfo], formatters: list[Any] | None) -> float:
    """Seconds for datamodel-code-generator to make one pydantic model per tool input schema."""
    from datamodel_code_generator import DataModelType, InputFileType, generate

    options: dict[str, Any] = {"disable_timestamp": True}
    if formatters is not None:
        options["formatters"] = formatters
    start = time.perf_counter()
    for info in tools:
        generate(
            json.dumps(info.input_schema),
            input_file_type=InputFileType.JsonSchema,
            output_model_type=DataModelType.PydanticV2BaseModel,
            class_name="Params",
            **options,
        )
    return time.perf_counter() - start


def import_times(root: Path, module: str, tools: list[ToolInfo]) -> dict[str, float]:
    """Seconds for a fresh interpreter: baseline (pydantic imported), lazy import, import all, first call."""
    probe = f"""
import sys, time
sys.path.insert(0, {str(root.parent)!r})
t0 = time.perf_counter(); import pydantic; t1 = time.perf_counter()
import {root.name}.{module} as package
t2 = time.perf_counter()
for name in package.TOOLS: getattr(package, name)
t3 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t2)
"""
    runs = []
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
        runs.append([float(x) for x in out.split()])
    pydantic_s, lazy_s, all_s = (statistics.median(r[i] for r in runs) for i in range(3))
    return {"pydantic": pydantic_s, "lazy": lazy_s, "all": all_s}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tools", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # datamodel-code-generator's deprecation notices
    tools = synthetic_tools(args.tools, args.seed)
    baseline = importlib.util.find_spec("datamodel_code_generator") is not None
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory) / "mcptools"
        if baseline:
            time_datamodel_codegen(tools[:3], None)  # warm up its imports
        generate_server_package("bench", tools, root)  # and ours
        ours: list[tuple[float, float]] = []
        default: list[float] = []
        builtin: list[float] = []
        for _ in range(args.rounds):  # interleaved: machine noise hits both sides alike
            ours.append(time_ours(tools, root))
            if baseline:
                from datamodel_code_generator import Formatter

                default.append(time_datamodel_codegen(tools, None))
                ours.append(time_ours(tools, root))
                builtin.append(time_datamodel_codegen(tools, [Formatter.BUILTIN]))
        written = min(t[0] for t in ours)
        in_memory = min(t[1] for t in ours)
        print(f"generation, {len(tools)} tools (seed {args.seed}), best of {args.rounds} interleaved rounds:")
        print(f"  ipybox, written to disk (incl. compile check)  {written * 1000:8.1f} ms")
        print(f"  ipybox, in memory (incl. compile check)        {in_memory * 1000:8.1f} ms")
        if not baseline:
            print("  datamodel-code-generator baseline skipped: pip install 'ipybox[bench]'")
        for label, times in (("default formatters", default), ("builtin formatter", builtin)):
            if not times:
                continue
            theirs = min(times)
            print(
                f"  datamodel-code-generator, {label:19} {theirs * 1000:8.1f} ms"
                f"  -> {theirs / written:5.1f}x (written) / {theirs / in_memory:5.1f}x (in memory)"
            )

        imports = import_times(root, "bench", tools)
        print(f"import in a fresh interpreter (median of 3), {len(tools)} tools:")
        print(f"  import pydantic (baseline)          {imports['pydantic'] * 1000:9.1f} ms")
        print(f"  import mcptools.bench (lazy)        {imports['lazy'] * 1000:9.1f} ms")
        print(f"  then access all {len(tools)} functions      {imports['all'] * 1000:9.1f} ms")

        print("prompt size: api_reference() vs function-calling specs (JSON):")
        sets = {
            f"synthetic ({len(tools)} tools)": tools,
            "server-everything": load_tools("server-everything.json"),
            "mcp-server-fetch": load_tools("mcp-server-fetch.json"),
            "research (MCPServer)": load_tools("research-tools.json"),
            "shapes (filesystem/time-like)": load_tools("shapes-tools.json"),
        }
        total_ref = total_spec = 0
        for index, (label, tool_set) in enumerate(sets.items()):
            pkg = generate_server_package(f"set{index}", tool_set, root)
            reference = len(api_reference([pkg]))
            specs = len(function_specs(tool_set))
            total_ref += reference
            total_spec += specs
            print(f"  {label:32} {reference:7d} / {specs:7d} chars = {reference / specs:6.1%}")
        print(f"  {'all sets':32} {total_ref:7d} / {total_spec:7d} chars = {total_ref / total_spec:6.1%}")


if __name__ == "__main__":
    main()
