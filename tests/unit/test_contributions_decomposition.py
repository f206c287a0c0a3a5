"""ALTI+'s decomposition is exact: for every attention block of a tiny, a base-size and an imported
random Marian model, post-LN and pre-LN, the transformed vectors plus the bias terms rebuild the block's
output as the model computed it (read here by plain torch hooks on the residual blocks, not through the
analysis's own capture), within 1e-5 in float64; every contribution row and every rolled-out row is a
distribution (>= 0, sums to 1 within 1e-6); a decoder row never draws on later target tokens."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from explorer.config import preset
from explorer.studies.contributions import sentence_contributions
from explorer.studies.contributions.blocks import forced_pass
from explorer.studies.contributions.decomposition import contributions, normalise, row_chunks, transformed_vectors
from explorer.model import Transformer
from support.base_model import MARIAN_OPTIONS, VOCAB_SIZE
from support.model_helpers import make_model, one_thread  # noqa: F401 (a fixture)
from support.numerics import model_atol

SRC, OUT = [5, 9, 12, 7, 30, 3], [11, 4, 17, 8, 3]


def block_outputs(model, src, out) -> dict[str, torch.Tensor]:
    """Each attention block's output [T, d] as the model's own Residual modules return it, keyed by the
    attention module's path (encoder.layers.0.self_attn ...)."""
    found, handles = {}, []
    pairs = [(f"encoder.layers.{l}.self_attn", layer.attn_block) for l, layer in enumerate(model.encoder.layers)]
    for l, layer in enumerate(model.decoder.layers):
        pairs += [(f"decoder.layers.{l}.self_attn", layer.self_block), (f"decoder.layers.{l}.cross_attn", layer.cross_block)]
    for name, module in pairs:
        handles.append(module.register_forward_hook(lambda m, i, o, name=name: found.__setitem__(name, o[0].detach())))
    try:
        start = model.cfg.special.start
        with torch.no_grad():
            model(torch.tensor([src]), torch.tensor([[start] + out[:-1]]))
    finally:
        for h in handles:
            h.remove()
    return found


def check_exact(model, src, out) -> int:
    """Every block rebuilt within 1e-5, also when built a few rows at a time; returns the blocks checked."""
    model = copy.deepcopy(model).double()
    real = block_outputs(model, src, out)
    forced = forced_pass(model, src, out)
    blocks = forced.encoder + forced.decoder_self + forced.cross
    assert len(blocks) == len(real) == model.cfg.n_encoder_layers + 2 * model.cfg.n_decoder_layers
    for block in blocks:
        vectors, bias = transformed_vectors(block)                                  # [T, K', d], [T, d]
        assert vectors.dtype == torch.float64
        assert vectors.shape[1] == block.n_inputs
        rebuilt = vectors.sum(dim=1) + bias                                         # [T, d]
        assert (rebuilt - real[block.name]).abs().max().item() < 1e-5, block.name
        if block not in (forced.encoder[0], forced.decoder_self[0], forced.cross[0]):
            continue
        pieces = []
        for rows in row_chunks(block, budget=1):                                    # one row at a time
            v, b = transformed_vectors(block, rows)
            pieces.append(v.sum(dim=1) + b)
        assert (torch.cat(pieces) - rebuilt).abs().max().item() < 1e-12
    return len(blocks)


def check_distributions(model, src, out):
    sc = sentence_contributions(model, src, out)
    for name in ("encoder", "decoder_self", "cross", "rollout"):
        m = getattr(sc, name)
        assert (m >= 0).all(), name
        assert np.abs(m.sum(axis=-1) - 1).max() < 1e-6, name
    assert np.abs(sc.encoder_rollout.sum(axis=-1) - 1).max() < 1e-6
    assert np.allclose(np.triu(sc.decoder_self, k=1), 0)                            # no later target token
    s = len(src)
    assert np.allclose(np.triu(sc.rollout[:, :, s:], k=1), 0)
    assert ((sc.source_share > 0) & (sc.source_share < 1)).all()
    return sc


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_tiny_model_blocks_rebuild_exactly_and_rows_are_distributions(norm_first):
    model = make_model(norm_first=norm_first)
    assert check_exact(model, SRC, OUT) == 6
    check_distributions(model, SRC, OUT)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_base_size_model_blocks_rebuild_exactly(norm_first):
    """The paper's base sizes (6+6 layers, 8 heads, d 512) with Marian's options; a small vocabulary
    (the vocabulary is no part of any attention block; the 58k one is measured by the benchmark)."""
    torch.manual_seed(0)
    cfg = preset("base", src_vocab_size=64, tgt_vocab_size=64, dropout=0.0, norm_first=norm_first, **MARIAN_OPTIONS)
    model = Transformer(cfg).eval()
    with torch.no_grad():                                                           # trained norms are not 1 / 0
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.uniform_(0.5, 1.5)
                module.bias.normal_(0.0, 0.1)
    assert VOCAB_SIZE > 64
    assert check_exact(model, SRC + [40, 41] * 5, OUT + [50] * 9) == 18
    check_distributions(model, SRC, OUT)


