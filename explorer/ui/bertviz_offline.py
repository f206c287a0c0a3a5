"""bertviz's head view and model view as one self-contained HTML document (no internet needed).

bertviz's own HTML loads require.js, d3 and jQuery from cdnjs, so an offline browser shows a blank
box, and it writes its parameters into a <script> with plain json.dumps, so a token such as
`</script><img src=x onerror=...>` would end the script and run. Here:

* d3 5.7.0 and jQuery 3.7.1 (slim) are vendored under static/ and inlined; bertviz's
  `require.config` (the CDN paths) is dropped and require.js is replaced by a shim that hands the
  inlined libraries to bertviz's callback. XML-namespace strings in d3 are written `http:\\/\\/...`
  (the same string in JavaScript), so the document holds no `http(s)://` at all.
* Parameters are JSON with `<`, `>` and `&` written as \\u escapes, which cannot close a script,
  and bertviz draws tokens with d3's .text() (never as HTML).
* Weights are rounded to 3 decimals through float64 (float32 would print 0.08299999684...), and a
  size limit falls back to one layer, then refuses, instead of shipping tens of MB to the browser.

Pure functions of numpy arrays: no streamlit here (the page embeds the result with
st.components.v1.html). The bertviz JS files are vendored unmodified (Apache-2.0).
"""
from __future__ import annotations

import functools
import json
import re
import uuid
from pathlib import Path
from typing import Sequence

import numpy as np

STATIC = Path(__file__).resolve().parent / "static"
VIEWS = {"head": "head_view.js", "model": "model_view.js"}
KIND_NAMES = {"encoder": "Encoder", "decoder": "Decoder", "cross": "Cross"}
MAX_VALUES = 400_000            # attention values per document (about 2.5 MB of JSON)
_SHIM = "var requirejs = function (deps, callback) { callback(window.jQuery, window.d3); };"


class ViewTooLarge(ValueError):
    """The attention data would make a document too big for the browser."""


@functools.lru_cache(maxsize=None)
def _asset(name: str) -> str:
    return (STATIC / name).read_text(encoding="utf-8")


def _no_urls(js: str) -> str:
    """Write URL-looking strings so no `http(s)://` remains, without changing what the code does:
    in string literals `http:\\/\\/` is the same string; in // comments the scheme is dropped."""
    js = re.sub(r"""(["'])(https?)://""", r"\1\2:\\/\\/", js)
    return re.sub(r"(//[^\n]*?)https?://", r"\1", js)


@functools.lru_cache(maxsize=None)
def _libraries() -> str:
    return _no_urls(_asset("d3.min.js")) + "\n" + _no_urls(_asset("jquery.slim.min.js"))


def _view_js(view: str) -> str:
    """bertviz's view script from `requirejs([...], function ($, d3) {` on (the CDN config dropped)."""
    js = _asset(VIEWS[view])
    start = js.index("requirejs([")
    return _no_urls(js[start:])


def safe_json(value) -> str:
    """JSON that can sit inside <script>: no `<`, `>` or `&` survive (they become \\u escapes)."""
    text = json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def pretty_tokens(tokens: Sequence[str]) -> list[str]:
    """Like bertviz's prettify: sentencepiece's ▁ becomes a space."""
    return [str(t).replace("▁", " ") for t in tokens]


def _rounded(weights: np.ndarray) -> list:
    return np.round(np.asarray(weights, dtype=np.float64), 3).tolist()


def attention_data(stacks: dict[str, np.ndarray], src_tokens: Sequence[str], tgt_tokens: Sequence[str],
                   layers: Sequence[int]) -> list[dict]:
    """bertviz's `attention` parameter: one entry per kind present, each [layers, H, q, k]."""
    sides = {"encoder": (src_tokens, src_tokens), "decoder": (tgt_tokens, tgt_tokens),
             "cross": (tgt_tokens, src_tokens)}
    data = []
    for kind in ("encoder", "decoder", "cross"):
        if kind not in stacks:
            continue
        stack = np.asarray(stacks[kind])                                      # [L, H, q, k]
        left, right = sides[kind]
        if stack.ndim != 4 or stack.shape[2:] != (len(left), len(right)):
            raise ValueError(f"{kind} attention of shape {stack.shape} does not match "
                             f"{len(left)} x {len(right)} tokens")
        data.append({"name": KIND_NAMES[kind], "attn": _rounded(stack[list(layers)]),
                     "left_text": pretty_tokens(left), "right_text": pretty_tokens(right)})
    if not data:
        raise ValueError("no attention given")
    return data


