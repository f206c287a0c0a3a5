"""Activation patching is exact where it claims to be (explorer.studies.patching).

Patching a whole layer of the residual stream (every position) is the other run from there on:
normalised 1 within 1e-6, denoising and noising, every encoder depth and decoder layer; patching
positions whose activations are the same in both runs (the embeddings away from the changed word)
changes nothing: 0 within 1e-6. A batched grid cell equals the same patch made by hand, one run with
one plain edit through the model's own forward. On a tiny post-LN and pre-LN model, a base-size
model and an imported random Marian model; bad pairs are refused with a message.
"""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from explorer.decoding import greedy_search
from explorer.files.places import REPO_ROOT
from explorer.inspection.hooks import intervene
from explorer.studies.common.kept import decoder_outputs, encoder_outputs, kept
from explorer.studies.patching.grids import GRIDS, average, grid_cells, pair_grids
from explorer.studies.patching.pair import make_pair, pair_from_ids
from explorer.studies.patching.runs import Cell, PairRuns
from explorer.studies.patching.swap import WEAK_GAP, suggest_swaps
from explorer.store.checkpoint import load_checkpoint
from explorer.text.encoding import source_ids
from support.layer_models import base_size_model, imported_marian
from support.marian_helpers import TEST_SOURCES
from support.model_helpers import make_model
from support.numerics import logit_difference_atol


def normalised_atol(model, runs) -> float:
    """A normalised patch effect, (LD - LD_corrupt) / (LD_clean - LD_corrupt) with values near 0 or 1, from
    batched rows against one-row runs: four logit differences within logit_difference_atol, over the gap."""
    return 4 * logit_difference_atol(model, runs.ld["clean"], runs.ld["corrupt"]) / abs(runs.difference)


@pytest.fixture(scope="module")
def base():
    return base_size_model()


@pytest.fixture(scope="module")
def marian():
    return imported_marian()


@pytest.fixture(scope="module")
def numbers():
    return load_checkpoint(REPO_ROOT / "checkpoints" / "numbers-en-de")


@pytest.fixture(scope="module")
def bible():
    return load_checkpoint(REPO_ROOT / "checkpoints" / "bible-es-en")


def some_pair(model, src, position, candidates):
    """The first swap of src[position] for a candidate id whose translation differs."""
    for new in candidates:
        corrupt = list(src)
        corrupt[position] = new
        try:
            return pair_from_ids(model, src, corrupt)
        except ValueError:
            continue
    raise AssertionError("no candidate changes the translation")


@pytest.fixture(scope="module", params=["tiny post-LN", "tiny pre-LN", "base", "marian"])
def case(request):
    """(model, a minimal pair of it whose translations differ)."""
    if request.param == "base":
        model, src, candidates = request.getfixturevalue("base"), [17, 4000, 58000, 250, 3], range(100, 58000, 997)
    elif request.param == "marian":
        model, tokenizer = request.getfixturevalue("marian")
        src = source_ids(tokenizer, TEST_SOURCES[1], model.cfg.max_len, model.cfg.special)
        candidates = range(2, model.cfg.src_vocab_size - 1)
    else:
        model, src, candidates = make_model(seed=5, norm_first=request.param == "tiny pre-LN"), [5, 6, 7, 8, 9, 3], range(10, 40)
    return model, some_pair(model, src, 1, candidates)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_a_whole_layer_restores_all_and_unchanged_positions_nothing(case, dtype):
    """Exact in float64 but for the generator's float32 log-softmax; in float32 the batched rows round
    differently from the one-row runs they are normalised by: within normalised_atol either way (a position
    restored by mistake, or not, is off by > 0.1). Every encoder depth: the decoder reads nothing else of the
    source. Of the decoder's layers only the last: the layers after a patched one read the source again
    through cross-attention (so an earlier whole layer restores less than all)."""
    model, pair = case
    model = copy.deepcopy(model).to(dtype) if dtype != torch.float32 else model
    runs = PairRuns(model, pair)
    whole = [Cell(name) for name in encoder_outputs(model)] + [Cell(decoder_outputs(model)[-1])]
    same = [Cell("encoder.embed.out", (s,)) for s in range(len(pair.clean_src)) if s not in pair.changed]
    changed = Cell("encoder.embed.out", tuple(pair.changed))
    tolerance = normalised_atol(model, runs)
    for direction in ("denoise", "noise"):
        np.testing.assert_allclose(runs.normalised(whole, direction), 1.0, atol=tolerance, rtol=0)
        np.testing.assert_allclose(runs.normalised(same, direction), 0.0, atol=tolerance, rtol=0)
        np.testing.assert_allclose(runs.normalised([changed], direction), 1.0, atol=tolerance, rtol=0)


