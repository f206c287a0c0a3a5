"""Aligners on real models: a copy model's attention is diagonal, value norms are the head's own
output, gradient x input matches finite differences, integrated gradients are complete on the
shipped model, the scorecard job writes whole results or none, eflomal runs."""
import functools
import threading

import numpy as np
import pytest
import torch

from explorer.studies.align.attention import attention_matrices, cross_weights, value_vectors
from explorer.studies.align.attribution import log_prob_function, piece_attributions
from explorer.studies.align.gold import GoldPair, read_gold
from explorer.studies.align.job import SCORECARD
from explorer.studies.common.context import RunContext
from explorer.studies.align.pairs import Unusable, model_pair, model_pairs
from explorer.studies.align.scorecard import AlignSettings, run_scorecard
from explorer.runtime.progress import Cancelled
from explorer.files.places import REPO_ROOT
from tests.support.decoding_helpers import StandInTokenizer, random_model, toy_pairs, train_reverse_model
from tests.support.numerics import float32_atol, model_atol

LETTERS = "abcdefghijklmnopqrst"


@functools.lru_cache(maxsize=1)
def copy_model():
    torch.set_num_threads(1)
    return train_reverse_model(steps=200, task="copy")


def copy_gold(n: int = 24) -> list[GoldPair]:
    out = []
    for src, _ in toy_pairs(n, torch.Generator().manual_seed(11), "copy"):
        words = [LETTERS[i - 4] for i in src]
        out.append(GoldPair(words, list(words), frozenset((i, i) for i in range(len(words)))))
    return out


def test_pieces_map_to_gold_words():
    model, tok = random_model(), StandInTokenizer()
    mp = model_pair(model, tok, GoldPair(["a", "b", "c"], ["c", "a"], frozenset()))
    assert mp.src_ids == [4, 5, 6, 3] and mp.out_ids == [6, 4, 3]
    assert mp.src_groups == [[0], [1], [2]] and mp.tgt_groups == [[0], [1]]
    long = GoldPair(["a"] * 60, ["b"], frozenset())
    with pytest.raises(Unusable, match="max_len"):
        model_pair(model, tok, long)
    usable, skipped = model_pairs(model, tok, [long, GoldPair(["a"], ["b"], frozenset())])
    assert len(usable) == 1 and skipped == [0]


def test_copy_model_diagonal_attention_has_aer_near_zero():
    result = run_scorecard(copy_model(), StandInTokenizer(), copy_gold(), AlignSettings(attribution_pairs=0,
                                                                                         eflomal=False))
    best = {r["aligner"]: r for r in result["rows"]}
    assert best["cross-attention (naive): best head"]["aer"] < 0.05
    # and the grid is a real measurement: some head of this model aligns badly
    grid = np.array(result["grid"]["attention"]["naive"])
    assert grid.min() < 0.05 < grid.max()


def test_value_norm_vectors_are_what_each_head_adds():
    """sum_j alpha_hj f_h(x_j) must equal the head's context times its slice of W_O (the captured context)."""
    model, tok = random_model(seed=3), StandInTokenizer()
    mp = model_pair(model, tok, GoldPair(list("abcde"), list("edcb"), frozenset()))
    weights = cross_weights(model, mp)                                          # [L, H, T, S]
    vectors = value_vectors(model, mp)                                          # [L, H, S, d]
    from explorer.decoding.teacher import capture_forward
    trace, _ = capture_forward(model, mp.src_ids, mp.out_ids, "decoder.layers.*.cross_attn.context")
    for layer, block in enumerate(model.decoder.layers):
        attn = block.cross_attn
        context = trace[f"decoder.layers.{layer}.cross_attn.context"][0]        # [H, T, dh]
        w_o = attn.w_o.weight.detach().numpy().reshape(-1, attn.n_heads, attn.d_head)  # [d, H, dh]
        expected = np.einsum("htk,dhk->htd", context, w_o)                      # [H, T, d]
        got = np.einsum("hts,hsd->htd", weights[layer], vectors[layer])         # [H, T, d]
        # the same products grouped two ways: sums of S + d_head terms within their sums of |terms|
        size = max(np.einsum("htk,dhk->htd", np.abs(context), np.abs(w_o)).max(),
                   np.einsum("hts,hsd->htd", np.abs(weights[layer]), np.abs(vectors[layer])).max())
        atol = float32_atol(size, weights.shape[-1] + attn.d_head)
        np.testing.assert_allclose(got, expected, rtol=0, atol=atol)


