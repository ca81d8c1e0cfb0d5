"""The CLI's help as the book's reference page prints it (sphinx-argparse formats each help
string with ``help % vars(action)``): choices are listed, never an object repr."""

from __future__ import annotations

import re

from dpsynth.cli import commands


def _actions(parser):
    for action in parser._actions:
        yield action
        for sub in getattr(action, "choices", None) or {}:
            if isinstance(action.choices, dict):
                yield from _actions(action.choices[sub])


def test_help_strings_name_their_choices():
    parser = commands.build_parser()
    for action in _actions(parser):
        if not action.help or action.help == "==SUPPRESS==":
            continue
        text = action.help % dict(vars(action), prog="dpsynth")
        assert not re.search(r"object at 0x", text), (action.option_strings, text)
    assert repr(commands.MODELS).startswith(next(iter(commands.MODELS)))
    assert "lognormal-regression" in repr(commands.MODELS)


def test_every_subcommand_is_on_the_book_page():
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "book" / "cli.md").read_text()
    parser = commands.build_parser()
    subs = next(a for a in parser._actions if isinstance(getattr(a, "choices", None), dict))
    words = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven"}
    assert f"has {words[len(subs.choices)]} subcommands" in page
    for name in subs.choices:
        assert f"`{name}`" in page
