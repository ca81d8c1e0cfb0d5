"""The specs the book shows are specs dpsynth takes: each ```toml block of the whole-table
page parses (its reference file aside), and every column the page leaves to the defaults
gets a mechanism by the rule (none is refused for lack of one)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from dpsynth.table.spec import load_spec

PAGE = Path(__file__).resolve().parents[1] / "book" / "whole_table.md"
BLOCKS = re.findall(r"```toml\n(.*?)```", PAGE.read_text(), re.S)


def test_the_page_shows_a_spec():
    assert BLOCKS


@pytest.mark.parametrize("block", BLOCKS)
def test_each_spec_on_the_page_parses(block):
    raw = tomllib.loads(block)
    raw.pop("reference", None)  # a file the reader has, not this test
    spec = load_spec(raw)
    assert spec.order()
    for col in spec.order():
        assert col.mechanism