def test_shift_reads_the_row_one_step_later():
    model, tok = random_model(seed=4), StandInTokenizer()
    mp = model_pair(model, tok, GoldPair(list("abc"), list("cab"), frozenset()))
    weights = cross_weights(model, mp)
    found = dict(attention_matrices(model, mp))
    atol = model_atol(model, weights, vocab=False)      # two forwards; a row off by one differs by > 0.1
    np.testing.assert_allclose(found[("attention", "naive", 1, 2)], weights[1, 2, :3, :3], rtol=0, atol=atol)
    np.testing.assert_allclose(found[("attention", "shift", 1, 2)], weights[1, 2, 1:4, :3], rtol=0, atol=atol)


def test_gradient_x_input_equals_finite_differences():
    model, tok = random_model(seed=5, d_model=16, n_heads=2, d_ff=32), StandInTokenizer()
    model = model.double()
    mp = model_pair(model, tok, GoldPair(list("abc"), list("cb"), frozenset()))
    attr = piece_attributions(model, mp, "grad-x-input")                       # [T, S]
    forward, tokens = log_prob_function(model, mp)
    eps, e = 3e-3, tokens[0]        # the log-probs come out in float32 (the generator casts), so not smaller
    expected = np.zeros_like(attr)
    every = torch.arange(attr.shape[0])                                         # each target position
    with torch.no_grad():
        for s in range(e.shape[0]):
            for i in range(e.shape[1]):
                up, down = e.clone(), e.clone()
                up[s, i] += eps
                down[s, i] -= eps
                rows = len(every)
                grad = (forward(up.expand(rows, -1, -1), every)
                        - forward(down.expand(rows, -1, -1), every)) / (2 * eps)   # [T]
                expected[:, s] += (grad * e[s, i]).numpy()
    np.testing.assert_allclose(attr, expected, rtol=1e-3, atol=5e-4)   # float32 rounding of F over 2 eps


def test_integrated_gradients_complete_on_the_shipped_model():
    from explorer.store.checkpoint import load_checkpoint
    ckpt = load_checkpoint(REPO_ROOT / "checkpoints" / "bible-es-en")
    gold = read_gold(REPO_ROOT / "gold" / "bible-es-en.align")
    mp = model_pair(ckpt.model, ckpt.tokenizer, gold[1])
    targets = [0, 2, 5]
    attr, delta = piece_attributions(ckpt.model, mp, "integrated-gradients", steps=128, with_delta=True,
                                     targets=targets)
    forward, tokens = log_prob_function(ckpt.model, mp)
    at, three = torch.tensor(targets), tokens.expand(len(targets), -1, -1)
    with torch.no_grad():
        change = (forward(three, at) - forward(torch.zeros_like(three), at)).numpy()   # F(x) - F(0)
    assert np.all(np.abs(change) > 0.5)                       # a real difference to explain
    np.testing.assert_allclose(attr.sum(axis=1), change, rtol=0.01)
    # captum's delta is that gap: its F(x) and F(0) and these, from other batch shapes (|delta| here is
    # 5e-3 to 7e-2, so a delta of the other sign is off by more than this bound)
    np.testing.assert_allclose(attr.sum(axis=1) - delta, change, rtol=0, atol=2 * model_atol(ckpt.model, change))