def by_hand(model, pair, cell, direction):
    """One patched run written plainly: keep the source run's tensor, run the other source through
    model.forward with one edit that swaps the patched slice in; the logit difference at the position."""
    start = model.cfg.special.start
    tgt_in = torch.tensor([[start] + pair.prefix])                              # [1, T]
    run, source = ((pair.corrupt_src, pair.clean_src) if direction == "denoise" else
                   (pair.clean_src, pair.corrupt_src))
    with torch.inference_mode():
        with kept(model, [cell.point]) as found:
            model(torch.tensor([source]), tgt_in)
        patch = found[cell.point]

        def edit(x):
            x = x.clone()
            index = list(cell.index) if cell.index is not None else slice(None)
            x[:, index] = patch[:, index]
            return x
        with intervene(model, {cell.point: edit}):
            log_probs = model(torch.tensor([run]), tgt_in)[0, -1]               # [V]
    return float(log_probs[pair.clean_token] - log_probs[pair.corrupt_token])   # the logit difference


def test_batched_cells_equal_the_same_patch_made_by_hand():
    model = make_model(seed=5)
    pair = some_pair(model, [5, 6, 7, 8, 9, 3], 2, range(10, 40))
    runs = PairRuns(model, pair)
    cells = [Cell("encoder.layers.0.resid_post", (2,)), Cell("encoder.layers.1.self_attn.context", (1,)),
             Cell("decoder.layers.0.resid_post", (0,)), Cell("decoder.layers.1.cross_attn.context", (3,)),
             Cell("decoder.layers.0.self_attn.context", None), Cell("encoder.layers.1.resid_post", (0, 4))]
    for direction in ("denoise", "noise"):
        batched = runs.logit_differences(cells, direction)
        plain = [by_hand(model, pair, cell, direction) for cell in cells]
        np.testing.assert_allclose(batched, plain, atol=logit_difference_atol(model, plain), rtol=0)   # other batches


def test_a_clicked_cell_shows_the_patched_runs_translation():
    """Patching all of the last encoder layer translates the corrupted source as the clean one; a
    patch the runs share leaves the corrupted translation; a decoder cell decodes too."""
    model = make_model(seed=5)
    pair = some_pair(model, [5, 6, 7, 8, 9, 3], 2, range(10, 40))
    runs = PairRuns(model, pair)
    last = encoder_outputs(model)[-1]
    assert runs.translation(Cell(last)).best.ids == pair.clean_output
    assert runs.translation(Cell(last), "noise").best.ids == pair.corrupt_output
    assert runs.translation(Cell("encoder.embed.out", (0,))).best.ids == pair.corrupt_output
    patched = runs.translation(Cell("decoder.layers.1.cross_attn.context", (0,))).best.ids
    assert patched[:pair.position] == pair.prefix


def test_grids_have_their_shapes_and_average_over_pairs():
    model = make_model(seed=5)
    pairs = [some_pair(model, [5, 6, 7, 8, 9, 3], 1, range(10, 40)), some_pair(model, [5, 6, 7, 3], 2, range(10, 40))]
    results = [pair_grids(model, p) for p in pairs]
    cfg = model.cfg
    shapes = {"encoder_resid": (cfg.n_encoder_layers + 1, 6), "decoder_resid": (cfg.n_decoder_layers, pairs[0].position + 1),
              "encoder_heads": (cfg.n_encoder_layers, cfg.n_heads), "decoder_heads": (cfg.n_decoder_layers, cfg.n_heads),
              "cross_heads": (cfg.n_decoder_layers, cfg.n_heads), "changed": (cfg.n_encoder_layers + 1, 1)}
    for name in GRIDS:
        assert results[0].grids[name]["denoise"].shape == shapes[name], name
        assert len(grid_cells(model, pairs[0], name)) == shapes[name][0]
    mean = average(results)
    assert mean["encoder_resid"]["denoise"]["count"] == [2, 2, 2, 2, 1, 1]
    expected = (results[0].grids["encoder_resid"]["denoise"][:, 0] + results[1].grids["encoder_resid"]["denoise"][:, 0]) / 2
    np.testing.assert_allclose(np.array(mean["encoder_resid"]["denoise"]["mean"])[:, 0], expected)
    np.testing.assert_allclose(np.array(mean["encoder_resid"]["denoise"]["mean"])[:, 5],
                               results[0].grids["encoder_resid"]["denoise"][:, 5])


