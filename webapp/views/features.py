"""The Features page's parts: one site's dictionary (a TopK transcoder of an FFN, or a TopK SAE of a
layer's residual stream: explorer.studies.features), trained in the background the first time it is asked
for (webapp.views.feature_sites); the strongest features at each position of the sentence; one feature's
page (its training contexts, how often and how strongly it
fires, what removing it does where it fires most); steering (the feature clamped, the sentence
translated again).

Dictionaries are not shipped (a site's two weigh ~1.2 MB in float16, a model's twelve ~15 MB, as much
again as the checkpoint): the app trains the layer a user opens (feature_sites.app_settings: a transcoder at a third
of the command's steps, a stream's SAE at the command's settings; a few minutes on two cores, progress and
Cancel as on every page's job); `python -m explorer features train` makes every
layer's at the command's fuller settings, and the page then uses those. The aligned word beside each
training context is the target word of that pair the training data links most often to the context's
word (the grounding index's links, explorer.studies.grounding.links).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from explorer.files.limits import whole_number
from explorer.plots import features as plots
from explorer.plots.attention import logprob_delta_figure
from explorer.studies.common.words import span_word, words
from webapp import analyses, downloads, feature_analyses, presenter, state
from webapp import url_keys as url
from webapp.text_safety import md_escape
from webapp.views import grounding
from webapp.views.feature_sites import (APP_MINUTES, APP_SETTINGS, CAPTION as SITES_CAPTION,  # noqa: F401
                                        dictionaries_or_stop, drop_feature_keys, forget_feature_of_another_layer,
                                        quality_caption, site_key, site_label, site_names,  # (one door)
                                        training_or_stop)

SHOWN_CONTEXTS = 20
MAX_OVER_TRAINING = 6        # checkpoints of a run read for a feature (each is loaded: webapp.models.MAX_MODELS)


def position_labels(ckpt, site: str, result) -> list[str]:
    """The positions the site reads: source pieces (encoder), or "reads → writes" (decoder)."""
    tok, src_ids, out = ckpt.tokenizer, list(result.src_ids), list(result.best.ids)
    if site.startswith("encoder."):
        return [f"{i + 1} {tok.id_to_piece(t, 'src')}" for i, t in enumerate(src_ids)]
    read = ["<s>"] + [tok.id_to_piece(t, "tgt") for t in out[:-1]]
    return [f"{i + 1} {r}→{tok.id_to_piece(w, 'tgt')}" for i, (r, w) in enumerate(zip(read, out))]


def sentence_section(ckpt, site: str, found, labels: list[str], name: str) -> None:
    downloads.chart(plots.position_features(found.features, found.values, labels,
                                            f"{site_label(site)}: the strongest features at each position"),
                    downloads.file_stem(name, "features", site_key(site)), key="features_positions")
    rows = [{"position": labels[t], "rank": r + 1, "feature": int(found.features[t, r]),
             "activation": float(found.values[t, r])}
            for t in range(len(labels)) for r in range(found.features.shape[1]) if found.features[t, r] >= 0]
    downloads.table_csv_button(pd.DataFrame(rows), downloads.file_stem(name, "features", site_key(site)),
                               key="features_positions_csv", label="The strongest features per position (CSV)")


def linked_feature(width: int) -> int | None:
    """The feature a link names (`feature=`), when it is one of the dictionary's (0 to width - 1): a feature
    is a name, not an amount, so `5.5` or a 400-digit number names none (they opened a feature the link
    never named: the nearest of those firing, or the last one)."""
    raw = url.raw(url.FEAT_ID)
    feature = whole_number(raw, digits=9) if raw is not None else None
    return feature if feature is not None and feature < width else None


def active_features(found) -> list[int]:
    """The features that fire in the sentence, strongest first."""
    best: dict[int, float] = {}
    for f, v in zip(found.features.ravel(), found.values.ravel()):
        if f >= 0:
            best[int(f)] = max(best.get(int(f), 0.0), float(v))
    return sorted(best, key=lambda f: -best[f])


def _pieces(tok, text: str, side: str, max_len: int, special) -> list[str]:
    from explorer.text.encoding import source_ids, target_ids
    if side == "src":
        return [tok.id_to_piece(i, "src") for i in source_ids(tok, text, max_len, special)]
    ids = target_ids(tok, text, max_len, special)
    return ["<s>"] + [tok.id_to_piece(i, "tgt") for i in ids[1:]]


def _marked(pieces: list[str], at: int, before: int = 12, after: int = 8) -> str:
    """The pieces around `at` as text, the piece at `at` between ⟦ ⟧."""
    shown = [f"⟦{p.replace('▁', '')}⟧" if i == at else p for i, p in enumerate(pieces)][max(0, at - before):at + after]
    return ("…" if at > before else "") + "".join(shown).replace("▁", " ").strip()


def _linked(links: dict, word: str, candidates: list[str], forward: bool) -> str:
    """The candidate the training data links most often with `word` ("" when none is linked)."""
    if forward:
        counts = links.get(word, {})
        scored = [(counts.get(c, 0), c) for c in candidates]
    else:
        scored = [(links.get(c, {}).get(word, 0), c) for c in candidates]
    best = max(scored, default=(0, ""))
    return best[1] if best[0] > 0 else ""


NO_LINKS = ("No aligned words: the training data links no word to another (every target word of it occurs in more "
            "than one training pair in a hundred, too common to tell which source word brings it along).")
NO_INDEX = "No aligned words: this model's training data is not counted here (no grounding index)."


def contexts_table(ckpt, site: str, index, feature: int, pairs: list, links: dict) -> pd.DataFrame:
    """The feature's strongest training contexts, each with the word of the pair's other side the training
    data `links` (the grounding index's) to the context's word; without any links (the numbers: every word too
    common) that column is left out rather than shown empty (feature_card says why)."""
    tok, cfg = ckpt.tokenizer, ckpt.model.cfg
    encoder = site.startswith("encoder.")
    rows = []
    for pair_at, position, value in index.contexts(feature)[:SHOWN_CONTEXTS]:
        pair = pairs[pair_at]
        if encoder:
            pieces = _pieces(tok, pair.src, "src", cfg.max_len, cfg.special)
            word = span_word(pieces, position) if position < len(pieces) else ""
            aligned = _linked(links, word, words(pair.tgt), forward=True)
            rows.append({"activation": value, "context": _marked(pieces, position), "word": word,
                         "aligned target word": aligned, "the pair's other side": pair.tgt, "pair": pair_at + 1})
        else:
            pieces = _pieces(tok, pair.tgt, "tgt", cfg.max_len, cfg.special)
            written = pieces[1:] + ["</s>"]
            word = span_word(written, position) if position < len(written) else ""
            aligned = _linked(links, word, words(pair.src), forward=False)
            rows.append({"activation": value, "context": _marked(pieces, position), "writes next": written[position],
                         "aligned source word": aligned, "the pair's other side": pair.src, "pair": pair_at + 1})
    table = pd.DataFrame(rows)
    return table if links else table.drop(columns=["aligned target word", "aligned source word"], errors="ignore")


def feature_card(ckpt, site: str, feature: int, index, pairs: list, dataset: str, stamp: tuple, name: str) -> None:
    st.subheader(f"Feature #{feature} of {site_label(site)}")
    active = int(index.active[feature])
    st.caption(f"Fires on {active:,} of the {index.tokens:,} training positions read ({index.density(feature):.2%}, "
               f"{len(index.pairs):,} training pairs); strongest activation {float(index.max_value[feature]):.3f}.")
    if active == 0:
        st.info("This feature never fired on the training pairs read: there are no contexts to show.")
        return
    found = grounding.training_index(ckpt)
    table = contexts_table(ckpt, site, index, feature, pairs, found.links if found is not None else {})
    st.markdown("**Where it fires most in the training pairs** (the piece it reads between ⟦ ⟧)")
    st.dataframe(table, hide_index=True, key="features_contexts", **presenter.table_columns(
        {"activation": 90, "context": 420, "aligned target word" if site.startswith("encoder.")
         else "aligned source word": 160},
        {"activation": st.column_config.NumberColumn(format="%.3f")}))
    if not {"aligned target word", "aligned source word"} & set(table.columns):
        st.caption(NO_LINKS if found is not None else NO_INDEX)
    downloads.table_csv_button(table, downloads.file_stem(name, "feature", site_key(site), feature, "contexts"),
                               key="features_contexts_csv", label="Its training contexts (CSV)")
    c1, c2 = st.columns(2)
    with c1:
        downloads.chart(plots.histogram(index.edges(feature), index.hist[feature], "How strongly it fires"),
                        downloads.file_stem(name, "feature", site_key(site), feature, "histogram"),
                        key="features_histogram")
    with c2:
        effects_view(ckpt, site, feature, table, dataset, stamp, len(pairs), name)
    over_training_view(ckpt, site, feature, dataset, stamp, len(pairs), name)


def effects_view(ckpt, site: str, feature: int, table: pd.DataFrame, dataset: str, stamp: tuple, n_pairs: int,
                 name: str) -> None:
    found = state.friendly(feature_analyses.feature_effects, ckpt, site, stamp, dataset, n_pairs, feature,
                           what="Removing the feature at its contexts")
    if found is None:
        return
    tok = ckpt.tokenizer
    if not site.startswith("encoder."):
        downloads.chart(plots.token_effects([(tok.id_to_piece(i, "tgt"), v) for i, v in found.raised],
                                            [(tok.id_to_piece(i, "tgt"), v) for i, v in found.lowered],
                                            f"What it raises and lowers (mean of {found.contexts} contexts)"),
                        downloads.file_stem(name, "feature", site_key(site), feature, "effects"), key="features_effects")
        return
    st.markdown(f"**What it helps write** (removed at each of its {found.contexts} contexts, the training pair "
                "teacher-forced)")
    rows = []
    for (position, effect), (_, row) in zip(found.helps, table.iterrows()):
        pair = analyses.training_split(dataset)[int(row["pair"]) - 1]
        target = _pieces(tok, pair.tgt, "tgt", ckpt.model.cfg.max_len, ckpt.model.cfg.special)[1:] + ["</s>"]
        rows.append({"word": row["word"], "output piece it helps most": target[position] if position < len(target)
                     else "?", "log p gained (nats)": effect,
                     **({"aligned target word": row["aligned target word"]} if "aligned target word" in row else {})})
    st.dataframe(pd.DataFrame(rows), hide_index=True, key="features_helps", **presenter.table_columns(
        {"word": 170, "output piece it helps most": 250, "log p gained (nats)": 170, "aligned target word": 200},
        {"log p gained (nats)": st.column_config.NumberColumn(format="%+.3f")}))
    if found.heads is not None and found.heads.size:
        downloads.chart(plots.head_reads(found.heads, "The cross-attention heads that read it: how much each "
                                                      "head's write changes without it"),
                        downloads.file_stem(name, "feature", site_key(site), feature, "heads"), key="features_heads")


def over_training_view(ckpt, site: str, feature: int, dataset: str, stamp: tuple, n_pairs: int, name: str) -> None:
    """The feature at its training contexts in each checkpoint of this checkpoint's run (the Checkpoints
    page's scrubber steps), read by this checkpoint's dictionary."""
    run = state.run_of_checkpoint(ckpt)
    if run is None or len(run.checkpoints) < 2:
        st.caption("Across training: this checkpoint has no other checkpoints of its run here.")
        return
    path = Path(str(ckpt.path)).resolve()
    at = next((k for k, i in enumerate(run.checkpoints) if Path(str(i.path)).resolve() == path), None)
    picked = sorted({round(k * (len(run.checkpoints) - 1) / (MAX_OVER_TRAINING - 1)) for k in range(MAX_OVER_TRAINING)}
                    | ({at} if at is not None else set()))           # a long run: evenly spaced, this one kept
    found = state.friendly(feature_analyses.feature_over_training, ckpt, site, stamp, dataset, n_pairs, feature,
                           tuple(str(run.checkpoints[k].path) for k in picked), what="Reading the run's checkpoints")
    if found is None:
        return
    here = picked.index(at) if at is not None else None
    downloads.chart(plots.over_training(found.labels, found.values, here,
                                        f"Across the run's checkpoints: feature #{feature} at its "
                                        f"{found.values.shape[1]} strongest contexts"),
                    downloads.file_stem(name, "feature", site_key(site), feature, "over_training"),
                    key="features_over_training")
    st.caption("What each checkpoint's site reads at the same training contexts, read by this checkpoint's dictionary "
               "(circled). An earlier checkpoint's stream is another basis: its value says how much of what this "
               "feature reads was already there, not what that checkpoint's own features were.")


def steering_section(ckpt, site: str, feature: int, index, found, labels: list[str], result, stamp: tuple,
                     n_pairs: int, name: str) -> None:
    st.subheader("Steer: set the feature and translate again")
    strongest = float(index.max_value[feature])
    url.seed(url.FEAT_VALUE, "features_value", 0.0, low=0.0, high=url.FEAT_VALUE.high)
    value = st.number_input("Set its activation to (0 removes it)", 0.0, float(url.FEAT_VALUE.high), key="features_value",
                            step=0.5, help=f"Its strongest activation in the training pairs read: {strongest:.3f}. The "
                                           "rest of the model is left exactly as it is: the site's output moves only "
                                           "by this feature's share.")
    url.write(url.FEAT_VALUE, "features_value", float(value), default=0.0)
    positions = None
    if site.startswith("encoder."):
        fired = [t for t in range(len(labels)) if feature in found.features[t]]
        if "features_at" not in st.session_state or st.session_state.get("_features_at_for") != (site, feature):
            given = url.raw(url.FEAT_AT)
            linked = url.listed(given, [str(t + 1) for t in range(len(labels))])                 # 1-based
            url.hold("features_at", [int(p) - 1 for p in linked] or ([] if given == url.NONE else fired))
            st.session_state["_features_at_for"] = (site, feature)
        else:
            url.hold("features_at", st.session_state["features_at"])
        picked = st.multiselect("At these source positions", range(len(labels)), key="features_at",
                                format_func=lambda t: labels[t])
        url.put(**{url.FEAT_AT.key: url.list_text(p + 1 for p in picked)})     # emptied: "none", kept
        if not picked:
            st.info("Pick source positions above: the feature is set there and the sentence translated again.")
            return
        positions = tuple(sorted(picked))
    else:
        url.put(**{url.FEAT_AT.key: None})            # no position picker drawn: no positions in the link
        st.caption("A decoder feature is set at every target position (decoding reads one position at a time).")
    steered = state.friendly(feature_analyses.steer, ckpt, site, stamp, n_pairs, feature, float(value),
                             tuple(result.src_ids), tuple(result.best.ids), positions, what="Translating again")
    if steered is None:
        return
    text = ckpt.tokenizer.decode(steered.out_ids, side="tgt")
    plain = ckpt.tokenizer.decode(steered.plain_ids, side="tgt")
    c1, c2 = st.columns(2)
    c1.markdown("**Original:** " + md_escape(plain or "(empty)"))
    c2.markdown(f"**With feature #{feature} at {value:g}:** " + md_escape(text or "(empty)"))
    if plain != result.text:                  # sampling, a beam or length limits above: both lines here are greedy
        st.caption("Both translated greedily, so that only the feature differs between them; the translation "
                   "above used the page's decoding settings.")
    if text == plain:
        st.success("Same translation (how sure the model stays of it may still change: see below).")
    else:
        st.warning("The translation changed.")
    downloads.chart(logprob_delta_figure(result.best.pieces, steered.before, steered.after,
                                         "How sure the model stays of its original output"),
                    downloads.file_stem(name, "feature", site_key(site), feature, "steer"), key="features_steer")
