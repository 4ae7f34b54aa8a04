"""Approval rules read from a file: the vocabulary of ``ApprovalRules``, every problem reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ipybox_core.approval import ApprovalRules
from ipybox_core.approval.rules_file import RulesFileError, load_rules
from ipybox_core.errors import ConfigError


def test_toml_and_json_give_the_same_rules(tmp_path: Path) -> None:
    toml = tmp_path / "rules.toml"
    toml.write_text(
        'allow_read_only = true\nallow = ["shop.list_*"]\ndeny = ["shell:rm *"]\ndefault = "deny"\n'
    )
    as_json = tmp_path / "rules.json"
    as_json.write_text(
        json.dumps(
            {"allow_read_only": True, "allow": ["shop.list_*"], "deny": ["shell:rm *"], "default": "deny"}
        )
    )
    expected = ApprovalRules(
        allow=("shop.list_*",), deny=("shell:rm *",), allow_read_only=True, default="deny"
    )
    assert load_rules(toml) == load_rules(as_json) == expected
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    assert load_rules(empty) == ApprovalRules()


def test_every_problem_is_one_line(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text(
        'allow = "x.*"\ndeny = [""]\nallow_read_only = 1\ndefault = "sometimes"\n[servers.shop]\n'
    )
    with pytest.raises(RulesFileError) as raised:
        load_rules(rules)
    assert isinstance(raised.value, ConfigError)
    header, *problems = str(raised.value).splitlines()
    assert header == f"invalid approval rules {rules} (5 problems):"
    assert [line.removeprefix("  ") for line in problems] == [
        "unknown key 'servers' (known: allow, deny, allow_read_only, default)",
        "allow must be a list of patterns such as ['shop.list_*'], not 'x.*'",
        "deny[0] must be a non-empty pattern string, not ''",
        "allow_read_only must be true or false, not 1",
        "default must be one of 'ask', 'allow', 'deny', not 'sometimes'",
    ]


@pytest.mark.parametrize(
    ("name", "text", "problem"),
    [
        ("rules.json", "{", "not valid JSON"),
        ("rules.toml", "allow = [", "not valid TOML"),
        ("r.json", "[]", "must be a table"),
    ],
)
def test_a_file_that_does_not_parse_is_one_line(tmp_path: Path, name: str, text: str, problem: str) -> None:
    rules = tmp_path / name
    rules.write_text(text)
    with pytest.raises(RulesFileError, match=problem) as raised:
        load_rules(rules)
    assert len(str(raised.value).splitlines()) == 1
    with pytest.raises(RulesFileError, match="cannot read it"):
        load_rules(tmp_path / "missing.toml")
