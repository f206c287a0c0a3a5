"""AppTest of the Architecture page: Figure 1 for the chosen model, and each block's real numbers.

Every block can be chosen and shows its own figure; the worked attention shown (scores, weights,
the context) equals the captured tensors of an independent teacher-forced forward over the same
translation; parameter counts add up to the model's; the block, layer, head and token are in the
URL; a tiny model with Marian's options (pre-norm, swish, unscaled embeddings) runs too; hostile
input gives messages, never a traceback.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from explorer.config import DecodeConfig
from explorer.decoding import attention_trace, translate
from explorer.inspection.trace import attention_kind
from explorer.model import Transformer
from explorer.plots.architecture import BLOCKS, SELECTED, block_name, flow_order
from explorer.store.checkpoint import load_checkpoint, save_checkpoint
from support.app_support import (chart, checkpoint, checkpoint_params, has_chart, info_for, no_exception,  # noqa: F401
                                 only_a_broken_checkpoint, open_app, texts)
from support.numerics import float32_atol, model_atol, scale

PAGE = "webapp/pages/architecture.py"
FIGURES = {"src_embed": ["arch_embed"], "tgt_embed": ["arch_embed"], "enc_attn": ["arch_attn", "arch_heads"],
           "dec_attn": ["arch_attn", "arch_heads"], "cross_attn": ["arch_attn", "arch_heads"],
           "enc_norm": ["arch_norms", "arch_ln"], "dec_norm": ["arch_norms", "arch_ln"],
           "enc_ffn": ["arch_ffn", "arch_ffn_zero"], "dec_ffn": ["arch_ffn", "arch_ffn_zero"],
           "generator": ["arch_next"]}
OTHER_FIGURES = {k for keys in FIGURES.values() for k in keys}


def expected_trace(path, text):
    ckpt = load_checkpoint(path)
    result = translate(ckpt.model, ckpt.tokenizer, text, DecodeConfig(strategy="beam", beam_size=5, n_best=5))
    return ckpt, attention_trace(ckpt.model, ckpt.tokenizer, result.src_ids, result.best.ids)


def frame(at, column: str):
    """The dataframe on the page that has `column`."""
    found = [d.value for d in at.dataframe if column in d.value.columns]
    assert found, f"no table with {column!r}: {[list(d.value.columns) for d in at.dataframe]}"
    return found[0]


def clean(at) -> None:
    no_exception(at)
    assert not at.error, texts(at.error)


def every_block_shows_its_own_figures(at, norm_first: bool = False) -> None:
    for block, keys in FIGURES.items():
        at.radio(key="arch_block").set_value(block).run()
        clean(at)
        assert at.query_params["block"] == block
        for key in keys:
            assert has_chart(at, key), (block, key)
        for key in OTHER_FIGURES - set(keys):
            assert not has_chart(at, key), (block, key)
        diagram = chart(at, "arch_diagram")
        outlined = [s for s in diagram["layout"]["shapes"] if s.get("line", {}).get("color") == SELECTED]
        assert outlined, block
        assert block_name(block, norm_first) in texts(at.subheader)


@pytest.mark.parametrize("ckpt_path", checkpoint_params())
def test_every_block_on_the_shipped_checkpoint(ckpt_path):
    info, text = info_for(ckpt_path)
    at = open_app(info.name, PAGE, text=text)
    clean(at)
    assert at.radio(key="arch_block").value == "enc_attn"                      # the default block
    every_block_shows_its_own_figures(at)


@pytest.mark.parametrize("ckpt_path", checkpoint_params())
@pytest.mark.parametrize("kind, block", [("encoder", "enc_attn"), ("decoder", "dec_attn"), ("cross", "cross_attn")])
def test_the_worked_attention_is_the_captured_one(ckpt_path, kind, block):
    info, text = info_for(ckpt_path)
    ckpt, trace = expected_trace(info.path, text)
    layer, head, token = ckpt.config.n_decoder_layers, 2, 3
    at = open_app(info.name, PAGE, text=text, query={"block": block, "layer": layer, "head": head, "token": token})
    clean(at)
    assert (at.radio(key="arch_layer").value, at.radio(key="arch_head").value) == (layer, head)   # from the URL
    assert at.selectbox(key="arch_token").value == token
    q = token - 1
    scores = trace.attention(kind, layer - 1, "scores")[0, head - 1, q]       # [k]
    weights = trace.attention(kind, layer - 1, "weights")[0, head - 1, q]     # [k]
    context = trace[attention_kind(kind).capture_name(layer - 1, "context")][0, head - 1, q]   # [dh]
    table = frame(at, "score = q·k / √d_k")
    shown = table["score = q·k / √d_k"].to_numpy(dtype=float)
    open_ = np.isfinite(scores)
    # the page's forward and its float64 worked example against this forward: within model_atol
    atol = model_atol(ckpt.model, scores, context, vocab=False)
    assert np.allclose(shown[open_], scores[open_], atol=atol, rtol=0) and np.all(np.isnan(shown[~open_]))
    d_k = ckpt.config.d_model // ckpt.config.n_heads
    assert np.allclose(table["q·k"].to_numpy(dtype=float)[open_] / math.sqrt(d_k), scores[open_], atol=atol, rtol=0)
    assert np.allclose(table["weight = softmax"].to_numpy(dtype=float), weights, atol=atol, rtol=0)
    assert table["masked"].tolist() == (~open_).tolist()
    ctx = frame(at, "Σ weight·v = context")["Σ weight·v = context"].to_numpy(dtype=float)
    assert np.allclose(ctx, context[:len(ctx)], atol=atol, rtol=0)
    assert f"\\sqrt{{d_k}} = {math.sqrt(d_k):.4g}" in " ".join(str(e.value) for e in at.latex)


@pytest.mark.parametrize("ckpt_path", checkpoint_params())
def test_parameter_counts_add_up_beside_the_paper(ckpt_path):
    info, text = info_for(ckpt_path)
    at = open_app(info.name, PAGE, text=text)
    clean(at)
    ckpt = load_checkpoint(info.path)
    parts = frame(at, "part")
    assert int(parts["parameters"].sum()) == ckpt.model.num_parameters()
    assert int(frame(at, "share")["parameters"].sum()) == ckpt.model.num_parameters()
    paper = frame(at, "Table 3 says")
    assert paper["model"].tolist()[1:] == ["paper base", "paper big"]
    assert paper["parameters"].tolist() == [ckpt.model.num_parameters(), 63_082_496, 214_245_376]
    assert paper["Table 3 says"].tolist()[1:] == ["65M", "213M"]


@pytest.mark.parametrize("ckpt_path", checkpoint_params())
def test_embedding_ffn_norm_and_generator_numbers(ckpt_path):
    info, text = info_for(ckpt_path)
    ckpt, trace = expected_trace(info.path, text)
    at = open_app(info.name, PAGE, text=text, query={"block": "tgt_embed", "token": 2})
    clean(at)
    out = frame(at, "= sum")["= sum"].to_numpy(dtype=float)
    embedded = trace["decoder.embed.out"][0, 1]
    assert np.allclose(out, embedded[:len(out)], atol=model_atol(ckpt.model, embedded, vocab=False), rtol=0)
    at.radio(key="arch_block").set_value("enc_ffn").run()
    clean(at)
    hidden = trace["encoder.layers.0.ffn.hidden"][0, 1]
    assert f"{int((hidden == 0).sum())} of {ckpt.config.d_ff}" in texts(at.markdown).replace("*", "")
    at.radio(key="arch_block").set_value("generator").run()
    clean(at)
    probs = frame(at, "probability")["probability"].to_numpy(dtype=float)
    logits = torch.from_numpy(trace["generator.logits"][0, 1]).double()
    # the page's float32 log-softmax against float64: the normaliser's sum of V terms within the largest
    # logit / T, plus the logits' own rounding in the page's forward (model_atol)
    def atol(t):
        return float32_atol(scale(logits / t) + 1.0, len(logits) + 1) + model_atol(ckpt.model, logits, vocab=False)
    assert np.allclose(probs, torch.topk(torch.softmax(logits, -1), len(probs)).values.numpy(), atol=atol(1.0), rtol=0)
    at.slider(key="arch_temp").set_value(0.5).run()
    clean(at)
    sharper = frame(at, "probability")["probability"].to_numpy(dtype=float)
    assert np.allclose(sharper, torch.topk(torch.softmax(logits / 0.5, -1), len(probs)).values.numpy(), atol=atol(0.5),
                       rtol=0)
    assert sharper[0] >= probs[0]


def test_a_tiny_model_with_marians_options(checkpoint, tmp_path, monkeypatch):
    info, text = checkpoint
    real = load_checkpoint(info.path, device="cpu")
    cfg = replace(real.config, d_model=32, n_heads=2, d_ff=64, n_encoder_layers=1, n_decoder_layers=2, max_len=64,
                  activation="swish", pe_layout="halves", scale_embeddings=False, norm_first=True,
                  final_logits_bias=True)
    torch.manual_seed(0)
    model = Transformer(cfg).eval()
    save_checkpoint(tmp_path / "runs" / "tiny" / "checkpoints" / "step_000001", model, real.tokenizer,
                    meta={"name": "tiny-marian", "src_lang": real.meta.get("src_lang"),
                          "tgt_lang": real.meta.get("tgt_lang"), "training": {"step": 1}})
    monkeypatch.setenv("EXPLORER_CHECKPOINT_ROOTS", str(tmp_path / "runs"))
    at = open_app("tiny-marian", PAGE, text=text)
    clean(at)
    every_block_shows_its_own_figures(at, norm_first=True)
    notes = " ".join(a["text"] for a in chart(at, "arch_diagram")["layout"]["annotations"])
    assert "1×" in notes and "2×" in notes and "Feed Forward (swish)" in notes and "final LayerNorm" in notes
    assert "**pre-norm**" in texts(at.markdown)                    # the Learn panel says this model's order
    assert "Decoder LayerNorm (before each sublayer; + a final one)" in at.radio(key="arch_block").options
    at.radio(key="arch_block").set_value("dec_ffn").run()
    assert "swish" in texts(at.markdown) and "near 0" in texts(at.markdown)
    at.radio(key="arch_block").set_value("src_embed").run()
    assert "does not scale its embeddings" in texts(at.markdown)
    at.radio(key="arch_block").set_value("cross_attn").run()
    assert "pre-norm" in texts(at.markdown)
    assert int(frame(at, "part")["parameters"].sum()) == model.num_parameters()
    assert walk(at) == flow_order(norm_first=True)              # its LayerNorms before their sublayers


def walk(at) -> list[str]:
    """The blocks Next passes, from the first (reached by Previous), with the step each says it is."""
    while not at.button(key="arch_step_back").disabled:
        at.button(key="arch_step_back").click().run()
    seen = []
    while True:
        clean(at)
        seen.append(at.radio(key="arch_block").value)
        assert f"Step {len(seen)} of " in texts(at.caption) and at.query_params["block"] == seen[-1]
        if at.button(key="arch_step_on").disabled:
            return seen
        at.button(key="arch_step_on").click().run()


def test_previous_and_next_walk_the_blocks_in_the_order_the_data_passes_them(checkpoint):
    """A lecture steps through Figure 1 block by block: source embedding, each encoder sublayer, then the
    decoder's, to the softmax; a pre-norm model's LayerNorm comes before the attention it feeds."""
    info, _ = checkpoint
    post = walk(open_app(info.name, PAGE, text="luz"))
    assert post == list(BLOCKS) and post.index("enc_attn") < post.index("enc_norm")
    assert sorted(post) == sorted(BLOCKS) and post[0] == "src_embed" and post[-1] == "generator"
    pre = flow_order(norm_first=True)
    assert sorted(pre) == sorted(BLOCKS) and pre.index("enc_norm") < pre.index("enc_attn") < pre.index("enc_ffn")
    assert pre.index("dec_norm") < pre.index("dec_attn") < pre.index("cross_attn") < pre.index("generator")


def test_hostile_input(checkpoint):
    info, _ = checkpoint
    at = open_app(info.name, PAGE, text="")
    clean(at)
    assert "Type a sentence" in texts(at.info) and has_chart(at, "arch_diagram")
    assert frame(at, "part") is not None                                        # parameters need no sentence
    for text in ("<script>alert(1)</script> $x$ **b** ☃ 😀 \u200b\x00", "luz " * 1500):
        at = open_app(info.name, PAGE, text=text)
        no_exception(at)
        for block in ("cross_attn", "generator", "dec_norm"):
            at.radio(key="arch_block").set_value(block).run()
            no_exception(at)
    at = open_app(info.name, PAGE, text="luz", query={"block": "nonsense", "layer": "99", "head": "-1", "token": "x"})
    clean(at)
    layers = at.radio(key="arch_layer")                                     # layer=99: clamped to the last one
    assert at.radio(key="arch_block").value == "enc_attn" and layers.value == len(layers.options)


def test_no_checkpoint_still_draws_the_diagram(checkpoint, tmp_path, monkeypatch):
    at = open_app(only_a_broken_checkpoint(tmp_path, monkeypatch), PAGE, text="luz")
    no_exception(at)
    assert has_chart(at, "arch_diagram") and "Pick a working checkpoint" in texts(at.info)
    notes = " ".join(a["text"] for a in chart(at, "arch_diagram")["layout"]["annotations"])
    assert "6×" in notes                                                        # the paper's base model


def test_every_figure_saves_in_the_chosen_format_under_the_checkpoints_name(checkpoint, monkeypatch):
    """One export convention (webapp/downloads.py): every block's figures, and the diagram, save in the
    sidebar's format under a file name that starts with the checkpoint's."""
    from support.exports import figure_exports, recorded_downloads

    info, text = checkpoint
    recorded_downloads(monkeypatch)
    at = open_app(info.name, PAGE, text=text, session={"figure_format": "svg"})
    for block in FIGURES:
        at.radio(key="arch_block").set_value(block).run()
        clean(at)
        exports = figure_exports(at)
        assert set(FIGURES[block]) | {"arch_diagram"} <= set(exports), (block, sorted(exports))
        for key, options in exports.items():
            assert options.get("format") == "svg" and options["filename"].startswith(info.name), (block, key, options)
