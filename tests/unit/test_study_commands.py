"""Every study command is built on the studies' one parser (explorer.studies.common.command), and each of
its options takes its default from the analysis's settings dataclass: the one place a default is written,
so the help text, the command line and the app cannot disagree."""
from __future__ import annotations

import argparse
from dataclasses import fields
from types import SimpleNamespace

import pytest

from explorer.studies.align import __main__ as align_command
from explorer.studies.align.scorecard import AlignSettings
from explorer.studies.common.command import settings_from
from explorer.studies.contrastive import __main__ as search_command
from explorer.studies.contrastive.job import SearchSettings
from explorer.studies.contributions import __main__ as contributions_command
from explorer.studies.contributions.faithfulness import FaithfulnessSettings
from explorer.studies.contributions.job import ContributionSettings
from explorer.studies.features import __main__ as features_command
from explorer.studies.features.job import FeatureSettings
from explorer.studies.graphs import __main__ as graph_command
from explorer.studies.graphs.job import GraphSettings
from explorer.studies.grounding import __main__ as grounding_command
from explorer.studies.grounding.job import GroundingSettings
from explorer.studies.heads import __main__ as heads_command
from explorer.studies.heads.job import LabSettings
from explorer.studies.lens import __main__ as lens_command
from explorer.studies.lens.job import LensSettings
from explorer.studies.patching import __main__ as patch_command

SETTINGS = {"heads": (heads_command, (LabSettings,)), "align": (align_command, (AlignSettings,)),
            "contributions": (contributions_command, (ContributionSettings, FaithfulnessSettings)),
            "lens": (lens_command, (LensSettings,)), "search": (search_command, (SearchSettings,)),
            "grounding": (grounding_command, (GroundingSettings,)),
            "graph": (graph_command, (GraphSettings,)),
            **{f"features {action}": (SimpleNamespace(build_parser=lambda action=action: features_command.build_parser(action)),
                                      (FeatureSettings,)) for action in features_command.ACTIONS}}
REQUIRED = {"grounding": ["--input", "x.txt"], "graph": ["--text", "x"]}


def options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {a.dest: a for a in parser._actions if a.option_strings and a.dest != "help"}


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_every_option_of_a_setting_defaults_to_the_settings_default(name):
    module, classes = SETTINGS[name]
    found = options(module.build_parser())
    for cls in classes:
        shared = [f for f in fields(cls) if f.name in found]
        assert shared, f"{name}: no option of {cls.__name__}"
        for f in shared:
            default = found[f.name].default
            assert (tuple(default) if isinstance(default, list) else default) == f.default, (name, f.name)
            said = ",".join(map(str, f.default)) if isinstance(f.default, tuple) else str(f.default)
            assert isinstance(f.default, bool) or f"default {said}" in found[f.name].help, \
                f"{name} --{f.name}: the help does not say its default"


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_a_bare_command_line_means_the_default_settings(name):
    module, classes = SETTINGS[name]
    args = module.build_parser().parse_args(["some-checkpoint", *REQUIRED.get(name, [])])
    for cls in classes:
        assert settings_from(args, cls) == cls()


@pytest.mark.parametrize("module", [heads_command, align_command, contributions_command, lens_command,
                                   search_command, grounding_command, patch_command, graph_command])
def test_every_study_command_names_the_one_door_and_writes_checked_output(module):
    parser = module.build_parser()
    assert parser.prog.startswith("python -m explorer ")
    found = options(parser)
    assert {"out", "device"} <= set(found)
    assert found["out"].default and found["out"].default in found["out"].help
