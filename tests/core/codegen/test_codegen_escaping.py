"""Hostile text in descriptions, names and values never breaks a module and survives intact."""

from __future__ import annotations

import ast
import inspect
import pydoc
from pathlib import Path

import pytest
from codegen_kit import Generator, generate_fixture, tool
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ipybox_core.codegen import generate_server_package
from ipybox_core.codegen._source import docstring, scrub, summary

generate = generate_fixture()

NASTY = [
    'ends with a quote"',
    'three """ quotes """ and four """"',
    "'''single triple'''",
    "back\\slash at end\\",
    "\\N{BULLET} \\x00 \\u1234 escapes written out",
    "nul\x00byte and \x07bell and \x1b[31mansi",
    "carriage\rreturn and \r\n windows",
    "line\u2028separator and \u2029paragraph",
    "lone \ud800 surrogate",
    "emoji 🎉 and ünïcödé and RTL \u202e override",
    "tab\tand form\x0cfeed",
    "    indented\n        more\n  less",
    "",
]


@pytest.mark.parametrize("text", NASTY)
def test_docstring_literal_round_trips(text: str) -> None:
    literal = docstring(text, "    ")
    value = ast.literal_eval(literal)
    assert inspect.cleandoc(value) == inspect.cleandoc(scrub(text).rstrip())


@settings(max_examples=300, deadline=None)
@given(st.text())
@example("\n0\t0")  # a tab after text: the docstring's indentation must not shift its column
def test_any_text_round_trips_through_a_docstring(text: str) -> None:
    literal = docstring(text, "    ")
    source = f"def f():\n    {literal}\n"
    namespace: dict[str, object] = {}
    exec(compile(source, "<test>", "exec"), namespace)
    doc = namespace["f"].__doc__ or ""  # type: ignore[attr-defined]
    assert inspect.cleandoc(doc) == inspect.cleandoc(scrub(text).rstrip())


def test_hostile_descriptions_names_and_values_everywhere(generate: Generator) -> None:
    description = "\n".join(NASTY)
    properties = {
        text or "empty": {
            "type": "string",
            "description": text,
            "enum": [text, "ok"],
            "default": "ok",
            "title": text,
        }
        for text in NASTY
    }
    nested = {
        "type": "object",
        "title": '"""Evil"""',
        "description": description,
        "properties": {'q"uote': {"type": "string", "description": description}},
    }
    tools = [
        tool('evil"""tool\\', {**properties, "nested": nested}, description=description),
        tool("x\x00y", description="nul in the name"),
    ]
    imported = generate('server"""\\', tools)
    fn = getattr(imported.module, imported.package.tool('evil"""tool\\').function)
    help_text = pydoc.render_doc(fn, renderer=pydoc.plaintext)
    for text in NASTY:
        if text.strip():
            assert scrub(text).split()[0] in help_text
    help_text.encode()  # nothing unencodable reaches the help text
    nested_model = getattr(imported.module, imported.package.models and next(iter(imported.package.models)))
    assert nested_model.model_fields["q_uote"].alias == 'q"uote'
    assert nested_model.__doc__ is not None and "separator" in nested_model.__doc__


def test_summaries_are_one_clean_line() -> None:
    assert summary("First line.\nSecond line.") == "First line."
    assert summary("\n\n  spaced   out \x00 text  \n") == "spaced out text"
    long = "word " * 100
    cut = summary(long)
    assert cut.endswith("…") and len(cut) <= 160
    sentences = summary("A sentence. " * 30)
    assert sentences.endswith("sentence.") and len(sentences) <= 160


def test_server_name_with_quotes_is_safe_in_every_file(tmp_path: Path) -> None:
    pkg = generate_server_package('it\'s "x" \\ \n', [tool("t")], tmp_path)
    for path in pkg.path.rglob("*.py"):
        compile(path.read_text(), str(path), "exec")
