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


def test_the_command_refuses_what_is_no_checkpoint_or_has_a_damaged_test_file_in_one_line(tmp_path, capsys):
    import shutil

    from explorer.evaluation.showcase import main
    (tmp_path / "empty").mkdir()
    (tmp_path / "afile").write_text("x")
    copy = tmp_path / "copy"
    shutil.copytree(shipped_root() / "numbers-en-de", copy)
    (copy / TEST_SPLIT).write_bytes(bytes(range(128, 256)) * 8)          # not UTF-8
    for path, said in ((tmp_path / "empty", "file missing"), (tmp_path / "afile", "not found"),
                       (copy, "not valid UTF-8")):
        assert main([str(path)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and said in err[0], err
    good = tmp_path / "good"
    shutil.copytree(shipped_root() / "numbers-en-de", good)
    assert main([str(tmp_path / "empty"), str(good)]) == 2           # the bad one stops no other
    assert capsys.readouterr().out.startswith(f"{good}: pair ")
