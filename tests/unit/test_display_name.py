"""A display name a user gives a checkpoint (ship --name / --run, convert from-hf --name) is one line of
printable text of bounded length, refused in argparse's one line before anything is read or written."""
from __future__ import annotations

import argparse
import re

import pytest

from explorer.store import ship
from explorer.store.display_name import MAX_NAME_CHARS, display_name
from support.app_support import NUMBERS


@pytest.mark.parametrize("name, why", [("", "visible"), ("   ", "visible"), ("a\x1b[31mred", "U+001B"),
                                       ("two\nlines", "U+000A"), ("abc\u202edef", "U+202E"),
                                       ("x" * (MAX_NAME_CHARS + 1), "at most")])
def test_a_name_that_is_blank_too_long_or_holds_control_characters_is_refused(name, why):
    with pytest.raises(argparse.ArgumentTypeError, match=re.escape(why)):
        display_name(name)


def test_a_plain_name_is_kept_trimmed():
    assert display_name("  numbers en→de (Zahlen) ") == "numbers en→de (Zahlen)"
    assert display_name("x" * MAX_NAME_CHARS) == "x" * MAX_NAME_CHARS


@pytest.mark.parametrize("flag", ["--name", "--run"])
def test_ship_refuses_such_a_name_before_it_writes(tmp_path, capsys, flag):
    dst = tmp_path / "shipped"
    with pytest.raises(SystemExit) as ended:
        ship.main([str(NUMBERS), str(dst), flag, "\x1b]0;pwned\x07"])
    assert ended.value.code == 2 and "U+001B" in capsys.readouterr().err
    assert not dst.exists()
