"""How well the grounded-or-guessing verdict separates everyday sentences from held-out Bible verses, beside
the model's own signals, and what it costs beside a translation.

    python -m benchmarks grounding [--checkpoint checkpoints/bible-es-en] [--test 200] [--beam 5] [--grid] [--speed]
    python -m benchmarks grounding --state-map [--checkpoint ...]

Sets: gold/everyday-es-en.tsv (60 everyday Spanish sentences written for this, with references), the
first --test verses of the checkpoint's test.tsv (never counted by the index, and apart from the
development verses its threshold was calibrated on), gold/english-sentences.txt (50 English sentences).
Printed: the AUROC (everyday as positives) of the verdict's score (both signals when the checkpoint has an
encoder-state map), of the surprise alone and the encoder-state distance alone, of the translation's negative
length-normalised log-probability, and of one minus its ALTI+ mean source share (explorer.studies.contributions,
teacher-forced on the model's own output); the share of each set called a guess at the shipped
threshold (and with the counts alone); the share of English sentences named English and of test verses
so named; chrF of the translations of each set; the verdict's time per sentence beside the translation's, in the same
process (a ratio); the index's size on disk and in memory, and the time and peak memory of building it
from the training data. Word marks: on gold/everyday-es-en-wrong.tsv (30 everyday sentences, the model's
output with its wrong words marked by hand), the precision and recall of the output words the verdict
marks (no source word brings them along), beside the ALTI+ flag of the Contributions page (an output
word with a piece whose source share is under the 5th percentile of the first 30 test references'),
both over every word and over the words that are not common (links.GLUE_SHARE); with --grid, the marks'
precision and recall around the shipped settings (common words at 0.5-5% of the pairs, link share 5-30%);
with --speed, only the verdict's time beside the translation's on 20 everyday and 20 test sentences, and a
first word picked as the app does it (reading the training pairs, the word's concordance and nearest training
contexts) and the next; an output word's attribution and contexts when the training pass is kept here.
With --state-map, only the encoder-state map built and calibrated from the training data as `build.ship`
builds the shipped one (nothing saved): its seconds, its size, its threshold beside the kept map's.
"""
from __future__ import annotations

import argparse
import os
import time
import tracemalloc
from pathlib import Path

import numpy as np
import sacrebleu
import torch

from explorer.studies.contributions.detached import auroc
from explorer.studies.contributions.sentence import sentence_contributions
from explorer.data.files import read_tsv
from explorer.decoding.translate import DecodeConfig, translate
from explorer.files.places import REPO_ROOT
from explorer.studies.grounding import index as ix
from explorer.studies.grounding import influence, states
from explorer.studies.grounding.gradients import watched_linears
from explorer.studies.grounding.lookup import nearest_contexts
from explorer.studies.common.training_data import dataset_pairs
from explorer.studies.grounding.concordance import WordPairs
from explorer.studies.grounding.build import build, calibrated_map, dataset_of, ensure, kept_states
from explorer.data import load_corpus
from explorer.studies.grounding import links as lk
from explorer.studies.grounding.links import marked
from explorer.studies.grounding.verdict import other_language, score, verdict
from explorer.studies.common.words import words
from explorer.text.encoding import output_ids, source_ids
from explorer.store.checkpoint import load_checkpoint

GOLD = REPO_ROOT / "gold"


