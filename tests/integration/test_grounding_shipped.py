"""The training-word indexes in checkpoints/grounding/ are what the code builds from the shipped
checkpoints' own training data (a shipped file is a build product, never edited by hand)."""
from __future__ import annotations

import pytest

from explorer.data import DataError
from explorer.studies.grounding import index as ix
from explorer.studies.grounding.build import build
from explorer.store.checkpoint import read_config
from support.app_support import ROOT


@pytest.mark.parametrize("name", ["numbers-en-de", "bible-es-en"])
def test_a_shipped_index_equals_a_rebuild_from_its_training_data(name):
    path = ROOT / "checkpoints" / name
    meta, _ = read_config(path)
    shipped = ix.index_path(meta["training"]["dataset"])
    assert ix.is_shipped(shipped), f"no shipped index for {name}: {shipped}"
    try:
        rebuilt = build(path, meta)
    except Exception as err:                                   # noqa: BLE001 - the Bible needs its packages
        if isinstance(err.__cause__, DataError) or "cannot be read here" in str(err):
            pytest.skip(f"{name}'s training data is not installed: {err}")
        raise
    assert rebuilt.to_json() == ix.load(shipped).to_json()


def test_the_shipped_training_verses_are_the_bible_checkpoints_training_split():
    from explorer.data import load_corpus
    from explorer.studies.grounding.concordance import shipped_pairs_path, training_pairs

    meta, _ = read_config(ROOT / "checkpoints" / "bible-es-en")
    dataset = meta["training"]["dataset"]
    assert shipped_pairs_path(dataset).is_file()
    try:
        built = list(load_corpus(dataset).train)
    except DataError as err:
        pytest.skip(f"the Bible's training data is not installed: {err}")
    assert training_pairs(dataset) == built
