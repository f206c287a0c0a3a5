"""bertviz's head view and model view as one self-contained HTML document (no internet needed).

bertviz's own HTML loads require.js, d3 and jQuery from cdnjs, so an offline browser shows a blank
box, and it writes its parameters into a <script> with plain json.dumps, so a token such as
`</script><img src=x onerror=...>` would end the script and run. Here:

* The scripts come from installed packages (dependencies in pyproject.toml, nothing copied into
  this repository): bertviz's head_view.js / model_view.js from `bertviz`, d3 5.7.0 (the version
  bertviz asks cdnjs for) from `mpld3` (mpld3/js/d3.v5.min.js) and jQuery 3.7.1, slim build, from
  `xstatic-jquery`. They are found with importlib's find_spec, which imports none of them (bertviz
  would pull in IPython, mpld3 matplotlib). A missing package or file raises AssetMissing (an
  OSError) whose message names the set-up command; the page shows it in the bertviz tab only.
* They are inlined: bertviz's `require.config` (the CDN paths) is dropped and require.js is
  replaced by a shim that hands the inlined libraries to bertviz's callback. XML-namespace strings
  in d3 are written `http:\\/\\/...` (the same string in JavaScript), so the document holds no
  `http(s)://` at all.
* Parameters are JSON with `<`, `>` and `&` written as \\u escapes, which cannot close a script,
  and bertviz draws tokens with d3's .text() (never as HTML).
* Layers and heads are labelled from 1, like the rest of the app: bertviz takes its labels from the
  include_layers / include_heads parameters (the data is indexed by position), so they are passed
  1-based. The model view's frame is sized from bertviz's own layout (height()).
* Weights are rounded to 3 decimals through float64 (float32 would print 0.08299999684...), and a
  size limit falls back to one layer, then refuses, instead of shipping tens of MB to the browser.

Pure functions of numpy arrays: no streamlit here (the page embeds the result with
st.components.v1.html). The files are read as installed, unmodified, and only rewritten in memory.
"""
from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from explorer.inspection.trace import ATTENTION_KINDS, KINDS


@dataclass(frozen=True)
class Asset:
    """A browser script inside an installed package: `path` is relative to the folder of the
    package (import name) `module`; `dist` is what pip installs it by."""
    what: str
    dist: str
    module: str
    path: str


ASSETS = {
    "head_view.js": Asset("bertviz's head view", "bertviz", "bertviz", "head_view.js"),
    "model_view.js": Asset("bertviz's model view", "bertviz", "bertviz", "model_view.js"),
    "d3": Asset("d3 5.7.0", "mpld3", "mpld3", "js/d3.v5.min.js"),
    "jquery": Asset("jQuery 3.7.1", "xstatic-jquery", "xstatic.pkg.jquery", "data/jquery.slim.min.js"),
}
SETUP = "make setup (or pip install -e . in the app's virtualenv) installs what the views need"
VIEWS = {"head": "head_view.js", "model": "model_view.js"}
MAX_VALUES = 400_000            # attention values per document (about 2.5 MB of JSON)
_SHIM = "var requirejs = function (deps, callback) { callback(window.jQuery, window.d3); };"


class ViewTooLarge(ValueError):
    """The attention data would make a document too big for the browser."""


class AssetMissing(OSError):
    """A script the views need is not installed (or not where this app expects it); the message
    says which package and which set-up command brings it."""


def asset_path(name: str) -> Path:
    """Where the installed package keeps asset `name`, found without importing the package."""
    asset = ASSETS[name]
    try:
        spec = importlib.util.find_spec(asset.module)
    except ImportError:                                    # a parent package (xstatic) is missing
        spec = None
    if spec is None:
        importlib.invalidate_caches()                      # installed since this process started?
        try:
            spec = importlib.util.find_spec(asset.module)
        except ImportError:
            spec = None
    if spec is None or not spec.submodule_search_locations:
        raise AssetMissing(f"{asset.what} comes from the Python package {asset.dist}, which is not installed: "
                           f"{SETUP}")
    path = Path(next(iter(spec.submodule_search_locations))) / asset.path
    if not path.is_file():
        raise AssetMissing(f"{asset.what} was not found in the installed package {asset.dist} "
                           f"(no {asset.path}): {SETUP}")
    return path


