"""A multilingual model's language pair (M2M100, NLLB-200): two pickers in the sidebar, kept in the URL.

Such a model reads a source-language tag and is forced to write the target-language tag first
(explorer.text.multilingual); its checkpoint names a default pair, and these pickers choose another.
Every page gets the checkpoint with its tokenizer bound to the pair (`bind`, which
webapp.models.current_checkpoint applies), so the decoding, the traces and every cached result follow
the pair: webapp.result_cache keys a bound checkpoint by its language_pair too. A model of one pair shows no pickers.
"""
from __future__ import annotations

import dataclasses

import streamlit as st

from webapp import url_keys

SRC, TGT = "src_lang", "tgt_lang"           # the pickers' session keys


def languages_of(ckpt) -> list[str]:
    """The language codes a checkpoint's tokenizer knows, sorted ([] for a one-pair model)."""
    return sorted(getattr(getattr(ckpt, "tokenizer", None), "languages", None) or [])


def render(ckpt) -> None:
    """The two pickers under the checkpoint picker, for a multilingual checkpoint (else the URL keys go)."""
    codes = languages_of(ckpt)
    if not codes:
        url_keys.put(**{url_keys.SRC_LANG.key: None, url_keys.TGT_LANG.key: None})
        return
    tok = ckpt.tokenizer
    for spec, widget, label, default in ((url_keys.SRC_LANG, SRC, "Source language", tok.src_lang or codes[0]),
                                         (url_keys.TGT_LANG, TGT, "Target language", tok.tgt_lang or codes[0])):
        chosen = url_keys.seed(spec, widget, default, options=codes)
        value = st.sidebar.selectbox(label, codes, index=codes.index(chosen), key=widget,   # default: the choice
                                     # (as the checkpoint picker's, webapp.sidebar: a browser's fallback keeps it)
                                     help="This model translates between many languages: the source is read "
                                          "with this tag in front, and the output is forced to start with the "
                                          "target's tag.")
        url_keys.write(spec, widget, value, options=codes, default=default)


def bind(ckpt):
    """`ckpt` with its tokenizer bound to the pickers' pair (the same object for a one-pair model, or
    before the pickers were drawn)."""
    codes = languages_of(ckpt)
    src, tgt = st.session_state.get(SRC), st.session_state.get(TGT)
    tok = getattr(ckpt, "tokenizer", None)
    if not codes or src not in codes or tgt not in codes or (src, tgt) == (tok.src_lang, tok.tgt_lang):
        return ckpt
    return dataclasses.replace(ckpt, tokenizer=tok.with_languages(src, tgt))
