"""The analyses on a multilingual model: each analyses the translation the model makes, its target-language
tag forced first, and keeps its exact properties there.

A small random M2M100 (100 languages), imported with the pair es -> en and bound to es -> fr here, so a
study that reads the pair the import chose, or none, is caught. For each analysis the output it decodes
or teacher-forces starts with the fr tag and is what explorer.decoding.translate gives for the pair; the
DecoderLens's last depth is the model, patching a whole encoder output restores everything, a compact
beam equals the library's, exact search is never beaten by a beam, a clamp to a feature's own value
changes nothing, the head lab's one-pass check agrees with decoding again.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer.config import DecodeConfig
from explorer.decoding.teacher import score_targets
from explorer.decoding.translate import translate
from explorer.model.rounding import model_atol
from explorer.studies.common.sentences import GREEDY, build_sentences, greedy_texts
from explorer.text.encoding import output_ids, source_ids
from support.m2m100_helpers import TEST_SOURCES, imported_es_en
from support.numerics import score_atol

pytest.importorskip("transformers")
SRC, TGT = "es", "fr"                   # not the pair the model was imported with (es -> en)
WORDS = ["la de el en", "el no es la", "no es la de"]   # whole-word pieces: one-word swaps exist


class Pair:
    def __init__(self, src: str, tgt: str):
        self.src, self.tgt = src, tgt


@pytest.fixture(scope="module")
def m2m(tmp_path_factory):
    """(the imported checkpoint, its tokenizer bound to es -> fr, the fr tag, the import's folder)."""
    from explorer.store.checkpoint import load_checkpoint

    root = tmp_path_factory.mktemp("m2m100-analyses")
    ck = load_checkpoint(imported_es_en(root))
    tok = ck.tokenizer.with_languages(SRC, TGT)
    return ck, tok, tok.forced_target[0], root


def src_of(ck, tok, text: str) -> list[int]:
    return source_ids(tok, text, ck.model.cfg.max_len, ck.model.cfg.special)


def translated(ck, tok, text: str, cfg: DecodeConfig = GREEDY, **kw):
    return translate(ck.model, tok, text, cfg, **kw)


def without_eos(hyp) -> list[int]:
    return hyp.ids[:-1] if hyp.finished else list(hyp.ids)


# ---- DecoderLens ---------------------------------------------------------------------------------
def test_the_decoder_lens_writes_the_tag_first_at_every_depth_and_its_last_is_the_model(m2m):
    from explorer.studies.lens.decoder_lens import LENS_DECODING, lens_translations

    ck, tok, tag, _ = m2m
    for text in TEST_SOURCES[:3]:
        rows = lens_translations(ck.model, tok, text)
        assert [r.ids[0] for r in rows] == [tag] * len(rows)
        want = translated(ck, tok, text, LENS_DECODING).best
        assert rows[-1].ids == want.ids
        np.testing.assert_allclose(rows[-1].token_logprobs, want.token_logprobs, rtol=0,
                                   atol=model_atol(ck.model, torch.tensor(want.token_logprobs)))


def test_the_lens_job_scores_the_tagged_translations(m2m):
    from explorer.studies.lens.job import LensSettings, run_lens

    ck, tok, _, _ = m2m
    pairs = [Pair(s, "la maison") for s in TEST_SOURCES[:3]]
    result = run_lens(ck.model, tok, pairs, LensSettings(sentences=3, batch_size=2))
    assert result["decoder_lens"][-1]["translations"] == [translated(ck, tok, p.src).text for p in pairs]


# ---- patching --------------------------------------------------------------------------------------
def test_swaps_and_a_minimal_pair_are_the_tagged_translations_and_patching_everything_restores_all(m2m):
    from explorer.studies.common.kept import encoder_outputs
    from explorer.studies.patching.pair import PAIR_DECODING, make_pair
    from explorer.studies.patching.runs import Cell, PairRuns
    from explorer.studies.patching.swap import suggest_swaps

    ck, tok, tag, _ = m2m
    found = 0
    for text in WORDS:
        clean = translated(ck, tok, text, PAIR_DECODING).best.ids
        for swap in suggest_swaps(ck.model, tok, text, 3):
            corrupt = translated(ck, tok, swap.corrupt, PAIR_DECODING).best.ids
            assert corrupt != clean                       # "changes the translation": the tagged one
            pair = make_pair(ck.model, tok, text, swap.corrupt)
            assert (pair.clean_output, pair.corrupt_output) == (clean, corrupt)
            assert pair.prefix[:1] == [tag] and pair.given == 1
            runs = PairRuns(ck.model, pair)
            last = Cell(encoder_outputs(ck.model)[-1])
            assert runs.normalised([last], "denoise")[0] == pytest.approx(1.0, abs=1e-4)
            assert runs.normalised([last], "noise")[0] == pytest.approx(1.0, abs=1e-4)
            assert runs.translation(last, "denoise").best.ids == clean
            assert runs.translation(last, "noise").best.ids == corrupt
            found += 1
    assert found >= 3


def test_the_patching_job_describes_the_tagged_translations(m2m):
    from explorer.studies.patching.job import run_patching
    from explorer.studies.patching.swap import suggest_swaps

    ck, tok, _, _ = m2m
    text = WORDS[0]
    corrupt = suggest_swaps(ck.model, tok, text, 1)[0].corrupt
    result = run_patching(ck.model, tok, [(text, corrupt)])
    described = result["pairs"][0]
    assert described["clean_translation"] == translated(ck, tok, text).text
    assert described["corrupt_translation"] == translated(ck, tok, corrupt).text
    assert described["prefix_pieces"][0] == f"__{TGT}__"


# ---- search: the beam curve, compact beam, exact search, the reference's fall -------------------------
def test_the_beam_curve_decodes_the_tagged_search_and_compact_beam_equals_the_library(m2m):
    from explorer.studies.contrastive.curve import Penalty, beam_config, decode_set

    ck, tok, tag, _ = m2m
    src = [src_of(ck, tok, s) for s in TEST_SOURCES]
    for beam in (1, 2, 4):
        for penalty in (Penalty(), Penalty("gnmt", 0.6)):
            cfg = beam_config(beam, penalty)
            hyps = decode_set(ck.model, src, cfg, workers=1, given=tok.forced_target)
            library = [translated(ck, tok, s, cfg).best for s in TEST_SOURCES]
            assert [h.ids for h in hyps] == [h.ids for h in library]
            assert all(h.ids[0] == tag and h.token_logprobs[0] == 0.0 for h in hyps)
            for h, want in zip(hyps, library):
                assert h.score == pytest.approx(want.score, abs=score_atol(ck.model, want.token_logprobs))


def test_exact_search_searches_the_tagged_outputs_and_no_beam_beats_it(m2m):
    from explorer.studies.contrastive.curve import Penalty, beam_config
    from explorer.studies.contrastive.exact import TOLERANCE, exact_search

    ck, tok, tag, _ = m2m
    cfg = beam_config(1, Penalty())
    for text in TEST_SOURCES[:3]:
        beams = [translated(ck, tok, text, beam_config(b, Penalty())).best for b in (1, 2, 4)]
        found = exact_search(ck.model, src_of(ck, tok, text), cfg, initial=max(beams, key=lambda h: h.score),
                             max_nodes=5000, given=tok.forced_target)
        assert found.ids[0] == tag
        assert all(found.score >= b.score - TOLERANCE for b in beams)


def test_the_search_job_reports_the_tagged_translations(m2m):
    from explorer.studies.contrastive.curve import Penalty, beam_config
    from explorer.studies.contrastive.job import SearchSettings, run_search

    ck, tok, _, _ = m2m
    pairs = [Pair(s, "la maison") for s in TEST_SOURCES[:3]]
    result = run_search(ck.model, tok, pairs, SearchSettings(beams=(1, 2), sentences=3, penalties=("none",),
                                                              exact=True, exact_nodes=2000))
    for row in result["beam_curve"]:
        cfg = beam_config(row["beam"], Penalty())
        assert row["translations"] == [translated(ck, tok, p.src, cfg).text for p in pairs]
    assert all(e["proven"] for e in result["exact"])


def test_the_reference_fall_follows_the_search_from_the_tag(m2m):
    from explorer.studies.contrastive.fall import MODEL_ERROR, NO_ERROR, SEARCH_ERROR, reference_fall

    ck, tok, tag, _ = m2m
    cfg = DecodeConfig(strategy="beam", beam_size=3, n_best=3, length_penalty="none", max_len_a=1.5, max_len_b=10)
    found = next(f for f in (translated(ck, tok, t, cfg, trace=True) for t in TEST_SOURCES + WORDS) if f.best.finished)
    own = reference_fall(ck.model, found.src_ids, found.best.ids, cfg, trace=found.beam_trace, output=found.best)
    assert own.verdict == NO_ERROR and own.output == found.best.ids
    reference = output_ids(tok, "la maison est grande", ck.model.cfg.max_len, ck.model.cfg.special)
    assert reference[0] == tag
    fall = reference_fall(ck.model, found.src_ids, reference, cfg, given=tok.forced_target)
    assert fall.output == found.best.ids and fall.verdict in (SEARCH_ERROR, MODEL_ERROR)
    forced = score_targets(ck.model, [found.src_ids], [reference], cfg)[0]
    assert fall.reference_score == pytest.approx(forced.score - forced.token_logprobs[0], abs=1e-4)   # the tag: 0
    assert (fall.verdict == SEARCH_ERROR) == (fall.reference_normalized > fall.output_normalized + 1e-4)
    assert fall == reference_fall(ck.model, found.src_ids, reference, cfg, trace=found.beam_trace, output=found.best)


def test_a_foil_word_is_the_words_piece_not_the_tag(m2m):
    from explorer.studies.contrastive.foils import foil_from_word

    ck, tok, tag, _ = m2m
    foil = foil_from_word(ck.model, tok, "la", chosen=tag)
    assert foil.token != tag and tok.id_to_piece(foil.token) == "\u2581la"


# ---- graphs, steering, the head lab ------------------------------------------------------------------
def test_a_graphs_question_reads_the_tagged_greedy_translation(m2m):
    from explorer.studies.graphs.step import question

    ck, tok, tag, _ = m2m
    special = ck.model.cfg.special
    text = TEST_SOURCES[1]
    q = question(ck.model, tok, text, 2, foil="la")
    best = translated(ck, tok, text).best
    assert q.output == (without_eos(best) + [special.eos])[:ck.model.cfg.max_len]
    assert list(q.step.prefix) == [special.start, tag, best.ids[1]]
    assert q.step.foil != tag


def test_steering_translates_with_the_tag_and_a_clamp_to_its_own_value_changes_nothing(m2m):
    from explorer.studies.features import sites, steering
    from explorer.studies.features.transcoder import TopKTranscoder
    from explorer.decoding.translate import forced_target

    ck, tok, tag, _ = m2m
    d = ck.model.cfg.d_model
    torch.manual_seed(0)
    tc = TopKTranscoder(d, 16, d, 4)
    with torch.no_grad():
        tc.W_enc.normal_()
        tc.W_dec.normal_()
    site = "encoder.layers.0.ffn"
    text = TEST_SOURCES[1]
    best = translated(ck, tok, text).best
    src, out = src_of(ck, tok, text), without_eos(best) + [ck.model.cfg.special.eos]
    x = sites.site_inputs(ck.model, site, torch.tensor([src]), None)[0]      # [S, d]
    z = tc.encode(x).detach()                                                # [S, m]
    position, feature = divmod(int(z.argmax()), z.shape[1])
    same = steering.steer(ck.model, tc, site, feature, float(z[position, feature]), src, out, [position],
                          given=forced_target(tok))
    assert same.out_ids == without_eos(best) and same.out_ids[0] == tag
    assert np.array_equal(same.before, same.after)


def test_the_head_labs_one_pass_check_and_decoding_again_agree_with_the_tag(m2m):
    from explorer.studies.heads.importance import HeadRemover

    ck, tok, tag, _ = m2m
    pairs = [Pair(s, "la maison") for s in TEST_SOURCES]
    sents = build_sentences(ck.model, tok, pairs, len(pairs), forced="output")
    assert all(out[0] == tag for out in sents.out)
    fast, slow = HeadRemover(ck.model, tok, sents), HeadRemover(ck.model, tok, sents, reuse=False)
    assert fast.texts([]) == slow.texts([]) == greedy_texts(ck.model, tok, sents)
    for head in (("encoder", 0, 1), ("decoder", 1, 2), ("cross", 1, 0)):
        assert fast.texts([head]) == slow.texts([head])
    assert fast.checked > 0


# ---- a reference's score and the Training vs inference page ---------------------------------------------
def test_teacher_forcing_the_translation_scores_the_tag_as_decoding_does(m2m):
    from explorer.decoding.side_by_side import side_by_side
    from explorer.decoding.translate import score_text

    ck, tok, tag, _ = m2m
    for text in TEST_SOURCES[:3]:
        best = translated(ck, tok, text).best
        pair = side_by_side(ck.model, tok, text, cfg=GREEDY)
        assert pair.forced.outputs == pair.steps.outputs == best.ids and best.ids[0] == tag
        np.testing.assert_allclose(pair.forced.logprobs, pair.steps.logprobs, rtol=0,
                                   atol=model_atol(ck.model, torch.tensor(pair.steps.logprobs)))
        assert pair.forced.logprobs[0] == 0.0 and pair.forced.top_ids[0] == tag
        scored = score_text(ck.model, tok, text, best.text, GREEDY)
        assert scored.token_logprobs[0] == 0.0 and scored.ids[0] == tag