def test_imported_marian_blocks_rebuild_exactly(tmp_path):
    pytest.importorskip("transformers")
    from explorer.interop.hf_import import import_marian
    from explorer.store.checkpoint import load_checkpoint
    from support.marian_helpers import random_marian

    random_marian(tmp_path / "hf")
    ck = load_checkpoint(import_marian(str(tmp_path / "hf"), tmp_path / "ours", dtype=torch.float32))
    cfg = ck.model.cfg
    assert (cfg.activation, cfg.pe_layout, cfg.final_logits_bias, cfg.norm_first) == ("swish", "halves", True, False)
    eos, pad = cfg.eos_id, cfg.pad_id
    src, out = [5, 9, 12, 7, eos], [11, 4, 17, 8, eos]
    assert cfg.decoder_start_id == pad and pad not in src + out
    assert check_exact(ck.model, src, out) == 3 * cfg.n_decoder_layers
    sc = check_distributions(ck.model, src, out)
    # the log-probs are the model's own, logits bias included
    with torch.no_grad():
        lp = ck.model(torch.tensor([src]), torch.tensor([[pad] + out[:-1]]))[0]
    assert np.allclose(sc.token_logprobs, [float(lp[i, t]) for i, t in enumerate(out)], atol=1e-5)


def test_imported_m2m100_blocks_rebuild_exactly(tmp_path):
    """Pre-LN with a final LayerNorm on each stack, fairseq's positions, a decoder starting with </s> and a
    forced target-language tag: an imported random NLLB model's blocks rebuild within 1e-5 as well."""
    pytest.importorskip("transformers")
    from explorer.interop.hf_import import import_m2m100
    from explorer.store.checkpoint import load_checkpoint
    from support.m2m100_helpers import random_m2m100

    random_m2m100(tmp_path / "hf", kind="nllb", d_model=48, heads=6, ffn=96, layers=3, seed=1)
    ck = load_checkpoint(import_m2m100(str(tmp_path / "hf"), tmp_path / "ours", dtype=torch.float32,
                                       src_lang="spa_Latn", tgt_lang="fra_Latn"))
    cfg = ck.model.cfg
    assert (cfg.norm_first, cfg.pe_frequencies, cfg.decoder_start_id) == (True, "fairseq", cfg.eos_id)
    tok = ck.tokenizer
    src = tok.encode("la casa es grande", "src") + [cfg.eos_id]
    out = tok.forced_target + [11, 4, 17, 8, cfg.eos_id]
    assert check_exact(ck.model, src, out) == cfg.n_encoder_layers + 2 * cfg.n_decoder_layers
    check_distributions(ck.model, src, out)


def test_a_later_target_token_changes_no_earlier_row():
    model = make_model()
    first = sentence_contributions(model, SRC, OUT)
    second = sentence_contributions(model, SRC, OUT[:3] + [25, 3])
    # the earlier rows' inputs are the same, in the same shapes; model_atol covers a kernel that adds in
    # another order from call to call (a leak from the later token moves a row by > 1e-2)
    atol = model_atol(model, first.rollout, vocab=False)
    np.testing.assert_allclose(first.rollout[:, :4], second.rollout[:, :4], atol=atol, rtol=0)
    assert not np.allclose(first.rollout[:, 4], second.rollout[:, 4])


def test_a_float32_model_gives_float64_rows_that_match_its_float64_copy():
    model = make_model()
    low = sentence_contributions(model, SRC, OUT)
    high = sentence_contributions(copy.deepcopy(model).double(), SRC, OUT)
    assert low.rollout.dtype == np.float64
    atol = model_atol(model, low.rollout, vocab=False)           # the float32 forward's rounding
    assert np.abs(low.rollout - high.rollout).max() < atol
    assert np.abs(low.source_share - high.source_share).max() < atol


def test_rows_with_nothing_left_after_the_clip_become_even_over_what_they_see():
    closeness = torch.tensor([[1.0, -2.0, 3.0], [-1.0, -1.0, -5.0]], dtype=torch.float64)
    seen = torch.tensor([[True, True, True], [True, True, False]])
    rows, empty = normalise(closeness, seen)
    assert empty == 1
    assert torch.allclose(rows, torch.tensor([[0.25, 0.0, 0.75], [0.5, 0.5, 0.0]], dtype=torch.float64))


def test_bad_ids_are_refused_in_words():
    model = make_model()
    pad, start = model.cfg.pad_id, model.cfg.decoder_start_id
    for src, out, words in (([], OUT, "source has no tokens"), (SRC, [], "output has no tokens"),
                            ([500], OUT, "source ids must be in"), (SRC, [pad, 3], "pad or start id"),
                            (SRC, [start, 3], "pad or start id"), (SRC * 10, OUT, "max_len")):
        with pytest.raises(ValueError, match=words):
            sentence_contributions(model, src, out)


def test_contributions_of_a_block_do_not_depend_on_how_its_rows_are_cut():
    block = forced_pass(make_model(), SRC, OUT).cross[1]
    whole, _ = contributions(block)
    cut, _ = contributions(block, budget=1)
    assert torch.allclose(whole, cut, atol=1e-14)