def test_bad_pairs_are_refused_with_a_message(numbers):
    model, tokenizer = numbers.model, numbers.tokenizer
    with pytest.raises(ValueError, match="same number of pieces.*4.*3"):
        make_pair(model, tokenizer, "twenty one thousand", "twenty thousand")
    with pytest.raises(ValueError, match="are the same pieces"):
        make_pair(model, tokenizer, "twenty one", "twenty  one")
    with pytest.raises(ValueError, match="clean source cannot be used: empty input"):
        make_pair(model, tokenizer, " ", "one")
    alike = same_translation_pair(make_model())
    with pytest.raises(ValueError, match="translate to the same output"):
        pair_from_ids(make_model(), *alike)
    with pytest.raises(ValueError, match="cannot be patched"):
        PairRuns(model, make_pair(model, tokenizer, "one", "two")).normalised([Cell("decoder.embed.out")])
    with pytest.raises(ValueError, match=r"indices must be in \[0, 3\]"):
        PairRuns(model, make_pair(model, tokenizer, "one", "two")).normalised([Cell("decoder.layers.0.cross_attn.context", (4,))])


def same_translation_pair(model):
    """Two one-id-apart sources this tiny random model translates alike (it has few favourite outputs)."""
    sources = [[5, 6, k, 3] for k in range(10, 40)]
    seen = {}
    for src, decoded in zip(sources, greedy_search(model, sources)):
        key = tuple(decoded.best.ids)
        if key in seen:
            return seen[key], src
        seen[key] = src
    raise AssertionError("every source translates differently")


def test_the_number_word_moves_the_translation_at_its_own_position(numbers):
    """On the shipped numbers model: patching the changed word's embedding restores all; the whole
    patch of each depth's changed position is at least most of it."""
    model, tokenizer = numbers.model, numbers.tokenizer
    pair = make_pair(model, tokenizer, "twenty one thousand", "twenty two thousand")
    assert pair.changed == [1] and tokenizer.id_to_piece(pair.clean_token, "tgt") == "\u2581ein"
    result = pair_grids(model, pair)
    atol = normalised_atol(model, PairRuns(model, pair))
    np.testing.assert_allclose(result.grids["changed"]["denoise"][0], 1.0, atol=atol, rtol=0)
    assert (result.grids["changed"]["denoise"] > 0.9).all()


def test_suggested_swaps_keep_the_length_and_change_the_translation(numbers):
    model, tokenizer = numbers.model, numbers.tokenizer
    swaps = suggest_swaps(model, tokenizer, "twenty one thousand four hundred", n=4)
    assert swaps and len({s.word for s in swaps}) > 1
    for swap in swaps:
        pair = make_pair(model, tokenizer, "twenty one thousand four hundred", swap.corrupt)   # raises if unusable
        assert len(pair.changed) == 1
    assert suggest_swaps(model, tokenizer, "") == []
    with pytest.raises(ValueError, match="n must be in"):
        suggest_swaps(model, tokenizer, "one", n=0)


@pytest.mark.parametrize("shipped", ["numbers", "bible"])
def test_suggested_swaps_say_their_runs_gap_and_the_clear_ones_come_first(shipped, request):
    """The Causes page opened on bible-es-en's own sentence with "estás -> estáis", whose runs part by 0.04
    (under WEAK_GAP), and then warned that its grids read noise. Each swap's gap is the difference the pair's
    runs divide by (PairRuns, one source a run), and those at WEAK_GAP or more come first."""
    ckpt = request.getfixturevalue(shipped)
    model, tokenizer = ckpt.model, ckpt.tokenizer
    text = {"numbers": "twenty one thousand four hundred",
            "bible": "Y llamó Jehová Dios al hombre, y le dijo: ¿Dónde estás tú?"}[shipped]
    swaps = suggest_swaps(model, tokenizer, text, n=8)
    assert len(swaps) >= 2
    for swap in swaps:
        runs = PairRuns(model, make_pair(model, tokenizer, text, swap.corrupt))
        assert swap.gap == pytest.approx(runs.difference, abs=2 * logit_difference_atol(model, *runs.ld.values()))
    clear = [swap.gap >= WEAK_GAP for swap in swaps]
    assert clear == sorted(clear, reverse=True) and clear[0], [(s.old, s.new, s.gap) for s in swaps]
