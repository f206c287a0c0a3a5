"""One look for one quantity: every page's figures take their colour scales from explorer.plots.style."""
from __future__ import annotations

import numpy as np

from explorer.inspection.attention_stats import word_alignment
from explorer.plots import attention, beams, positions, style


def scale(fig):
    """The colour scale a figure's first heatmap is drawn in (plotly expands names into stops)."""
    return tuple(map(tuple, fig.layout.coloraxis.colorscale or fig.data[0].colorscale))


def test_each_quantity_has_one_colour_scale_across_pages():
    rng = np.random.default_rng(0)
    w = rng.dirichlet(np.ones(4), size=(2, 3, 3))                                      # [L, H, q, k]
    tokens = list("abc"), list("wxyz")
    weights = [attention.head_heatmap(w[0, 0], *tokens, "t"),                         # Attention page
               style.head_grid(w, "t"),                                                # Attention, Checkpoints
               beams.step_attention_figure(w[0, :, -1], tokens[1], "t"),              # Beam page
               beams.prefix_attention_figure(w[0].mean(0), tokens[1], tokens[0], "t"),
               attention.alignment_figure(word_alignment(w[0, 0], ["▁w", "▁x", "▁y", "▁z"], ["▁a", "▁b", "▁c"]),
                                          "t")]
    signed = [attention.head_heatmap(w[0, 0] - 0.25, *tokens, "t", quantity="difference"),
              attention.head_heatmap(np.log(w[0, 0]), *tokens, "t", quantity="scores"),
              style.head_grid(w - 0.25, "t", diverging=True),                        # Checkpoints' B − A
              positions.pe_heatmap(rng.normal(size=(5, 8)))]
    sequential = [attention.stat_heatmap(rng.random((2, 3)), "entropy"), positions.similarity_heatmap(np.eye(4))]
    for group, name in ((weights, style.WEIGHTS_SCALE), (signed, style.SIGNED_SCALE),
                        (sequential, style.SEQUENTIAL_SCALE)):
        expected = scale(style.head_grid(w, "t").update_layout(coloraxis_colorscale=name))
        assert {scale(fig) for fig in group} == {expected}, name


def test_signed_ranges_are_symmetric_and_never_empty():
    assert style.signed_range(np.array([1.0, -3.0, np.inf])) == 3.0
    assert style.signed_range(np.zeros(3)) == style.signed_range(np.array([-np.inf])) == 1.0
    assert style.label("<s>") == "&lt;s&gt;" and style.token_axis(["<s>", "a"])["ticktext"] == ["&lt;s&gt;", "a"]


def test_every_token_label_is_escaped_exactly_once():
    """A token with < or & shows as itself: escaped once for plotly (which decodes it), never twice
    (the user would read `&lt;unk&gt;`), never raw (`<unk>` would vanish)."""
    import json

    from explorer.plots import alignment, architecture, forcing, training, translation
    toks = ["<unk>", "a&b", "▁x"]
    n = len(toks)
    rng = np.random.default_rng(0)
    w = rng.dirichlet(np.ones(n), size=n)                                               # [n, n]
    lp = [-0.1, -1.0, -2.0]
    figures = {
        "links": alignment.links_figure(toks, toks, {(0, 0)}, {(0, 0), (1, 1)}, {(0, 0), (2, 1)}, w),
        "why": alignment.why_figure(toks, {"IG": np.array([0.1, -0.5, 0.2])}, toks[0]),
        "head": attention.head_heatmap(w, toks, toks, "t"),
        "delta": attention.logprob_delta_figure(toks, lp, lp[::-1], "t"),
        "prefix": beams.prefix_attention_figure(w, toks, toks, "t"),
        "step": beams.step_attention_figure(w[None].repeat(2, 0)[:, -1], toks, "t"),
        "mask": forcing.causal_mask_figure(toks),
        "rows": forcing.rows_figure(toks, toks, lp),
        "probs": translation.token_probs_figure(toks, lp),
        "norms": positions.norm_bars(toks, np.ones(n), np.ones(n)),
        "logprob": training.logprob_figure(toks, lp, lp),
        "keys": architecture.attention_figure(toks, np.log(w[-1]), w[-1], "t"),
    }
    for name, fig in figures.items():
        shown = json.dumps(json.loads(fig.to_json()), ensure_ascii=False)          # every string the figure holds
        assert "&amp;" not in shown.replace("a&amp;b", ""), name                     # nothing escaped twice
        assert "&lt;unk&gt;" in shown and "<unk>" not in shown, name
