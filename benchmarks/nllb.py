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
one short sentence (nllb_analyses.ANALYSIS_SENTENCE: 12 pieces, 14 source ids with the tag and </s>), through the library
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
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.nllb_analyses import rss_gib, stage_analyses

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
            "parameters": sum(p.numel() for p in model.parameters()), "peak_rss_gib": rss_gib()}


def stage_import(folder: Path, args) -> dict:
    from explorer.interop.hf_import import import_m2m100

    start = time.perf_counter()
    import_m2m100(str(folder / "hf"), folder / "models" / "nllb-600m", dtype=torch.float16, src_lang=SRC,
                  tgt_lang=TGT)
    return {"import_s": time.perf_counter() - start, "peak_rss_gib": rss_gib()}


def stage_load(folder: Path, args) -> dict:
    from explorer.store.checkpoint import load_checkpoint

    start = time.perf_counter()
    load_checkpoint(folder / "models" / "nllb-600m")
    return {"load_s": time.perf_counter() - start, "peak_rss_gib": rss_gib()}


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
            "peak_rss_gib": rss_gib()}


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
    return {"page_s": times, "notes": notes, "peak_rss_gib": rss_gib()}


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
