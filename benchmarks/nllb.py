"""NLLB-200-distilled-600M's size on the CPU: the import, a load, translation beside HF generate, and every
page of the app, on random weights of that shape; with --analyses, each analysis of one sentence instead.

No model can be downloaded here, so the model is a random M2M100ForConditionalGeneration with the config
facebook/nllb-200-distilled-600M's config.json states (d_model 1024, 12 + 12 layers, 16 heads, ffn 4096,
256,206 ids: 615M parameters, 2.5 GB in float32), saved as model.safetensors with an NLLB tokenizer: a BPE
sentencepiece model trained on a few lines, padded with unused pieces to NLLB's 256,000, so that fairseq's
layout (the 202 language codes after the pieces + 1, <mask> after them, 2 unused ids) numbers exactly the
real model's 256,206 ids. No tokenizer.json: the import then takes that layout (m2m100_tokenizer).

Every stage runs in a fresh process (`--stage`), so each reports its own peak memory (ru_maxrss) and the
HF model is gone before the import starts: build + save, import (EXPLORER_MAX_MODEL_BYTES raised to what
the import needs, rounded up to 0.5 GiB: the default bound is 2 GiB), load of the checkpoint, translation,
pages. Translation: the same --sentences random sources of --src-len pieces (the source tag, pieces,
</s>), each output forced to the target tag then exactly --out-len pieces (EOS forbidden until then: a
random model's outputs run anywhere), greedy and beam 5, ours (explorer.decoding.decode, the tag given)
beside HF generate (forced_bos_token_id) on the same weights in the same process, rounds interleaved;
medians per sentence and the ratio HF / ours. Pages: each page of the page table opened once by AppTest
on the imported model with one sentence and the app's defaults (a page that starts a background study
only shows its estimate: that is the time reported, and the estimate the page shows is printed).

--analyses: build, import, then (instead of load, translation and pages) each analysis the commands run, on
one short sentence (ANALYSIS_SENTENCE: 12 pieces, 14 source ids with the tag and </s>), through the library
functions the commands call, the tokenizer bound to the pair as the commands bind it (bound(), so every
decode and teacher-forced output starts with the forced target tag); each beside a greedy translation of the
same sentence timed in the same process (after a warm-up): seconds and the ratio to greedy, the ratio being
what travels on a shared machine. Lens (run_lens: DecoderLens at every encoder depth, logit lens), ALTI+
(run_contributions on the model's own output), patching (run_patching: one minimal pair's grids), search
(run_search: the beam-size curve, no length penalty, and exact search within --exact-seconds), alignment
(align_sentence: cross-attention, gradient x input, integrated gradients at --ig-steps, against a reference),
patching last (its grids are the most passes), the head lab
(one unit measured: a single head's removal on the sentence, checked in one pass and decoded again where
it changed; extrapolated with estimate_cost to the lab's defaults), and one teacher-forced forward (what
the feature dictionaries' rows cost). Grounding, features and graphs need the model's training pairs,
which an imported model does not have: refused, with the reason printed.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

NLLB_VOCAB = 256_206
NLLB_PIECES = 256_000                   # sentencepiece.bpe.model's pieces (<unk>, <s>, </s> among them)
SRC, TGT = "spa_Latn", "eng_Latn"
LINES = ["el presidente habló con los periodistas sobre la economía", "la casa es grande y la puerta está abierta",
         "the president spoke with the journalists about the economy", "the house is big and the door is open",
         "le président a parlé avec les journalistes de l'économie", "demain nous allons à la plage avec nos amis"]
SENTENCE = "el presidente habló con los periodistas sobre la economía y la casa es grande"
RESULT = "RESULT "


def nllb_config():
    """M2M100Config as facebook/nllb-200-distilled-600M's config.json has it, every value written out
    (transformers' M2M100Config defaults are M2M100-418M's: vocab_size 128,112, dropout 0.1, ...)."""
    from transformers import M2M100Config

    return M2M100Config(vocab_size=NLLB_VOCAB, d_model=1024, encoder_layers=12, decoder_layers=12,
                        encoder_attention_heads=16, decoder_attention_heads=16, encoder_ffn_dim=4096,
                        decoder_ffn_dim=4096, max_position_embeddings=1024, scale_embedding=True,
                        activation_function="relu", dropout=0.1, attention_dropout=0.1, activation_dropout=0.0,
                        encoder_layerdrop=0.0, decoder_layerdrop=0.0, init_std=0.02, pad_token_id=1,
                        bos_token_id=0, eos_token_id=2, decoder_start_token_id=2, tie_word_embeddings=True)


def padded_spm(pieces: int) -> bytes:
    """A BPE sentencepiece model of a few lines, padded with never-merged pieces to `pieces` pieces."""
    import io

    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb

    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(LINES), model_writer=buf, vocab_size=150, model_type="bpe",
                                   character_coverage=1.0, hard_vocab_limit=False, minloglevel=2, num_threads=1)
    proto = pb.ModelProto()
    proto.ParseFromString(buf.getvalue())
    low = min(p.score for p in proto.pieces)
    for i in range(len(proto.pieces), pieces):
        proto.pieces.add(piece=f"\u2581<pad{i}>", score=low - 1 - i, type=pb.ModelProto.SentencePiece.NORMAL)
    return proto.SerializeToString()


def _rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20        # KiB on Linux


def stage_build(folder: Path, args) -> dict:
    from transformers import M2M100ForConditionalGeneration

    start = time.perf_counter()
    (folder / "hf").mkdir(parents=True, exist_ok=True)
    (folder / "hf" / "sentencepiece.bpe.model").write_bytes(padded_spm(NLLB_PIECES))
    torch.manual_seed(args.seed)
    model = M2M100ForConditionalGeneration(nllb_config()).eval()
    built = time.perf_counter() - start
    model.save_pretrained(folder / "hf", safe_serialization=True)
    return {"build_s": built, "save_s": time.perf_counter() - start - built,
            "parameters": sum(p.numel() for p in model.parameters()), "peak_rss_gib": _rss_gib()}


def stage_import(folder: Path, args) -> dict:
    from explorer.interop.hf_import import import_m2m100

    start = time.perf_counter()
    import_m2m100(str(folder / "hf"), folder / "models" / "nllb-600m", dtype=torch.float16, src_lang=SRC,
                  tgt_lang=TGT)
    return {"import_s": time.perf_counter() - start, "peak_rss_gib": _rss_gib()}


def stage_load(folder: Path, args) -> dict:
    from explorer.store.checkpoint import load_checkpoint

    start = time.perf_counter()
    load_checkpoint(folder / "models" / "nllb-600m")
    return {"load_s": time.perf_counter() - start, "peak_rss_gib": _rss_gib()}


def stage_translate(folder: Path, args) -> dict:
    from transformers import M2M100ForConditionalGeneration

    from benchmarks.decode import time_rounds
    from explorer.config import DecodeConfig
    from explorer.decoding import decode
    from explorer.store.checkpoint import load_checkpoint

    ckpt = load_checkpoint(folder / "models" / "nllb-600m")
    ours, tok = ckpt.model, ckpt.tokenizer
    given = list(tok.forced_target)
    hf = M2M100ForConditionalGeneration.from_pretrained(folder / "hf", torch_dtype=torch.float32).eval()
    gen = torch.Generator().manual_seed(args.seed)
    src_tag = tok.languages[SRC]
    srcs = [torch.tensor([[src_tag, *torch.randint(4, NLLB_PIECES, (args.src_len - 2,), generator=gen).tolist(), 2]])
            for _ in range(args.sentences)]
    n = args.out_len
    configs = {"greedy": DecodeConfig(strategy="greedy", max_len_a=0.0, max_len_b=n + len(given), min_len=n),
               "beam 5": DecodeConfig(beam_size=5, n_best=1, max_len_a=0.0, max_len_b=n + len(given), min_len=n,
                                      length_penalty="average")}
    lengths: dict[str, set] = {}

    def ours_run(name):
        def run():
            with torch.inference_mode():
                out = [decode(ours, s, configs[name], given=given)[0] for s in srcs]
            lengths[f"ours {name}"] = {len(d.hypotheses[0].ids) for d in out}
        return run

    def hf_run(beams):
        def run():
            with torch.inference_mode():
                out = [hf.generate(input_ids=s, attention_mask=torch.ones_like(s), num_beams=beams, do_sample=False,
                                   max_new_tokens=n + 1, min_new_tokens=n + 1, forced_bos_token_id=given[0],
                                   early_stopping=False, length_penalty=1.0) for s in srcs]
            lengths[f"HF {beams}"] = {o.shape[1] for o in out}
        return run

    variants = {"ours greedy": ours_run("greedy"), "HF generate greedy": hf_run(1),
                "ours beam 5": ours_run("beam 5"), "HF generate beam 5": hf_run(5)}
    wall, cpu = time_rounds(variants, args.warmup, args.repeats)
    med = {k: statistics.median(v) / args.sentences for k, v in wall.items()}
    med_cpu = {k: statistics.median(v) / args.sentences for k, v in cpu.items()}
    return {"wall_s": med, "cpu_s": med_cpu, "lengths": {k: sorted(v) for k, v in lengths.items()},
            "peak_rss_gib": _rss_gib()}


def stage_pages(folder: Path, args) -> dict:
    """Each page of the page table opened once on the imported model, as tests/app opens them."""
    from streamlit.testing.v1 import AppTest

    from explorer.files.places import REPO_ROOT
    from webapp import lecture, state

    os.environ.pop(state.ROOTS_ENV, None)
    os.environ[state.MODELS_ENV] = str(folder / "models")
    state.refresh_checkpoints()
    wanted = set(args.pages.split(",")) if args.pages else None
    times, notes = {}, {}
    for entry in lecture.PAGES_TABLE:
        if wanted and entry.url_path not in wanted:
            continue
        at = AppTest.from_file(str(REPO_ROOT / "app.py"), default_timeout=args.page_timeout)
        at.query_params["ckpt"] = "nllb-600m"
        at.session_state["text"] = SENTENCE
        start = time.perf_counter()
        try:
            at.run()
            opened = time.perf_counter()
            at.switch_page(f"webapp/pages/{entry.script}").run()
        except RuntimeError as exc:                               # AppTest's timeout
            times[entry.url_path], notes[entry.url_path] = None, f"not finished: {exc}"[:200]
            print(f"page {entry.url_path}: {notes[entry.url_path]}", file=sys.stderr, flush=True)
            continue
        times[entry.url_path] = time.perf_counter() - opened
        # what a page says instead of running (no held-out set, no training data, no gold links) and estimates
        said = [str(e.value)[:160] for kind in ("info", "warning", "error") for e in at.get(kind)]
        said += [str(e.value) for e in at.markdown if str(e.value).startswith("About ")]
        failed = [str(e.value)[:200] for e in at.exception]
        notes[entry.url_path] = "; ".join(failed + said)[:400]
        if entry.url_path == lecture.START:
            times["first open (load included)"] = opened - start
        print(f"page {entry.url_path}: {times[entry.url_path]:.1f} s {notes[entry.url_path]}", file=sys.stderr,
              flush=True)                                        # as it goes: the stage's result comes at its end
    return {"page_s": times, "notes": notes, "peak_rss_gib": _rss_gib()}


ANALYSIS_SENTENCE = "la casa es grande y la puerta está abierta"       # 12 pieces of the padded model
ANALYSIS_REFERENCE = "the house is big and the door is open"
ANALYSIS_CORRUPT = ("el casa es grande y la puerta está abierta",          # as many pieces, one word swapped
                    "la casa es grande y el puerta está abierta", "la casa es grande y la puerta es abierta")
REFUSED = {
    "grounding": "needs the model's training pairs (its index of source-target counts); an imported model has "
                 "none, and the Grounding page and `grounding` command say so",
    "features": "dictionaries are trained per site from rows of the model's training pairs (200,000 rows per site "
                "by default); an imported model has no training pairs, so the page and command refuse; the "
                "teacher-forced forward timed here is what each row costs (rows come a sentence's tokens at a time)",
    "graphs": "reads the features study's transcoders (one per FFN: 24 here), which need the training pairs "
              "above: refused with them",
}


class _Pair:
    def __init__(self, src: str, tgt: str):
        self.src, self.tgt = src, tgt


def _hand_made_pair(model, tok, clean: str, corrupt: str, given: list[int]):
    """A MinimalPair of two sources whose greedy outputs agree (as a random model's do), measured at the first
    position after the forced tag on the two tokens the sources' logits tell apart most; for timing the grids."""
    from explorer.studies.patching.pair import MinimalPair
    from explorer.text.encoding import source_ids

    ids = [source_ids(tok, text, model.cfg.max_len, model.cfg.special) for text in (clean, corrupt)]
    prefix = list(given)
    tgt_in = torch.tensor([[model.cfg.special.start, *prefix]])
    with torch.inference_mode():
        logits = [model.generator.proj(model.decode(tgt_in, model.encode(torch.tensor([s]))[0], None)[:, -1])[0]
                  for s in ids]
    diff = logits[0] - logits[1]
    clean_token, corrupt_token = int(diff.argmax()), int(diff.argmin())
    changed = [i for i, (a, b) in enumerate(zip(*ids)) if a != b]
    return MinimalPair(clean_src=ids[0], corrupt_src=ids[1], changed=changed, prefix=prefix, clean_token=clean_token,
                       corrupt_token=corrupt_token, clean_output=prefix + [clean_token],
                       corrupt_output=prefix + [corrupt_token], given=len(given))


def stage_analyses(folder: Path, args) -> dict:
    """Each analysis of ANALYSIS_SENTENCE on the imported model beside a greedy translation of it."""
    import gc

    from explorer.decoding.teacher import score_targets
    from explorer.decoding.translate import forced_target, translate
    from explorer.store.checkpoint import load_checkpoint
    from explorer.studies.align.gold import GoldPair
    from explorer.studies.align.sentence import Method, align_sentence
    from explorer.studies.common.command import bound
    from explorer.studies.common.gradients import IG_STEPS
    from explorer.studies.common.sentences import GREEDY, build_sentences
    from explorer.studies.contrastive.job import SearchSettings, run_search
    from explorer.studies.contributions.job import ContributionSettings, run_contributions
    from explorer.studies.heads.importance import HeadRemover
    from explorer.studies.heads.job import LabSettings, estimate_cost
    from explorer.studies.lens.job import LensSettings, run_lens
    from explorer.studies.patching.grids import pair_grids
    from explorer.studies.patching.job import run_patching
    from explorer.text.encoding import output_ids, source_ids

    start = time.perf_counter()
    ckpt = bound(load_checkpoint(folder / "models" / "nllb-600m"), args.src_lang, args.tgt_lang)
    model, tok = ckpt.model, ckpt.tokenizer
    loaded = time.perf_counter() - start
    given = forced_target(tok)
    sentence, pairs = ANALYSIS_SENTENCE, [_Pair(ANALYSIS_SENTENCE, ANALYSIS_REFERENCE)]
    src = source_ids(tok, sentence, model.cfg.max_len, model.cfg.special)
    seconds: dict[str, float | None] = {}
    notes: dict[str, str] = {}

    def say(name: str) -> None:
        secs = seconds.get(name)
        ratio = f" ({secs / seconds['greedy']:.1f}x greedy)" if secs is not None and seconds.get("greedy") else ""
        print(f"analysis {name}: " + (f"{secs:.1f} s{ratio}" if secs is not None else "refused") +
              (f"  {notes[name]}" if name in notes else "") + f"  [peak {_rss_gib():.2f} GiB]", file=sys.stderr,
              flush=True)

    def timed(name: str, fn):
        gc.collect()
        t0 = time.perf_counter()
        out = fn()
        seconds[name] = time.perf_counter() - t0
        return out

    print(f"loaded in {loaded:.1f} s; source {len(src)} ids, forced target {given}", file=sys.stderr, flush=True)
    with torch.inference_mode():
        translate(model, tok, sentence, GREEDY)                                       # warm-up
        best = timed("greedy", lambda: translate(model, tok, sentence, GREEDY)).best
    notes["greedy"] = f"{len(best.ids)} output ids, the first {best.ids[0]}"
    say("greedy")
    out = output_ids(tok, ANALYSIS_REFERENCE, model.cfg.max_len, model.cfg.special)
    with torch.inference_mode():
        own = list(best.ids[:-1] if best.finished else best.ids)
        timed("teacher-forced forward", lambda: score_targets(model, [src], [own], GREEDY, given=given))
    say("teacher-forced forward")
    if args.analyses_only:
        wanted = set(args.analyses_only.split(","))
    else:
        wanted = {"contributions", "align attention", "align grad-x-input", "align integrated-gradients", "lens",
                  "patching", "heads unit", "search"}

    if "contributions" in wanted:
        result = timed("contributions", lambda: run_contributions(model, tok, pairs,
                                                                  ContributionSettings(sentences=1, forced="output")))
        notes["contributions"] = f"ALTI+ of the model's own output, {len(result['sentences'])} sentence"
        say("contributions")
    gold = GoldPair(src=sentence.split(), tgt=ANALYSIS_REFERENCE.split(), sure=frozenset())
    for kind in ("attention", "grad-x-input"):
        name = f"align {kind}"
        if name in wanted:
            timed(name, lambda: align_sentence(model, tok, gold, [Method(kind)], ig_steps=args.ig_steps))
            notes[name] = f"one sentence's word matrix against its reference ({len(out)} target ids, tag first)"
            say(name)
    if "lens" in wanted:
        result = timed("lens", lambda: run_lens(model, tok, pairs, LensSettings(sentences=1)))
        notes["lens"] = (f"DecoderLens at {len(result['decoder_lens'])} depths, logit lens at "
                         f"{len(result['logit_lens'])} decoder layers")
        say("lens")
    gc.collect()
    if "heads unit" in wanted:
        sents = build_sentences(model, tok, pairs, 1, forced="output")
        remover = timed("heads copy", lambda: HeadRemover(model, tok, sents))
        timed("heads baseline", lambda: remover.texts([]))
        say("heads baseline")
        head = ("decoder", model.cfg.n_decoder_layers - 1, 0)                         # the last decoder layer's first
        timed("heads unit", lambda: remover.texts([head]))
        cost = estimate_cost(model, LabSettings(), 200)
        unit = seconds["heads unit"]
        seconds["heads lab (defaults, 200 sentences) estimate"] = unit * cost.decodes * 200
        notes["heads unit"] = (f"one head's removal {head} on the sentence (checked {remover.checked}, decoded again "
                               f"{remover.redecoded}); the defaults: {cost.text()}")
        notes["heads lab (defaults, 200 sentences) estimate"] = (
            f"{cost.decodes} decodes x 200 sentences x the unit: an upper bound (the lab decodes in batches, which "
            f"read the weights once), {unit * cost.decodes * 200 / 86400:.1f} days")
        say("heads unit")
        say("heads lab (defaults, 200 sentences) estimate")
        del remover
        gc.collect()
    if "search" in wanted:
        beams = tuple(int(b) for b in args.search_beams.split(","))
        result = timed("search", lambda: run_search(model, tok, pairs, SearchSettings(
            beams=beams, sentences=1, penalties=("none",), exact=True, exact_seconds=args.exact_seconds)))
        rows = {r["beam"]: r["seconds"] for r in result["beam_curve"]}
        exact = result["exact"][0] if result["exact"] else {}
        notes["search"] = (f"beam-size curve {beams}, no length penalty, seconds per beam {rows}; exact search "
                           f"within {args.exact_seconds} s: proven {exact.get('proven')}, "
                           f"{exact.get('nodes', exact.get('expanded'))} nodes")
        say("search")
    if "align integrated-gradients" in wanted:                 # last but one: the dearest per step
        name = "align integrated-gradients"
        timed(name, lambda: align_sentence(model, tok, gold, [Method("integrated-gradients")], ig_steps=args.ig_steps))
        notes[name] = f"{args.ig_steps} steps (the default: {IG_STEPS}; time grows with the steps)"
        say(name)
    if "patching" in wanted:
        refusals = []
        for corrupt in ANALYSIS_CORRUPT:
            t0 = time.perf_counter()
            try:
                result = timed("patching", lambda: run_patching(model, tok, [(sentence, corrupt)]))
            except ValueError as err:
                refusals.append(f"{corrupt!r}: {err} ({time.perf_counter() - t0:.1f} s)")
                seconds["patching"] = None
                continue
            notes["patching"] = f"clean {sentence!r}, corrupt {corrupt!r}: grids {', '.join(result['grids'])}"
            break
        if refusals:
            notes["patching"] = "; ".join(refusals) + ("; " + notes["patching"] if "patching" in notes else "")
        say("patching")
        if seconds["patching"] is None:        # a random model's outputs may not depend on the word: the grids' cost
            pair = _hand_made_pair(model, tok, sentence, ANALYSIS_CORRUPT[0], given)
            name = "patching grids (hand-made pair)"
            result = timed(name, lambda: pair_grids(model, pair))
            notes[name] = (f"pair_grids on {sentence!r} / {ANALYSIS_CORRUPT[0]!r} with the two tokens measured after "
                           f"the tag chosen by hand (the clean run's most, the corrupted run's least favoured by the "
                           f"logit difference): the grids' numbers mean nothing, their cost is the page's; "
                           f"{sum(g['denoise'].size for g in result.grids.values())} cells x 2 directions")
            say(name)
    for name, why in REFUSED.items():
        seconds[name], notes[name] = None, why
        say(name)
    greedy = seconds["greedy"]
    return {"load_s": loaded, "seconds": seconds, "ratio_to_greedy": {k: (v / greedy if v is not None else None)
                                                                      for k, v in seconds.items()},
            "notes": notes, "source_ids": len(src), "output_ids": len(best.ids), "forced_target": given,
            "peak_rss_gib": _rss_gib()}


STAGES = {"build": stage_build, "import": stage_import, "load": stage_load, "translate": stage_translate,
          "pages": stage_pages, "analyses": stage_analyses}


def run_stage(name: str, folder: Path, argv: list[str], env: dict) -> dict:
    """One stage in a fresh process; its RESULT line."""
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "nllb", "--stage", name, "--folder", str(folder),
                           *argv], env=env, stdout=subprocess.PIPE, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(RESULT)]
    if proc.returncode or not lines:
        return {"failed": f"exit {proc.returncode}"}
    return json.loads(lines[-1][len(RESULT):])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks nllb", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 sentence, 1 round after a warm-up, three pages")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--sentences", type=int, default=1)
    parser.add_argument("--src-len", type=int, default=25, help="source pieces: the tag, pieces, </s>")
    parser.add_argument("--out-len", type=int, default=25, help="pieces every output is forced to after its tag")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--pages", default="", help="url paths of the pages to open (default: all)")
    parser.add_argument("--page-timeout", type=float, default=120, help="seconds before a page counts as unfinished")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--analyses", action="store_true",
                        help="after the import, time each analysis of one sentence (not load, translation, pages)")
    parser.add_argument("--analyses-only", default="", help="with --analyses: these analyses (default: all)")
    parser.add_argument("--search-beams", default="1,2,4,8,16,32", help="with --analyses: the beam-size curve's beams")
    parser.add_argument("--exact-seconds", type=int, default=20, help="with --analyses: exact search's budget")
    parser.add_argument("--ig-steps", type=int, default=32, help="with --analyses: integrated gradients' steps")
    parser.add_argument("--src-lang", default=SRC)
    parser.add_argument("--tgt-lang", default=TGT)
    parser.add_argument("--stage", choices=STAGES, help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    if args.quick:
        # the warm-up stays: without it the first variant timed pays one-off costs (a run with none had
        # ours greedy at 33 s beside ours beam 5 at 18.5 s, HF 0.58x "faster")
        args.sentences, args.repeats, args.warmup = 1, 1, 1
        args.pages = args.pages or "translate,attention,heads"
    torch.set_num_threads(args.threads)
    if args.stage:
        import transformers
        transformers.utils.logging.disable_progress_bar()
        transformers.utils.logging.set_verbosity_error()
        print(RESULT + json.dumps(STAGES[args.stage](Path(args.folder), args)), flush=True)
        return 0
    from explorer.files.settings import MAX_MODEL_BYTES_ENV, MAX_MODEL_BYTES
    from explorer.interop import m2m100
    from explorer.store.weights import load_bytes, read_header
    from explorer.text.multilingual import MultilingualTokenizer

    passed = [a for a in (argv if argv is not None else sys.argv[2:]) if a != "--quick"]
    if args.quick:
        passed += ["--sentences", "1", "--repeats", "1", "--warmup", "1", "--pages", args.pages]
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "EXPLORER_DEVICE": "cpu"}
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {args.threads} threads; torch "
          f"{torch.__version__}", flush=True)
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-nllb-") as tmp:
        folder = Path(tmp)
        results["build"] = run_stage("build", folder, passed, env)
        print("build:", results["build"], flush=True)
        hf = json.loads((folder / "hf" / "config.json").read_text())
        cfg = m2m100.model_config_from_hf(hf, MultilingualTokenizer.special)
        need = load_bytes(cfg, read_header(folder / "hf" / "model.safetensors"), copies=2)
        bound = -(-need // (1 << 29)) << 29                          # rounded up to 0.5 GiB
        env[MAX_MODEL_BYTES_ENV] = str(bound)
        results["bound"] = {"need_gib": need / 2**30, "set_gib": bound / 2**30, "default_gib": MAX_MODEL_BYTES / 2**30}
        print(f"import needs {need / 2**30:.2f} GiB by load_bytes; {MAX_MODEL_BYTES_ENV}={bound} "
              f"({bound / 2**30:.1f} GiB; the default is {MAX_MODEL_BYTES / 2**30:.0f} GiB)", flush=True)
        for name in ("import", "analyses") if args.analyses else ("import", "load", "translate", "pages"):
            results[name] = run_stage(name, folder, passed, env)
            print(f"{name}:", json.dumps(results[name]), flush=True)
    report(results)
    print(f"load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


def report(results: dict) -> None:
    tr = results.get("translate", {})
    if "wall_s" in tr:
        w, c = tr["wall_s"], tr["cpu_s"]
        print(f"{'translation':24s} {'wall ms/sent':>13s} {'CPU ms/sent':>12s}")
        for name in w:
            print(f"{name:24s} {w[name] * 1e3:13.0f} {c[name] * 1e3:12.0f}")
        for kind in ("greedy", "beam 5"):
            print(f"HF / ours, {kind}: {w[f'HF generate {kind}'] / w[f'ours {kind}']:.2f}x wall, "
                  f"{c[f'HF generate {kind}'] / c[f'ours {kind}']:.2f}x CPU")
    an = results.get("analyses", {})
    if "seconds" in an:
        print(f"{'analysis (one sentence)':44s} {'seconds':>8s} {'x greedy':>9s}")
        for name, secs in an["seconds"].items():
            ratio = an["ratio_to_greedy"][name]
            print(f"{name:44s} " + (f"{secs:8.1f} {ratio:9.1f}" if secs is not None else f"{'refused':>8s}") +
                  f"  {an['notes'].get(name, '')}")
        print(f"analyses stage peak RSS {an['peak_rss_gib']:.2f} GiB (load {an['load_s']:.1f} s)")
    for name, secs in results.get("pages", {}).get("page_s", {}).items():
        note = results["pages"]["notes"].get(name, "")
        print(f"page {name:28s} " + (f"{secs:8.1f} s" if secs is not None else "  unfinished") + f"  {note}")


if __name__ == "__main__":
    raise SystemExit(main())
