"""The fast paths give the numbers of the paths before them: explorer.runtime.split's share and gather;
the head lab and the alignment scorecard computed by two processes (here two threads standing in
for torchrun's processes, exchanging through the same gather) against one, JSON number for number;
single-head removals checked in one pass (explorer.studies.heads.verify) against decoded step by step, on a
tiny model and on the shipped ones. The real torchrun run is tests/integration/test_analysis_split.py."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from explorer.studies.align.gold import GoldPair
from explorer.studies.align.scorecard import AlignSettings, run_scorecard
from explorer.studies.common.command import checkpoint_and_held_out
from explorer.files.places import REPO_ROOT
from explorer.studies.heads.importance import HeadRemover, all_heads
from explorer.studies.heads.job import LabSettings, run_head_lab
from explorer.studies.common.context import RunContext
from explorer.studies.common.sentences import SentenceSet, build_sentences
from explorer.runtime.clock import TIMING_KEYS
from explorer.runtime.split import ONE, Split
from tests.support.decoding_helpers import StandInTokenizer, random_model, toy_pairs
from support.model_helpers import IdTokenizer
from support.waiting import STALL_S, join


@dataclass(frozen=True)
class ThreadSplit(Split):
    """A Split whose processes are threads of this one: gather() posts this rank's results on a
    shared board and waits for the others', as torch.distributed's all_gather_object does."""

    board: dict = field(default_factory=dict, compare=False)
    barrier: Any = field(default=None, compare=False)

    def gather(self, results: dict[int, Any], n: int) -> list:
        self.barrier.wait()
        self.board[(self.rank, "round")] = self.board.get((self.rank, "round"), 0) + 1
        key = ("results", self.board[(self.rank, "round")])
        self.board.setdefault(key, {}).update(results)
        self.barrier.wait()
        merged = self.board[key]
        assert sorted(merged) == list(range(n)), "every item computed once"
        return [merged[i] for i in range(n)]


def run_split(world: int, job) -> list:
    """job(split) on `world` threads, each with its rank; their return values by rank."""
    board, barrier = {}, threading.Barrier(world, timeout=STALL_S)     # a hang fails, not waits
    out: list = [None] * world
    errors: list = []

    def one(rank: int) -> None:
        try:
            out[rank] = job(ThreadSplit(rank, world, board, barrier))
        except BaseException as err:                      # shown by the assert below
            errors.append(err)
            barrier.abort()
    threads = [threading.Thread(target=one, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        join(t, "a split's thread")
    assert not errors, errors
    return out


def numbers(result: dict) -> dict:
    return {k: v for k, v in result.items() if k not in TIMING_KEYS}


def test_each_item_has_one_owner_and_every_process_gets_all_results_in_order():
    assert [list(Split(r, 3).mine(8)) for r in range(3)] == [[0, 3, 6], [1, 4, 7], [2, 5]]
    computed = []
    results = run_split(3, lambda split: split.map(list(range(8)), lambda x: computed.append(x) or x * x))
    assert results == [[x * x for x in range(8)]] * 3
    assert sorted(computed) == list(range(8))                   # each item once, by one process
    assert ONE.map([1, 2], lambda x: -x) == [-1, -2] and not ONE.active and ONE.is_main



def test_the_head_lab_split_over_two_processes_gives_the_same_json(model):
    gen = torch.Generator().manual_seed(3)
    pairs = [SimpleNamespace(src=" ".join(str(int(t)) for t in torch.randint(4, 40, (n,), generator=gen)),
                             tgt=" ".join(str(int(t)) for t in torch.randint(4, 40, (n - 1,), generator=gen)))
             for n in (3, 5, 4, 6, 2, 7, 5)]
    settings = LabSettings(sentences=7, seeds=0, points=1, batch_size=2)
    one = run_head_lab(model, IdTokenizer(), pairs, settings)
    split = run_split(2, lambda s: run_head_lab(model, IdTokenizer(), pairs, settings, context=RunContext(split=s)))
    assert numbers(split[0]) == numbers(one) and numbers(split[1]) == numbers(one)
    assert numbers(run_head_lab(model, IdTokenizer(), pairs, settings, reuse=False)) == numbers(one)
    assert split[0]["processes"] == 2 and one["processes"] == 1


def test_the_scorecard_split_over_two_processes_gives_the_same_json():
    model, tok = random_model(), StandInTokenizer()
    letters = "abcdefghijklmnopqrst"
    gold = []
    for src, tgt in toy_pairs(5, torch.Generator().manual_seed(11), "reverse"):
        s, t = [letters[i - 4] for i in src], [letters[i - 4] for i in tgt]
        gold.append(GoldPair(s, t, frozenset((i, len(s) - 1 - i) for i in range(min(len(s), len(t))))))
    settings = AlignSettings(pairs=5, attribution_pairs=3, ig_steps=4, eflomal=False)
    one = run_scorecard(model, tok, gold, settings)
    split = run_split(2, lambda s: run_scorecard(model, tok, gold, settings, context=RunContext(split=s)))
    assert numbers(split[0]) == numbers(one)
    assert one["integrated_gradients"]["pairs"] == 3 and one["rows"]


def removal_texts(model, tokenizer, sents, heads, reuse: bool) -> tuple[list[list[str]], HeadRemover]:
    remover = HeadRemover(model, tokenizer, sents, reuse=reuse)
    remover.scores(())
    return [remover.texts([h]) for h in heads], remover


def test_checked_outputs_equal_decoded_ones_where_removals_change_them(model):
    """A random tiny model: removing a head changes many outputs, so checks fail and decode again."""
    gen = torch.Generator().manual_seed(5)
    src = [torch.randint(4, 40, (n,), generator=gen).tolist() + [3] for n in (3, 6, 4, 8, 5)]
    sents = SentenceSet(src=src, out=[s[:2] + [3] for s in src], refs=["x"] * 5, forced="reference")
    heads = all_heads(model)[::2]
    checked, remover = removal_texts(model, IdTokenizer(), sents, heads, reuse=True)
    assert checked == removal_texts(model, IdTokenizer(), sents, heads, reuse=False)[0]
    assert remover.checked == len(heads) * 5 and 0 < remover.redecoded < remover.checked


@pytest.mark.parametrize("name, n, every", [("numbers-en-de", 3, 2), ("bible-es-en", 2, 6)])
def test_checked_outputs_equal_decoded_ones_on_the_shipped_models(name, n, every):
    ckpt, pairs = checkpoint_and_held_out(str(REPO_ROOT / "checkpoints" / name), "cpu")
    sents = build_sentences(ckpt.model, ckpt.tokenizer, pairs, n)
    heads = all_heads(ckpt.model)[::every]
    checked, remover = removal_texts(ckpt.model, ckpt.tokenizer, sents, heads, reuse=True)
    assert checked == removal_texts(ckpt.model, ckpt.tokenizer, sents, heads, reuse=False)[0]
    assert remover.redecoded < remover.checked               # some outputs are shown unchanged, not decoded


def _letter_pairs(n: int, seed: int) -> list[SimpleNamespace]:
    tok = StandInTokenizer()
    return [SimpleNamespace(src=tok.decode(src), tgt=tok.decode(tgt))
            for src, tgt in toy_pairs(n, torch.Generator().manual_seed(seed), "reverse")]


def test_the_faithfulness_scorecard_split_over_two_processes_gives_the_same_json():
    from explorer.studies.contributions.faithfulness import FaithfulnessSettings, run_faithfulness

    model, tok, pairs = random_model(), StandInTokenizer(), _letter_pairs(5, 5)
    settings = FaithfulnessSettings(methods=("alti", "attention-mean", "grad-x-input"), seeds=2, ig_steps=4)
    one = run_faithfulness(model, tok, pairs, 5, settings)
    split = run_split(2, lambda s: run_faithfulness(model, tok, pairs, 5, settings, context=RunContext(split=s)))
    assert numbers(split[0]) == numbers(one) and numbers(split[1]) == numbers(one)
    assert split[0]["processes"] == 2 and one["processes"] == 1 and len(one["per_sentence"]["alti"]["sufficiency"]) == 5


def test_the_beam_curve_and_exact_search_split_over_two_processes_give_the_same_json():
    from explorer.studies.contrastive.job import SearchSettings, run_search

    def same(result: dict) -> dict:        # a row's and an exact search's seconds say how long, not what
        result = numbers(result)
        result["beam_curve"] = [{k: v for k, v in r.items() if k != "seconds"} for r in result["beam_curve"]]
        result["exact"] = [{k: v for k, v in e.items() if k != "seconds"} for e in result["exact"]]
        return result

    model, tok, pairs = random_model(), StandInTokenizer(), _letter_pairs(5, 9)
    settings = SearchSettings(beams=(1, 3), sentences=5, penalties=("none",), exact=True, exact_nodes=100,
                              exact_seconds=60)
    one = run_search(model, tok, pairs, settings)
    split = run_split(2, lambda s: run_search(model, tok, pairs, settings, context=RunContext(split=s)))
    assert same(split[0]) == same(one) and same(split[1]) == same(one)
    assert split[0]["processes"] == 2 and len(one["exact"]) == 5 and len(one["beam_curve"]) == 2
