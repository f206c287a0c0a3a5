"""The showcase recorded in card.json (explorer.evaluation.showcase.to_card/from_card): used only
for the weights and test pairs it was computed on, and every shipped checkpoint's record is the
rule's own answer (so the app opens on the same sentence whether it reads the card or computes)."""
import pytest

from explorer.data.files import read_tsv
from explorer.evaluation.showcase import RECORD_PAIRS, Showcase, best_translated, from_card, to_card
from explorer.files.names import TEST_SPLIT
from explorer.store.checkpoint import load_checkpoint
from explorer.store.run_paths import shipped_root

PAIRS = [("", "x"), ("uno", "one"), ("dos", ""), ("tres", "three")]


def test_the_record_is_used_only_for_its_weights_and_pairs():
    card = {"showcase": to_card(Showcase(index=3, chrf=90.0, translation="three"), PAIRS, "abc")}
    assert from_card(card, PAIRS, "abc") == (True, 3)
    assert from_card(card, PAIRS, "other") == (False, None)                     # retrained weights
    assert from_card(card, PAIRS[:3] + [("tres", "3")], "abc") == (False, None)  # edited test.tsv
    assert from_card({"showcase": to_card(None, PAIRS, "abc")}, PAIRS, "abc") == (True, None)


@pytest.mark.parametrize("card", [None, [], {"showcase": 1}, {"showcase": {"index": "3"}},
                                  {"showcase": {**to_card(None, PAIRS, "abc"), "index": 99}},
                                  {"showcase": {**to_card(None, PAIRS, "abc"), "index": True}}])
def test_a_damaged_record_is_ignored(card):
    assert from_card(card, PAIRS, "abc") == (False, None)


@pytest.mark.parametrize("name", sorted(p.name for p in shipped_root().iterdir() if (p / TEST_SPLIT).is_file()))
def test_shipped_records_match_the_rule(name):
    import torch

    torch.set_num_threads(1)
    ckpt = load_checkpoint(shipped_root() / name)
    pairs = [(p.src, p.tgt) for p in read_tsv(str(ckpt.path / TEST_SPLIT))[:RECORD_PAIRS]]
    found = best_translated(ckpt.model, ckpt.tokenizer, pairs)
    assert from_card(ckpt.card, pairs, ckpt.sha256) == (True, found.index if found else None)