def _sets(test_tsv: Path, n_test: int) -> dict[str, list[tuple[str, str | None]]]:
    rows = [line.split("\t") for line in (GOLD / "everyday-es-en.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    english = [line for line in (GOLD / "english-sentences.txt").read_text(encoding="utf-8").splitlines() if line]
    return {"everyday": [(s, r) for s, r in rows], "test": [(p.src, p.tgt) for p in read_tsv(str(test_tsv))[:n_test]],
            "english": [(s, None) for s in english]}


def _run(ckpt, index, smap, sentences, cfg) -> dict:
    out = {"score": [], "distance": [], "combined": [], "neg_logprob": [], "alti": [], "text": [], "guess": [], "partly": [],
           "guess_counts": [], "english": [], "t_translate": 0.0, "t_verdict": 0.0}
    for source, _ in sentences:
        t0 = time.perf_counter()
        result = translate(ckpt.model, ckpt.tokenizer, source, cfg)
        t1 = time.perf_counter()
        distance = None if smap is None else \
            states.distance(smap, states.source_states(ckpt.model, ckpt.tokenizer, [source])[0])
        found = verdict(index, source, ckpt.name, result.text, distance, smap.calibration if smap else None)
        t2 = time.perf_counter()
        out["distance"].append(distance if distance is not None else 0.0)
        out["combined"].append(found.combined if found.combined is not None else found.score)
        out["guess_counts"].append(bool(verdict(index, source, ckpt.name).guessing))
        out["t_translate"] += t1 - t0
        out["t_verdict"] += t2 - t1
        best = result.hypotheses[0] if result.hypotheses else None
        out["text"].append(result.text)
        out["score"].append(score(index, source))
        out["guess"].append(bool(found.guessing))
        out["partly"].append(found.partly)
        out["english"].append(other_language(index, source) is not None)
        out["neg_logprob"].append(-best.normalized if best is not None else 0.0)
        if best is not None and best.ids:
            share = sentence_contributions(ckpt.model, result.src_ids, best.ids).source_share
            out["alti"].append(1.0 - float(np.mean(share)))
        else:
            out["alti"].append(1.0)
    return out


def _state_map(ckpt, index) -> int:
    """The encoder-state map as build.ship makes it (calibrated_map), timed, beside the kept one."""
    t0 = time.perf_counter()
    smap = calibrated_map(ckpt.path, ckpt.model, ckpt.tokenizer, ckpt.meta, index)
    seconds = time.perf_counter() - t0
    kept = kept_states(ckpt.model, ckpt.meta, index.pairs)
    said = "none kept" if kept is None else f"the kept map's {kept.calibration.get('threshold')}"
    print(f"encoder-state map of {ckpt.name}: {len(smap.states):,} training piece states, built and calibrated in "
          f"{seconds:.0f} s (load average {os.getloadavg()[0]:.1f}); threshold {smap.calibration.get('threshold')} "
          f"({said})")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks grounding", description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", default=str(REPO_ROOT / "checkpoints" / "bible-es-en"))
    parser.add_argument("--test", type=int, default=200, help="held-out test verses (default 200)")
    parser.add_argument("--beam", type=int, default=5, help="beam size of the translations (default 5, as the app)")
    parser.add_argument("--grid", action="store_true", help="only the word marks' precision and recall around the "
                                                            "shipped settings")
    parser.add_argument("--speed", action="store_true", help="only what the verdict and a word's concordance cost "
                                                             "beside a translation (20 everyday + 20 test sentences)")
    parser.add_argument("--state-map", action="store_true", help="only the encoder-state map built and calibrated "
                                                                 "as the shipped one is (not saved), timed")
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    ckpt = load_checkpoint(args.checkpoint)
    path = ix.index_path(dataset_of(ckpt.meta))
    tracemalloc.start()
    t0 = time.perf_counter()
    index = ensure(ckpt.path, ckpt.meta)
    index.bigram_model()
    load_s = time.perf_counter() - t0
    held_mb = tracemalloc.get_traced_memory()[0] / 2**20
    tracemalloc.stop()
    if args.grid:
        _grid(index)
        return 0
    if args.speed:
        _speed(ckpt, index, _sets(ckpt.path / "test.tsv", 20), DecodeConfig(beam_size=args.beam))
        return 0
    if args.state_map:
        return _state_map(ckpt, index)
    print(f"index: {path.name}, {path.stat().st_size / 1e6:.2f} MB on disk, {held_mb:.0f} MB in memory, "
          f"loaded in {load_s:.2f} s; threshold {index.threshold} ({index.calibration})")
    smap = kept_states(ckpt.model, ckpt.meta, index.pairs)
    print("encoder-state map: " + ("none (the verdict weighs the counts alone)" if smap is None else
                                   f"{len(smap.states):,} training piece states x {smap.states.shape[1]}; "
                                   f"calibration {smap.calibration}"))
    sets = _sets(ckpt.path / "test.tsv", args.test)
    runs = {name: _run(ckpt, index, smap, rows, DecodeConfig(beam_size=args.beam)) for name, rows in sets.items()}
    every, test = runs["everyday"], runs["test"]
    for signal, label in (("combined", "verdict (both signals)"), ("score", "surprise alone"),
                          ("distance", "encoder-state distance"), ("neg_logprob", "-normalised log-prob"),
                          ("alti", "1 - ALTI+ source share")):
        print(f"AUROC everyday ({len(every['score'])}) vs test ({len(test['score'])}), {label:<24}"
              f"{auroc(every[signal], test[signal]):.3f}")
    for name, run in runs.items():
        refs = [r for _, r in sets[name]]
        chrf = sacrebleu.corpus_chrf(run["text"], [refs]).score if all(refs) else float("nan")
        print(f"{name:<9} called guesses {np.mean(run['guess']):6.1%} (counts alone {np.mean(run['guess_counts']):6.1%}),"
              f" partly {np.mean(run['partly']):6.1%}   named English {np.mean(run['english']):6.1%}   chrF {chrf:5.1f}")
    n = sum(len(r["text"]) for r in runs.values())
    t_tr, t_vd = sum(r["t_translate"] for r in runs.values()), sum(r["t_verdict"] for r in runs.values())
    print(f"time per sentence: translation (beam {args.beam}) {1e3 * t_tr / n:.1f} ms, verdict with its word marks "
          f"{1e3 * t_vd / n:.2f} ms ({t_vd / t_tr:.4f}x the translation's), over {n} sentences")
    _marks(ckpt, index)
    tracemalloc.start()
    t0 = time.perf_counter()
    built = build(ckpt.path, ckpt.meta)
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    print(f"index built from the training data in {time.perf_counter() - t0:.0f} s, peak {peak:.0f} MB traced; "
          f"equal to the kept one: {built.to_json() == index.to_json()}")
    return 0


def _speed(ckpt, index, sets, cfg) -> None:
    """The verdict (both signals, word marks) beside the translation, then the first word's concordance (its
    word index built) and the next one's, each timed in this process."""
    smap = kept_states(ckpt.model, ckpt.meta, index.pairs)
    sentences = [s for s, _ in sets["everyday"][:20] + sets["test"][:20]]
    t_translate = t_verdict = 0.0
    for source in sentences:
        t0 = time.perf_counter()
        output = translate(ckpt.model, ckpt.tokenizer, source, cfg).text
        t1 = time.perf_counter()
        distance = states.distance(smap, states.source_states(ckpt.model, ckpt.tokenizer, [source])[0]) if smap else None
        verdict(index, source, ckpt.name, output, distance, smap.calibration if smap else None)
        t2 = time.perf_counter()
        t_translate, t_verdict = t_translate + t1 - t0, t_verdict + t2 - t1
    n = len(sentences)
    print(f"per sentence: translation (beam {cfg.beam_size}) {1e3 * t_translate / n:.0f} ms, verdict (both signals, "
          f"word marks) {1e3 * t_verdict / n:.1f} ms ({t_verdict / t_translate:.3f}x), over {n} sentences")
    _first_pick(ckpt, smap, sets["everyday"][0][0], cfg)


def _first_pick(ckpt, smap, source: str, cfg) -> None:
    """What the app does when a word is first picked, timed: the training pairs read (once per dataset),
    the word's concordance, its nearest training contexts; then a second word; for an output word, its
    attribution and decoder-view contexts when this machine has the training pass (runs/grounding/)."""
    best = translate(ckpt.model, ckpt.tokenizer, source, cfg).best
    words_in = [w for w in words(source) if len(w) > 3]
    out_words = [w for w in words(best.text) if len(w) > 3]
    t0 = time.perf_counter()
    pairs = WordPairs(dataset_pairs(dataset_of(ckpt.meta)))
    t1 = time.perf_counter()
    pairs.concordance(words_in[0], "source", out_words[0])
    nearest_contexts(ckpt.model, ckpt.tokenizer, smap, pairs.pairs, source, words_in[0]) if smap else None
    t2 = time.perf_counter()
    pairs.concordance(words_in[1], "source")
    nearest_contexts(ckpt.model, ckpt.tokenizer, smap, pairs.pairs, source, words_in[1]) if smap else None
    t3 = time.perf_counter()
    print(f"a source word picked: the first {1e3 * (t2 - t0):.0f} ms (reading the {len(pairs.pairs):,} training pairs "
          f"{1e3 * (t1 - t0):.0f} ms, once per dataset; its concordance and nearest contexts {1e3 * (t2 - t1):.0f} ms), "
          f"the next {1e3 * (t3 - t2):.0f} ms")
    dataset, sha = dataset_of(ckpt.meta), str(ckpt.meta.get("weights_sha256") or "")
    omap = kept_states(ckpt.model, ckpt.meta, len(pairs.pairs), "output")
    store_path = influence.store_path(dataset, sha)
    if omap is None or not store_path.is_file():
        print("an output word picked: not timed (no training pass kept here: python -m benchmarks attribution, "
              "or the app's button)")
        return
    t0 = time.perf_counter()
    store = influence.load(store_path, dataset, sha, len(pairs.pairs), [n for n, _ in watched_linears(ckpt.model)])
    t1 = time.perf_counter()
    word = out_words[0]
    pairs.concordance(word, "output")
    influence.top(store, influence.query(ckpt.model, ckpt.tokenizer, source, best.ids,
                                         influence.word_positions(best.pieces, word)))
    nearest_contexts(ckpt.model, ckpt.tokenizer, omap, pairs.pairs, source, word, best.ids)
    t2 = time.perf_counter()
    print(f"an output word picked: {1e3 * (t2 - t1):.0f} ms (concordance, attribution, nearest contexts), after "
          f"reading the gradient store once {1e3 * (t1 - t0):.0f} ms")


def _grid(index) -> None:
    """The marks' precision and recall for other common-word and link-share settings (one count of the links at
    the lowest share, filtered for the others)."""
    rows = [line.split("\t") for line in (GOLD / "everyday-es-en-wrong.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    gold = [set(g.split()) for _, _, g in rows]
    lowest = lk.LINK_SHARE
    try:
        lk.LINK_SHARE = 0.05
        links, verses = lk.count_links(load_corpus(index.dataset).train, set())
    finally:
        lk.LINK_SHARE = lowest
    for common_share in (0.005, 0.01, 0.02, 0.05):
        common = {w for w, n in index.tgt_words.items() if n >= common_share * index.pairs}
        for share in (0.05, 0.1, 0.2, 0.3):
            marks = [{t for t in set(words(o)) if t not in common and not any(
                links.get(s, {}).get(t, 0) >= max(lk.LINK_MIN, share * verses.get(s, 0)) for s in set(words(s_)))}
                for s_, o, _ in rows]
            print(f"common words at {common_share:.1%}, link share {share:.0%}: {_scores(marks, gold)}")


def _alti_flags(ckpt, source: str, output: str, floor: float) -> set[str]:
    """The output's words with a piece whose ALTI+ source share is under `floor` (teacher-forced on it)."""
    special, max_len = ckpt.model.cfg.special, ckpt.model.cfg.max_len
    src, out = source_ids(ckpt.tokenizer, source, max_len, special), output_ids(ckpt.tokenizer, output, max_len, special)
    share = sentence_contributions(ckpt.model, src, out).source_share                  # [T]
    flagged, word, hit = set(), [], False
    for i, piece in zip(out, share):
        text = ckpt.tokenizer.id_to_piece(int(i), side="tgt")
        if text.startswith("▁") and word:
            flagged |= set(words("".join(word))) if hit else set()
            word, hit = [], False
        word.append(text.lstrip("▁"))
        hit = hit or piece < floor
    return flagged | (set(words("".join(word))) if hit else set())


def _scores(pred: list[set[str]], gold: list[set[str]]) -> str:
    tp = sum(len(p & g) for p, g in zip(pred, gold))
    fp, fn = sum(len(p - g) for p, g in zip(pred, gold)), sum(len(g - p) for p, g in zip(pred, gold))
    return f"precision {tp / max(tp + fp, 1):.3f}, recall {tp / max(tp + fn, 1):.3f} ({tp} right, {fp} wrong, {fn} missed)"


def _marks(ckpt, index) -> None:
    rows = [line.split("\t") for line in (GOLD / "everyday-es-en-wrong.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    refs = [p for p in read_tsv(str(ckpt.path / "test.tsv")) if p.tgt.strip()][:30]
    special, max_len = ckpt.model.cfg.special, ckpt.model.cfg.max_len
    shares = np.concatenate([sentence_contributions(
        ckpt.model, source_ids(ckpt.tokenizer, p.src, max_len, special),
        output_ids(ckpt.tokenizer, p.tgt, max_len, special)).source_share for p in refs])
    floor = float(np.percentile(shares, 5))
    cfg = DecodeConfig(beam_size=5)
    same = sum(translate(ckpt.model, ckpt.tokenizer, s, cfg).text == o for s, o, _ in rows)
    gold = [set(g.split()) for _, _, g in rows]
    ours = [set(marked(verdict(index, s, ckpt.name, o).output)) for s, o, _ in rows]
    alti = [_alti_flags(ckpt, s, o, floor) for s, o, _ in rows]
    common = index.glue()
    print(f"word marks on {len(rows)} everyday sentences ({same} of their outputs are this model's beam-5 output "
          f"today), {sum(map(len, gold))} wrong words marked by hand:")
    print(f"  the verdict's marks: {_scores(ours, gold)}")
    print(f"  ALTI+ flag (share < p5 = {floor:.3f}): {_scores(alti, gold)}")
    print(f"  ALTI+ flag, common words left out: {_scores([a - common for a in alti], gold)}")


if __name__ == "__main__":
    raise SystemExit(main())