def test_scorecard_job_writes_whole_result_or_nothing(tmp_path):
    model, tok = train_reverse_model(steps=60), StandInTokenizer()
    gold = copy_gold(6)
    out = tmp_path / "a.json"
    result = SCORECARD.to_file(out, model, tok, gold, AlignSettings(attribution_pairs=2, ig_steps=4, eflomal=False))
    import json
    data = json.loads(out.read_text())
    assert data["gold"]["pairs"] == 6 and {r["aligner"] for r in data["rows"]} >= {"grad-x-input",
                                                                                      "integrated-gradients"}
    assert np.array(data["grid"]["value-norm"]["shift"]).shape == (2, 4)
    assert all(0 <= r["aer"] <= 1 for r in result["rows"])
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        SCORECARD.to_file(tmp_path / "b.json", model, tok, gold, AlignSettings(eflomal=False),
                          context=RunContext(cancel=cancel))
    stop_later = iter([True, True, False])
    with pytest.raises(Cancelled):
        SCORECARD.to_file(tmp_path / "c.json", model, tok, gold, AlignSettings(eflomal=False),
                          context=RunContext(progress=lambda stage, done, total: next(stop_later, False)))
    assert not (tmp_path / "b.json").exists() and not (tmp_path / "c.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]


def test_eflomal_aligns_numbers_from_their_corpus():
    from explorer.studies.align.metrics import score_links
    from explorer.studies.align.numbers_gold import numbers_gold
    from explorer.studies.align.statistical import eflomal_links
    from explorer.data.numbers import build_numbers
    corpus = build_numbers(train_size=3000, dev_size=10, test_size=60)
    gold = numbers_gold(int(p.ref[2:]) for p in corpus.test)
    links = eflomal_links(gold, corpus.train)
    sym = score_links(gold, links["grow-diag-final-and"])
    assert sym.aer < 0.3 and len(links["forward"]) == len(gold)


def test_the_command_says_what_is_wrong_instead_of_a_traceback(tmp_path, capsys):
    from explorer.studies.align.__main__ import main
    numbers = str(REPO_ROOT / "checkpoints" / "numbers-en-de")
    unreadable = tmp_path / "long.align"
    unreadable.write_text(" ".join(["palabra"] * 300) + " ||| word ||| 0-0\n", encoding="utf-8")
    cases = [([numbers, "--gold", str(tmp_path / "missing.align")], "cannot be read"),
             ([numbers, "--gold", str(unreadable), "--no-eflomal"], "no gold pair can be read"),
             ([numbers, "--pairs", "0"], "pairs >= 1"),
             ([numbers, "--pairs", "2", "--attribution-pairs", "0", "--no-eflomal", "--out",
               str(tmp_path / "not-a-dir.txt" / "x.json")], "error")]
    (tmp_path / "not-a-dir.txt").write_text("x")
    for argv, message in cases:
        assert main(argv) == 2, argv
        assert message in capsys.readouterr().err


def test_frequent_pairs_are_the_translations_counted():
    """eflomal over a corpus whose words translate one for one: the most frequent linked pairs are the
    translations, each counted about as often as it occurs, the most frequent first."""
    import random
    from types import SimpleNamespace

    from explorer.studies.align.statistical import frequent_pairs

    lexicon = {"casa": "house", "perro": "dog", "rojo": "red", "grande": "big", "agua": "water", "pan": "bread"}
    rng, pairs, seen = random.Random(0), [], {}
    for i in range(600):
        chosen = list(dict.fromkeys((["casa"] if i % 3 == 0 else []) + rng.sample(sorted(lexicon), rng.randint(2, 4))))
        pairs.append(SimpleNamespace(src=" ".join(chosen).capitalize() + ".",
                                     tgt=" ".join(lexicon[w] for w in chosen) + "."))
        for w in chosen:
            seen[w] = seen.get(w, 0) + 1
    found = frequent_pairs(pairs, 6)
    assert {(s, t) for s, t, _ in found} == set(lexicon.items())
    assert [n for *_, n in found] == sorted((n for *_, n in found), reverse=True)
    for s, _, n in found:
        assert 0.9 * seen[s] <= n <= seen[s]
    assert found[0][:2] == ("casa", "house")                         # in every third pair besides its draws
    assert frequent_pairs([], 5) == []