@functools.lru_cache(maxsize=None)
def _asset(name: str) -> str:
    """The text of asset `name`, checked to be what the views can run on (failures are not cached)."""
    asset = ASSETS[name]
    path = asset_path(name)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise AssetMissing(f"{asset.what} could not be read from the package {asset.dist} "
                           f"({type(err).__name__}): {SETUP}") from None
    problem = ""
    if name in VIEWS.values() and ("requirejs([" not in text or "PYTHON_PARAMS" not in text):
        problem = "is not the bertviz 1.4 script this app knows how to embed"
    elif name == "d3" and not (version_of(text, "d3") or "").startswith("5."):
        problem = f"is d3 {version_of(text, 'd3') or 'of no known version'}, and bertviz's views need d3 v5"
    elif name == "jquery" and not version_of(text, "jquery"):
        problem = "does not look like jQuery"
    if problem:
        raise AssetMissing(f"{path.name} of the installed package {asset.dist} {problem}: {SETUP}")
    return text


def version_of(script: str, library: str) -> str | None:
    """The version a minified d3 or jQuery announces in its first comment (None if it does not)."""
    pattern = {"d3": r"d3js\.org v(\d+\.\d+\.\d+)", "jquery": r"jQuery v(\d+\.\d+\.\d+)"}[library]
    match = re.search(pattern, script[:500])
    return match.group(1) if match else None


def versions() -> dict[str, str | None]:
    """The versions of d3 and jQuery the documents inline (read from the installed files)."""
    return {"d3": version_of(_asset("d3"), "d3"), "jquery": version_of(_asset("jquery"), "jquery")}


def _no_urls(js: str) -> str:
    """Write URL-looking strings so no `http(s)://` remains, without changing what the code does:
    in string literals `http:\\/\\/` is the same string; in // comments the scheme is dropped."""
    js = re.sub(r"""(["'])(https?)://""", r"\1\2:\\/\\/", js)
    return re.sub(r"(//[^\n]*?)https?://", r"\1", js)


@functools.lru_cache(maxsize=None)
def _libraries() -> str:
    return _no_urls(_asset("d3")) + "\n" + _no_urls(_asset("jquery"))


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
    sides = {"src": src_tokens, "tgt": tgt_tokens}
    data = []
    for kind in KINDS:
        if kind not in stacks:
            continue
        stack = np.asarray(stacks[kind])                                      # [L, H, q, k]
        left, right = sides[ATTENTION_KINDS[kind].queries], sides[ATTENTION_KINDS[kind].keys]
        if stack.ndim != 4 or stack.shape[2:] != (len(left), len(right)):
            raise ValueError(f"{kind} attention of shape {stack.shape} does not match "
                             f"{len(left)} x {len(right)} tokens")
        data.append({"name": ATTENTION_KINDS[kind].short, "attn": _rounded(stack[list(layers)]),
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
    short = ATTENTION_KINDS[kind].short if kind in ATTENTION_KINDS else None
    first = names.index(short) if short in names else 0
    # bertviz shows include_layers / include_heads as the labels (and finds the head view's layer in
    # them); the attention itself is indexed by position, so 1-based labels change only what is read
    labels = [i + 1 for i in layers]
    params = {"attention": data, "default_filter": str(first), "root_div_id": root, "include_layers": labels}
    n_heads = len(data[0]["attn"][0])
    if view == "head":
        params.update(layer=(layer if layer in layers else layers[0]) + 1, heads=None)
    else:
        params.update(display_mode=display_mode, include_heads=list(range(1, n_heads + 1)), total_heads=n_heads)
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


CONTROLS_PX = 40               # the selects above the drawing, and a margin below it


def height(view: str, stacks: dict[str, np.ndarray], layer: int = 0, max_values: int = MAX_VALUES) -> int:
    """A frame height (px) that holds the whole view: bertviz's own layout arithmetic (head_view.js,
    model_view.js) for the longest token list of any kind and, in the model view, the number of
    layers render() shows (choose_layers), so the last layer's row is never cut off."""
    shapes = [np.asarray(s).shape for s in stacks.values()]
    longest = max(max(s[2], s[3]) for s in shapes)
    if view == "head":
        return int(CONTROLS_PX + 30 + 22.5 * longest + 40)              # BOXHEIGHT, TEXT_TOP; head squares
    n_layers = len(choose_layers(stacks, layer, max_values)[0])
    n_heads = max(shapes[0][1], 1)
    thumbnail = longest * 7 * (12 / n_heads) + 2 * 5                   # a layer's row (THUMBNAIL_PADDING 5)
    axis = 15 + 5 + 13 + 5                                              # the "Heads" heading and numbers
    detail = longest * 18 + 2 * 15 + 25                                 # the clicked head's enlarged view
    return int(CONTROLS_PX + max(n_layers * thumbnail + axis, detail) + 20)
