"""The decoding-settings widgets of the Translate page (greedy / beam / sampling and their knobs).

The result is stored as st.session_state["decode_cfg"] (a DecodeConfig dict), which the other
pages read through state.decode_settings(), so they show the translation the user chose. The
widgets start from that stored dict, so leaving and re-opening the page keeps the choice; on a
fresh session the dict comes from the URL, and the form writes its settings back into the URL
(webapp.decode_url, which also holds each widget's range), so a shared link decodes the same way.
"""
from __future__ import annotations

import streamlit as st

from explorer.config import DecodeConfig
from webapp import decode_url, models, state, url_keys
from webapp.decode_url import ALPHA_CAP, BEAM_CAP, PENALTIES  # noqa: F401 - the Beam page reads them here

STRATEGIES = {"greedy": "Greedy", "beam": "Beam search", "sample": "Sampling"}


# The settings drawn with each strategy (the others are not drawn, so Streamlit forgets them and they start
# again from the URL's or the defaults when shown again: a link then says what the session uses).
DRAWN_WITH = {"beam": ("dec_beam", "dec_nbest", "dec_lp", "dec_alpha"),
              "sample": ("dec_temp", "dec_topk", "dec_topp", "dec_seed", "dec_samples")}


def _default(key: str, value) -> None:
    if key not in st.session_state:
        url_keys.hold(key, value)


def render() -> tuple[dict, int]:
    """Draw the settings; returns (DecodeConfig dict, number of samples to draw when sampling)."""
    stored = state.decode_settings()
    for key, field in (("dec_strategy", "strategy"), ("dec_beam", "beam_size"), ("dec_nbest", "n_best"),
                       ("dec_lp", "length_penalty"), ("dec_alpha", "alpha"), ("dec_temp", "temperature"),
                       ("dec_topk", "top_k"), ("dec_topp", "top_p"), ("dec_seed", "seed"),
                       ("dec_minlen", "min_len"), ("dec_maxlen", "max_len_b")):
        _default(key, stored[field])
    _default("dec_samples", st.session_state.get("_dec_samples_url", decode_url.DEFAULT_SAMPLES))
    url_keys.hold("dec_beam", min(max(int(st.session_state["dec_beam"]), 1), BEAM_CAP))
    url_keys.hold("dec_nbest", min(max(int(st.session_state["dec_nbest"]), 1), BEAM_CAP))
    for key in ("dec_strategy", "dec_minlen", "dec_maxlen", *DRAWN_WITH.get(st.session_state["dec_strategy"], ())):
        url_keys.hold(key, st.session_state[key])          # each value this run draws, set on every run
    with st.expander("Decoding settings", expanded=False):
        strategy = st.radio("Strategy", list(STRATEGIES), format_func=STRATEGIES.get, key="dec_strategy",
                            horizontal=True, help="Greedy takes the most probable token at each step; beam "
                            "search keeps the k best partial translations; sampling draws each token.")
        samples = 1
        if strategy == "beam":
            c1, c2, c3, c4 = st.columns(4)
            c1.slider("Beam size", 1, BEAM_CAP, key="dec_beam")
            c2.slider("N-best shown", 1, BEAM_CAP, key="dec_nbest")
            c3.selectbox("Length penalty", PENALTIES, key="dec_lp",
                         help="gnmt: score / ((5 + len) / 6)^α; average: score / len; none: raw sum.")
            c4.slider("α (GNMT exponent)", 0.0, ALPHA_CAP, step=0.1, key="dec_alpha",
                      disabled=st.session_state["dec_lp"] != "gnmt")
        elif strategy == "sample":
            c1, c2, c3, c4, c5 = st.columns(5)
            c1.slider("Temperature", 0.1, 2.0, step=0.1, key="dec_temp")
            c2.number_input("Top-k (0 = off)", 0, 1000, step=1, key="dec_topk")
            c3.slider("Top-p", 0.05, 1.0, step=0.05, key="dec_topp")
            c4.number_input("Seed", 0, 2**31 - 1, step=1, key="dec_seed")
            samples = c5.slider("Samples", 1, decode_url.SAMPLES_CAP, key="dec_samples",
                                help="Seeds seed, seed+1, …")
        minlen, maxlen = decode_url.BY_FIELD["min_len"], decode_url.BY_FIELD["max_len_b"]
        c1, c2, _ = st.columns([1, 1, 2])
        c1.number_input("Min length (pieces)", int(minlen.low), int(minlen.high), step=1, key="dec_minlen",
                        help="The end of the sentence is forbidden before this many output pieces.")
        c2.number_input("Max length: source pieces +", int(maxlen.low), int(maxlen.high), step=1, key="dec_maxlen",
                        help="At most (source pieces + this many) output pieces; longer outputs are cut.")
    g = st.session_state
    cfg = dict(stored, strategy=strategy, beam_size=int(g["dec_beam"]), n_best=int(g["dec_nbest"]),
               length_penalty=g["dec_lp"], alpha=float(g["dec_alpha"]), temperature=float(g["dec_temp"]),
               top_k=int(g["dec_topk"]), top_p=float(g["dec_topp"]), seed=int(g["dec_seed"]),
               min_len=int(g["dec_minlen"]), max_len_b=int(g["dec_maxlen"]))
    try:
        cfg = DecodeConfig(**cfg).to_dict()
    except (TypeError, ValueError) as err:
        st.warning(f"Those settings cannot be used ({state.md_escape(err)}); using the defaults instead.")
        cfg = dict(decode_url.DEFAULTS)
    st.session_state["decode_cfg"] = cfg
    url_keys.put(**decode_url.to_query(cfg, samples))
    return cfg, samples


INT8_OPTIONS = {"1": True, "0": False}


def int8_choice() -> bool:
    """The Translate page's "int8 weights" toggle: its translation made on the model's int8 copy
    (explorer/model/int8.py: faster on a CPU, weights rounded to 8 bits) or on the float32 model. It starts
    on the server's default ($EXPLORER_INT8, models.int8_default: a classroom's server may start everyone on
    int8) unless the URL says otherwise, and is written to the URL when it differs from that default. Not
    offered (float32) where the app's models run on a GPU or torch has no int8 engine."""
    if not models.int8_available():
        return False
    default = models.int8_default()
    url_keys.seed(url_keys.INT8, "dec_int8", default, options=INT8_OPTIONS)
    on = st.toggle("int8 weights", key="dec_int8",
                   help="Translate with a copy of the model whose matrix products run in 8-bit integers: "
                        "faster on a CPU; its translations can differ slightly from the float32 model's. "
                        "The other pages always use the float32 model.")
    url_keys.write(url_keys.INT8, "dec_int8", on, INT8_OPTIONS, default=default)
    return bool(on)
