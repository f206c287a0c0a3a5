"""Every URL key the app reads, with its type and range, per page: one table and one way to use it.

Why: a link is how a teacher shares a view, so every control that changes what a page shows keeps
its value in the URL, and a link opened in a fresh session shows the same view. The URL is
untrusted and hand-edited: a number outside its control's range is clamped into it (`layer=999` is
the last layer, `head=-5` the first) and the page writes back the value it shows, so the address bar
never carries a value the page is not showing; a malformed value or an unknown choice falls back to
the control's default; a key that neither the page nor the lecture's shared state (lecture.CARRIED)
reads is dropped before the page runs (drop_unknown), so a shared link carries nothing stale. A key
whose control the page does not draw on this run (exact search's settings with exact search off, the
Causes cell before its grids) is removed with put(key=None); the value stays in the session for when
the control is drawn again.

A page uses it in two calls around each widget: seed() before the widget is drawn (its starting value:
a link just followed, else the value it has or had on this page, else the default), write() after
(the value shown, back into the URL). A widget whose value is no URL key's is set with hold(), on every
run that draws it (why: hold's docstring). A value that is no one widget's (the sentence, the checkpoint,
a list kept as one text) is read with raw() (or linked(): only a link's, not what this page wrote) and
written with put(). PAGE_KEYS lists each page's keys by url_path, and the keys every page shares
(lecture.CARRIED) sit beside it; the decoding settings' keys (webapp.decode_url) are UrlKeys too.
Numbers shown to users are 1-based everywhere (positions, layers, heads, steps, ranks), so they are in
the URL too.

One idiom: nothing else in the app reads or writes st.query_params. The one exception is a tab bar
bound by Streamlit (st.tabs(..., key=K, bind="query-params"): Attention's `view`, Checkpoints' `tab`).
Its key is declared in PAGE_KEYS like any other (so drop_unknown keeps it), but Streamlit itself keeps
it in step with the open tab: it opens the tab the URL names, writes the key on a tab switch, removes
an unknown tab name and leaves the default tab out. seed() and write() would only repeat that, and
cannot anyway: st.query_params may neither set nor delete a bound key (put() would raise).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import streamlit as st
from streamlit.errors import StreamlitAPIException


def integer(text: str) -> int:
    return int(text)                       # "2.5" and "1e3" are refused rather than guessed at


def _flag(text: str) -> bool:
    if text not in ("0", "1"):
        raise ValueError(text)
    return text == "1"


def _switch(text: str) -> bool:
    """A switch that any spelling but a known "on" one turns off (presenter mode: never an error)."""
    return text.lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class UrlKey:
    """One URL key: its name, how its text reads (cast), and its range or choices."""
    key: str
    cast: Callable[[str], Any] = str
    low: float | None = None
    high: float | None = None
    choices: tuple = ()

    def parse(self, raw: Any, low: float | None = None, high: float | None = None,
              choices: Iterable | None = None) -> Any:
        """The value `raw` (URL text) stands for: a number clamped into [low, high] (this key's range,
        narrowed by the caller's: the model's layer count, say), a choice only if it is one, None when
        it is malformed (not a number, NaN or infinite, not one of the choices)."""
        try:
            value = self.cast(str(raw).strip())
        except (TypeError, ValueError, OverflowError):
            return None
        allowed = tuple(choices) if choices is not None else self.choices
        if allowed:
            return value if value in allowed else None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return value
        if isinstance(value, float) and not math.isfinite(value):   # an int is finite, and may exceed any float
            return None
        lows = [b for b in (self.low, low) if b is not None]
        highs = [b for b in (self.high, high) if b is not None]
        if highs:
            value = min(value, type(value)(min(highs)))
        if lows:
            value = max(value, type(value)(max(lows)))
        return value

    @staticmethod
    def text(value: Any) -> str:
        """The URL text of a value (1 / 0 for a switch, 0.6 rather than 0.6000000000000001)."""
        if isinstance(value, bool):
            return "1" if value else "0"
        if isinstance(value, float):
            return f"{value:.6g}"
        return str(value)


# ---- the keys every page shares (webapp.lecture.CARRIED, with the decoding settings' decode_url.SETTINGS)
CKPT = UrlKey("ckpt")                           # the checkpoint, by name (webapp.sidebar)
TEXT = UrlKey("text")                           # the sentence, cut to sentence.URL_CHARS (webapp.sentence)
PRESENT = UrlKey("present", _switch)            # presenter mode: ?present=1 (webapp.presenter)
SRC_LANG, TGT_LANG = UrlKey("src_lang"), UrlKey("tgt_lang")   # a multilingual model's pair (webapp.languages)

REF = UrlKey("ref")                             # a reference typed for the sentence (Translate, Beam search)

# ---- the table: each page's keys, by url_path (webapp.lecture.PAGES_TABLE) --------------------------
LAYER, HEAD = UrlKey("layer", integer, 1, 1000), UrlKey("head", integer, 1, 1000)     # 1-based; a model's count narrows
STEP = UrlKey("step", integer, 1, 100_000)
BEAM_SIZE, BEAM_LP = UrlKey("size", integer, 1, 16), UrlKey("penalty", str, choices=("gnmt", "average", "none"))
BEAM_ALPHA, BEAM_RANK = UrlKey("a", float, 0.0, 2.0), UrlKey("rank", integer, 1, 100)
BEAM_MARK = UrlKey("mark", _flag)
PE_D, PE_BASE, PE_LEN = UrlKey("d", integer, 1, 100_000), UrlKey("base", float, 2.0, 1e9), UrlKey("n", integer, 8, 100_000)
PE_SIDE = UrlKey("side", str, choices=("encoder", "decoder"))
ALIGNER, ALIGN_ROW = UrlKey("aligner"), UrlKey("row")
ALIGN_LAYER = UrlKey("layer", str)              # "mean", or a 1-based layer (checked against the model)
ALIGN_HEAD = UrlKey("head", str)
SC_D, SC_WARMUP = UrlKey("d", integer, 64, 1024), UrlKey("warmup", integer, 100, 20_000)
SC_FACTOR, SC_STEPS = UrlKey("factor", float, 0.1, 5.0), UrlKey("steps", integer, 1000, 100_000)
SC_OVERLAY, SC_EPS = UrlKey("overlay", _flag), UrlKey("eps", float, 0.0, 0.5)
SC_VOCAB, SC_TARGET = UrlKey("vocab", integer, 2, 40), UrlKey("target", integer, 1, 40)
SC_RUN, RUN = UrlKey("run"), UrlKey("run")
CK_TAB, CK_A, CK_B = UrlKey("tab"), UrlKey("a"), UrlKey("b")
CK_RUN, CK_KIND = UrlKey("run"), UrlKey("kind", str, choices=("encoder", "decoder", "cross"))
CK_STEP = UrlKey("at")                          # the scrubber's checkpoint: its training step, or its name
CK_OVER = UrlKey("over", str, choices=("A", "B"))                # Compare two: attention over whose output
CK_ATTN = UrlKey("attn", str, choices=("encoder", "decoder", "cross"))   # ... of which kind
CK_SHOW = UrlKey("show", str, choices=("A", "B", "diff"))        # ... A's, B's, or B - A
CK_N = UrlKey("n", integer, 10, 500)                             # ... the test sample's size
CK_TESTSET = UrlKey("testset", str, choices=("A", "B"))          # ... drawn from whose test set
LENS_BEAM = UrlKey("lens_beam", integer, 1, 8)  # the DecoderLens' decoding: 1 = greedy, else the beam size
LENS_FORCED = UrlKey("forced", str, choices=("output", "reference"))
LENS_SHOW = UrlKey("show", str, choices=("top", "final"))
PATCH_PAIR = UrlKey("pair", str, choices=("swap", "own"))
PATCH_SWAP, PATCH_CORRUPT = UrlKey("swap", integer, 1, 24), UrlKey("corrupt")   # a suggestion (1-based), own text
PATCH_DIR = UrlKey("dir", str, choices=("denoise", "noise"))
PATCH_GRID, PATCH_ROW, PATCH_COL = UrlKey("grid"), UrlKey("row", integer, 1, 1000), UrlKey("col", integer, 1, 1000)
CONTRIB_FORCED = UrlKey("forced", str, choices=("output", "reference", "detached"))   # what is teacher-forced
CONTRAST, FOIL = UrlKey("contrast", _flag), UrlKey("foil", integer, 1, 1000)   # the foil's place in its list
FOIL_WORD = UrlKey("vs")                        # a typed foil (explorer.studies.contrastive.foils checks it)
CONTRAST_METHOD = UrlKey("method", str, choices=("integrated-gradients", "grad-x-input"))
IG_POINTS = UrlKey("ig", integer, 16, 128)      # integrated gradients' points (the page offers 16/32/64/128)
VERSE = UrlKey("verse", integer, 0, 5000)       # a test verse, 1-based (0: the sentence as typed)
SEARCH_N, SEARCH_BEAMS = UrlKey("n", integer, 1, 5000), UrlKey("beams")     # the beam curve's sentences, sizes
SEARCH_LP, SEARCH_EXACT = UrlKey("penalties"), UrlKey("exact", _flag)        # its length penalties, exact search
SEARCH_EXACT_N = UrlKey("exact_n", integer, 1, 5000)     # exact search on the first N (narrowed to the sentences)
SEARCH_EXACT_S = UrlKey("exact_s", integer, 1, 60)       # its seconds per sentence at most
ALIGN_PAIRS = UrlKey("pairs", integer, 1, 20_000)        # the scorecard's gold pairs (narrowed to the gold set)
ALIGN_GRAD = UrlKey("grad", integer, 0, 20_000)          # of them, scored with gradients (narrowed to pairs)
ARCH_BLOCK, ARCH_TOKEN = UrlKey("block"), UrlKey("token", integer, 1)       # a block of Figure 1, a 1-based token
ATTN_KIND = UrlKey("kind", str, choices=("encoder", "decoder", "cross"))
ATTN_SHOW, ATTN_VIEW = UrlKey("show"), UrlKey("view")    # the quantity shown; the open tab (bound by Streamlit)
ATTN_ABLATE = UrlKey("ablate")                  # the heads switched off: "kind.layer.head,..." (1-based)
LAB_N, LAB_FORCED = UrlKey("lab_n", integer, 1), UrlKey("lab_forced")       # the head lab's sentences, forcing
LAB_SEEDS = UrlKey("lab_seeds", integer, 0)     # its random removal orders
LAB_SINGLE = UrlKey("lab_single", str, choices=("bleu", "loss"))            # single-head removal's scoring
FEAT_SITE = UrlKey("site")                      # Features: enc1, dec3, a stream enc2r (views.feature_sites.site_key)
FEAT_ID = UrlKey("feature", integer, 0, 65_535)  # a feature of its dictionary (narrowed to its width)
FEAT_VALUE = UrlKey("clamp", float, 0.0, 100.0)  # steering: the value the feature is set to
FEAT_AT = UrlKey("at")                          # steering: the source positions, "1,3" (1-based)
LEARN = UrlKey("learn")                         # "Where did it learn this?": out.WORD or src.WORD (views.learned)
GRAPH_WORD = UrlKey("word")                     # the Graphs page's output word, 1-based (the picker's options)
GRAPH_NODES = UrlKey("nodes")                   # its node threshold, one of job.NODE_THRESHOLDS
GRAPH_NODE = UrlKey("node")                     # the feature node picked: its graph id "layer_latent_ctx"
GRAPH_CHANGE = UrlKey("change")                 # the feature nodes intervened on: their ids, comma-separated
GRAPH_VALUE = UrlKey("set", float, 0.0, 100.0)  # the value they are set to (0 removes them)
INT8 = UrlKey("int8", _flag)                    # the Translate page on int8 weights: 1, or 0 against a server default

PAGE_KEYS: dict[str, tuple[UrlKey, ...]] = {
    "translate": (LEARN, INT8, REF),
    "architecture": (ARCH_BLOCK, ARCH_TOKEN, LAYER, HEAD),
    "positions": (PE_D, PE_BASE, PE_LEN, PE_SIDE),
    "attention": (ATTN_KIND, LAYER, HEAD, ATTN_SHOW, ATTN_ABLATE, ATTN_VIEW),
    "heads": (LAB_N, LAB_FORCED, LAB_SEEDS, LAB_SINGLE),
    "contributions": (CONTRIB_FORCED, LAYER),
    "alignment": (ALIGNER, ALIGN_ROW, ALIGN_LAYER, ALIGN_HEAD, ALIGN_PAIRS, ALIGN_GRAD),
    "layers": (LENS_BEAM, LENS_FORCED, LENS_SHOW),
    "features": (FEAT_SITE, FEAT_ID, FEAT_VALUE, FEAT_AT),
    "graphs": (GRAPH_WORD, FOIL_WORD, GRAPH_NODES, GRAPH_NODE, GRAPH_CHANGE, GRAPH_VALUE),
    "causes": (PATCH_PAIR, PATCH_SWAP, PATCH_CORRUPT, PATCH_DIR, PATCH_GRID, PATCH_ROW, PATCH_COL),
    "search": (SEARCH_N, SEARCH_BEAMS, SEARCH_LP, SEARCH_EXACT, SEARCH_EXACT_N, SEARCH_EXACT_S),
    "beam": (STEP, BEAM_SIZE, BEAM_LP, BEAM_ALPHA, BEAM_RANK, BEAM_MARK, LAYER, CONTRAST, FOIL, FOIL_WORD,
             CONTRAST_METHOD, IG_POINTS, VERSE, LEARN, REF),
    "training_vs_inference": (),
    "schedule": (SC_D, SC_WARMUP, SC_FACTOR, SC_STEPS, SC_OVERLAY, SC_EPS, SC_VOCAB, SC_TARGET, SC_RUN),
    "train": (RUN,),
    "checkpoints": (CK_TAB, CK_A, CK_B, CK_OVER, CK_ATTN, CK_SHOW, CK_N, CK_TESTSET, CK_RUN, CK_KIND, LAYER, HEAD,
                    CK_STEP),
}
PAGE_KEYS[""] = PAGE_KEYS["home"] = PAGE_KEYS["translate"]     # the landing page's other paths


def drop_unknown(url_path: str, carried: Iterable[str]) -> list[str]:
    """Remove the URL keys that page `url_path` does not read and the lecture does not carry; the
    keys removed. A page outside the table keeps its URL as it is."""
    if url_path not in PAGE_KEYS:
        return []
    allowed = set(carried) | {k.key for k in PAGE_KEYS[url_path]}
    dropped = []
    for key in [k for k in st.query_params if k not in allowed]:
        try:
            del st.query_params[key]
            dropped.append(key)
        except (KeyError, StreamlitAPIException):      # bound to a widget: Streamlit keeps it in step
            pass
    return dropped


# ---- a widget and its key ---------------------------------------------------------------------------
WRITTEN = "_url_written"          # {URL key: the text this page last wrote}; emptied when another page opens


def put(**values: Any) -> None:
    """Write values into the URL (None removes the key); only changed keys are written. Each is
    remembered as this page's own, so seed() tells it from a value a link brings."""
    written = st.session_state.setdefault(WRITTEN, {})
    for key, value in values.items():
        text = None if value is None else UrlKey.text(value)
        if text is None:
            if key in st.query_params:
                del st.query_params[key]
        elif st.query_params.get_all(key) != [text]:      # a key repeated in a link (n=20&n=30) is made one
            st.query_params[key] = text
        written[key] = text