def choose_layers(stacks: dict[str, np.ndarray], layer: int, max_values: int = MAX_VALUES) -> tuple[list[int], str]:
    """All layers when the data fits, else just `layer`; (layers, note for the user)."""
    n_layers = min(np.asarray(s).shape[0] for s in stacks.values())
    values = sum(int(np.prod(np.asarray(s).shape[1:])) for s in stacks.values())   # per layer
    note = ""
    if any(np.asarray(s).shape[0] != n_layers for s in stacks.values()):
        note = f"Encoder and decoder have different depths: showing their first {n_layers} layers. "
    if values * n_layers <= max_values:
        return list(range(n_layers)), note
    if values <= max_values:
        layer = min(max(layer, 0), n_layers - 1)
        return [layer], note + f"This sentence is long: showing layer {layer + 1} only (pick another layer above)."
    raise ViewTooLarge(f"{values:,} attention values per layer is too many for the interactive view "
                       f"(limit {max_values:,}); use a shorter sentence or the heatmaps above")


def render(view: str, stacks: dict[str, np.ndarray], src_tokens: Sequence[str], tgt_tokens: Sequence[str],
           layer: int = 0, kind: str = "encoder", max_values: int = MAX_VALUES,
           display_mode: str = "light") -> tuple[str, str]:
    """A complete offline HTML document of bertviz's `view` ("head" or "model"): (html, note).

    stacks maps kind (encoder / decoder / cross) to weights [L, H, q, k]; tgt_tokens are the
    decoder inputs (BOS + output[:-1]), which is what the decoder's query and key positions hold.
    `layer` and `kind` pick what the view opens on.
    """
    if view not in VIEWS:
        raise ValueError(f"view must be one of {sorted(VIEWS)}, not {view!r}")
    layers, note = choose_layers(stacks, layer, max_values)
    data = attention_data(stacks, src_tokens, tgt_tokens, layers)
    root = "bertviz-" + uuid.uuid4().hex
    names = [d["name"] for d in data]
    first = names.index(KIND_NAMES[kind]) if KIND_NAMES.get(kind) in names else 0
    params = {"attention": data, "default_filter": str(first), "root_div_id": root, "include_layers": layers}
    n_heads = len(data[0]["attn"][0])
    if view == "head":
        params.update(layer=layer if layer in layers else layers[0], heads=None)
    else:
        params.update(display_mode=display_mode, include_heads=list(range(n_heads)), total_heads=n_heads)
    options = "".join(f'<option value="{i}"{" selected" if i == first else ""}>{d["name"]}</option>'
                      for i, d in enumerate(data))
    select = f'Attention: <select id="filter">{options}</select>' if len(data) > 1 else ""
    layer_select = 'Layer: <select id="layer"></select> ' if view == "head" else ""
    script = _view_js(view).replace("PYTHON_PARAMS", safe_json(params), 1)
    html = (
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\">"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "script-src 'unsafe-inline'; style-src 'unsafe-inline'\"></head>"
        f"<body style=\"margin:0;background:{'#fff' if display_mode == 'light' else '#000'}\">"
        f"<div id=\"{root}\" style=\"font-family:'Helvetica Neue', Helvetica, Arial, sans-serif;\">"
        f"<span style=\"user-select:none\">{layer_select}{select}</span><div id=\"vis\"></div></div>"
        f"<script>{_libraries()}</script><script>{_SHIM}</script><script>{script}</script>"
        "</body></html>"
    )
    return html, note


def height(view: str, stacks: dict[str, np.ndarray]) -> int:
    """A frame height (px) that fits the view without much empty space."""
    shapes = [np.asarray(s).shape for s in stacks.values()]
    longest = max(max(s[2], s[3]) for s in shapes)
    if view == "head":
        return int(110 + 22.5 * longest)
    n_layers, n_heads = shapes[0][0], shapes[0][1]
    return int(80 + n_layers * (970 / max(n_heads, 1) + 12))
