"""`python -m explorer <command>`: one door to every command, each its module's own main(argv); the
`explorer` console script is the same door."""
from __future__ import annotations

import importlib
import re
import sys
import tomllib
from pathlib import Path

import pytest

from explorer.__main__ import COMMANDS, main
from support.waiting import run_watched

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_is_a_main_that_answers_help(name, capsys):
    module = importlib.import_module(COMMANDS[name][0])
    assert callable(module.main)
    with pytest.raises(SystemExit) as stop:
        main([name, "--help"])
    assert stop.value.code == 0 and "usage:" in capsys.readouterr().out


def test_no_command_lists_them_and_an_unknown_one_says_so(capsys):
    assert main([]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in COMMANDS)
    assert main(["nonsense"]) == 2
    assert "unknown command 'nonsense'" in capsys.readouterr().err


def test_the_door_runs_a_command_as_its_own_module_does(tmp_path):
    """`python -m explorer data numbers` and `python -m explorer.data numbers` print the same summary."""
    import os
    env = {**os.environ, "EXPLORER_DATA_DIR": str(tmp_path)}
    door = run_watched([sys.executable, "-m", "explorer", "data", "numbers"], "the door's data command", [tmp_path],
                       cwd=ROOT, env=env)
    own = run_watched([sys.executable, "-m", "explorer.data", "numbers"], "explorer.data", [tmp_path],
                      cwd=ROOT, env=env)
    assert door.returncode == own.returncode == 0, door.stderr[-2000:]
    import re
    untimed = [re.sub(r" in [0-9.]+ s,", ",", run.stdout) for run in (door, own)]     # the second reads the cache
    assert untimed[0] == untimed[1] and "train 50,000" in untimed[0]


def test_the_console_script_is_the_door():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"explorer": "explorer.__main__:main"}


def actions_of(name: str, capsys) -> list[list[str]]:
    """The command itself, or each of its actions (`features train|evaluate`, `convert from-hf|...`): the
    choices in braces its usage line puts first, before any option."""
    with pytest.raises(SystemExit):
        main([name, "--help"])
    usage = capsys.readouterr().out.split("\n\n")[0]
    braces = re.match(rf"usage: .*?explorer {name} (?:\[-h\] )?\{{([\w,-]+)\}}", usage)
    return [[name, action] for action in braces.group(1).split(",")] if braces else [[name]]


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_device_option_refuses_an_unknown_device_in_one_line(name, capsys):
    """`showcase --device foo` ended in torch's RuntimeError traceback: each command (and each action of a
    command with actions) that takes a device checks it while reading its arguments, as the others do."""
    asked = 0
    for words in actions_of(name, capsys):
        with pytest.raises(SystemExit):
            main([*words, "--help"])
        if "--device" not in capsys.readouterr().out:
            continue
        asked += 1
        try:
            code = main([*words, "--device", "foo"])
        except SystemExit as stop:
            code = stop.code
        said = capsys.readouterr().err
        assert code == 2 and "device 'foo'" in said.strip().splitlines()[-1] and "Traceback" not in said, \
            (words, said)
    if not asked:
        pytest.skip(f"{name} takes no --device")


def test_the_actions_of_a_command_are_found(capsys):
    """The device test above reads actions from the usage line: it must find them where they are, and not
    take an option's choices (heads' `--forced {reference,output}`) for them."""
    assert actions_of("features", capsys) == [["features", "train"], ["features", "evaluate"]]
    assert ["convert", "from-hf"] in actions_of("convert", capsys)
    assert actions_of("heads", capsys) == [["heads"]]