def raw(spec: UrlKey) -> str | None:
    """The URL's text for `spec`, unparsed (None when the URL lacks it): for a value that is no one
    widget's, which its reader checks itself (the sentence, a checkpoint's name, a list of heads)."""
    return st.query_params.get(spec.key)


def texts(specs: Iterable[UrlKey]) -> dict[str, str]:
    """{key: URL text} of those of `specs` the URL holds, unparsed (the decoding settings, the shared state)."""
    found = {spec.key: st.query_params.get(spec.key) for spec in specs}
    return {key: text for key, text in found.items() if text is not None}


NONE = "none"   # a list the user emptied, kept in the link: without it a link reopened the page's default picks


def list_text(picked: Iterable[Any]) -> str:
    """A picked list as its URL text: "2,5", or NONE when nothing is picked (the key kept, not dropped)."""
    return ",".join(str(p) for p in picked) or NONE


def listed(text: str | None, allowed: Sequence[str]) -> list[str]:
    """The entries of a comma-separated URL list (`text`, "2,5" or "3_29_8,1_4_2") that are among
    `allowed`, each once, in the link's order: a malformed, unknown or repeated entry is dropped, never an
    error, and never counted twice (a node listed twice would be changed twice)."""
    known, found = set(allowed), []
    for part in str(text or "").split(","):
        part = part.strip()
        if part in known and part not in found:
            found.append(part)
    return found


def linked(spec: UrlKey) -> str | None:
    """The URL's text for `spec` when it is new to this page (a link just followed or typed, a fresh
    session), None when the URL lacks it or holds the text this page last wrote (put)."""
    text = raw(spec)
    return None if text is None or text == st.session_state.get(WRITTEN, {}).get(spec.key) else text


def page_opened(url_path: str) -> None:
    """Called before each page runs: on another page than the last run's, every URL value is new to
    it (a link's), so seed() takes it over what its widgets held."""
    if st.session_state.get("_url_page") != url_path:
        st.session_state["_url_page"] = url_path
        st.session_state[WRITTEN] = {}


def _options(options: Mapping[str, Any] | Sequence | None) -> Mapping[str, Any] | None:
    if options is None or isinstance(options, Mapping):
        return options
    return {UrlKey.text(v): v for v in options}


def _nearest(raw: str, options: Mapping[str, Any]) -> Any:
    """A number among choices that also hold words (a layer: "mean", "1".."6"), or numbers with gaps (a
    run's steps: 150, 300, 900): the nearest numbered choice, so `layer=99` is the last layer as it is on a
    page whose layer is a number, `at=200` the step 150 and `base=150.5` the base 100; None when `raw` is
    not a finite number or no choice is one. A switch's 0 and 1 are no numbers: `int8=2` is an unknown
    choice, which falls back to the default."""
    numbered = {float(k): v for k, v in options.items()
                if re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", k) and not isinstance(v, bool)}
    try:
        wanted = float(str(raw).strip())
    except (ValueError, OverflowError):
        return None
    if not numbered or not math.isfinite(wanted):
        return None
    return numbered[min(numbered, key=lambda k: (abs(k - wanted), k))]      # between two: the nearer, else the lower


def _allowed(spec: UrlKey, value: Any, low, high, options: Mapping[str, Any] | None) -> Any:
    """`value` if the widget can show it (a number clamped into range), else None."""
    if value is None:
        return None
    if options is not None:
        same = (v for v in options.values() if v == value and isinstance(v, bool) == isinstance(value, bool))
        return next(same, None)
    return spec.parse(UrlKey.text(value), low, high)


def seed(spec: UrlKey, widget: str, default: Any, *, low: float | None = None, high: float | None = None,
         options: Mapping[str, Any] | Sequence | None = None, exact: bool = False) -> Any:
    """Set widget `widget`'s starting value before it is drawn, and return it.

    The URL's value wins when it is not the one this page last wrote (a link just followed or typed,
    a fresh session); otherwise the widget keeps its value, or the one it had when this page was last
    shown (Streamlit forgets widgets that were not drawn; write() keeps a copy). `options`: the
    widget's values, as a list (their URL text is str(value)) or as {URL text: value}; without them
    the value is a number clamped into [low, high]. Anything else falls back to `default`. `exact`: the
    options are names, not amounts (a feature's id): a value that is not one of them falls back too, where
    a number would open the nearest option (_nearest), one the link never named."""
    options = _options(options)
    text, from_url = linked(spec), None
    if text is not None:
        from_url = (options.get(text, None if exact else _nearest(text, options)) if options is not None
                    else spec.parse(text, low, high))
    for candidate in (from_url, st.session_state.get(widget), st.session_state.get("_" + widget)):
        value = _allowed(spec, candidate, low, high, options)
        if value is not None:
            return hold(widget, value)
    return hold(widget, default)


def hold(widget: str, value: Any) -> Any:
    """Set widget `widget`'s value before it is drawn, and return it; called on every run that draws it.

    Why every run: Streamlit sends a widget's value to the browser only on a run that sets it through
    session state. Set once (when it changes), it reaches the browser once, and a browser that missed that
    run (a page switched to at once, a run stopped before the widget) shows the widget's own default and
    later sends it back, which the session takes for the user's choice (the sidebar's checkpoint picker
    once switched a linked session's model so). seed() sets every URL-seeded widget through here; a widget
    whose value is no URL key's is set here too. The one other place a widget's value may be set is a
    callback (on_change, on_click, on_select), which runs before the script and so before the widget is
    drawn; tests/unit/test_widget_values.py holds the app to both."""
    st.session_state[widget] = value
    return value


_ALWAYS = object()


def write(spec: UrlKey, widget: str, value: Any, options: Mapping[str, Any] | Sequence | None = None, *,
          default: Any = _ALWAYS) -> None:
    """Put the value widget `widget` shows into the URL (already within range: it is the widget's), and
    keep a copy for the next visit to this page. `default`: a value left out of the URL, so a link that
    shows the page's defaults stays short (a fresh session without the key opens on it too)."""
    options = _options(options)
    text = next((t for t, v in options.items() if v == value), None) if options is not None else None
    shown = None if default is not _ALWAYS and value == default else text if text is not None else value
    put(**{spec.key: shown})
    st.session_state["_" + widget] = value
