"""Beam search at OPUS-MT size: ours (with and without BeamTrace) against HF generate and CTranslate2.

The models the project opens are OPUS-MT (Marian) models: the paper's base Transformer (6+6
layers, 8 heads, d_model 512, d_ff 2048) with a joint vocabulary of 58101 pieces, swish FFNs,
sinusoids in halves, tied embeddings, a final logits bias, and Marian's ids (eos 0, unk 1, pad the
last id, the decoder starting from pad). With that vocabulary the output projection is the largest
matrix of every step, so the small-model figures of `benchmarks decode` do not carry over.

One process, one thread setting for all: a random MarianMTModel of that config through generate(),
the same weights imported into ours (beam_search), and the same weights converted to CTranslate2 by
the project's exporter (explorer.interop.ct2) and run in float32 and int8; the first run of each counts the sentences on which ours returns
HF's n-best and CTranslate2's best hypothesis. All are forced to exactly --out-len output tokens (EOS
forbidden until then) on the same --sentences random sources, one sentence per call, beam 5, the
5-best returned. Rounds are interleaved (each variant translates every sentence, then the next
variant), so load from other processes hits every variant alike; the table shows per-sentence
medians over rounds of process CPU time and wall time, and the ratios the goals are about.
Goals: ours with the trace >= 1.5x faster than HF generate, and within 1.5x of CTranslate2 float32.

Int8 rows (unless --no-int8): ours on an int8 copy of the model (explorer/model/int8.py), with the trace,
beside CTranslate2 int8, each at every thread count of --int8-threads (1 and 2), interleaved in the same
rounds; goal: ours int8 at most 1.0x CTranslate2 int8's CPU time. Their outputs are compared (the share
of identical best hypotheses, BLEU of ours against CTranslate2 int8's as ids), and a checkpoint's test set
(--bible, the 1,002 Bible verses by default) is translated in float32 and in int8
(benchmarks/int8_quality.py): BLEU within 0.5, the share of identical outputs.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path
from typing import Callable

import torch

from benchmarks import int8_quality
from benchmarks.decode import time_rounds
from explorer.config import DecodeConfig, ModelConfig, preset
from explorer.decoding import beam_search
from explorer.interop import ct2
from explorer.interop.marian import hf_config, state_from_hf
from explorer.model import Transformer
from explorer.model import int8
from explorer.model.int8 import quantize

OPUS_VOCAB = 58101                                   # e.g. Helsinki-NLP/opus-mt-en-de
TRACED, PLAIN, HF = "ours + BeamTrace", "ours, no trace", "HF generate"
CT2_F32, CT2_INT8 = "CTranslate2 float32", "CTranslate2 int8"
INT8 = "ours int8 + BeamTrace"


def at_threads(name: str, threads: int, main_threads: int) -> str:
    """A row's name at `threads`: the plain name at the run's own thread count, else with the count."""
    return name if threads == main_threads else f"{name} ({threads} threads)"


def with_threads(threads: int, run: Callable[[], object]) -> Callable[[], object]:
    """`run` with torch computing on `threads` threads, the count restored after (one process, the
    rows interleaved: a row at 2 threads between two at 1)."""
    def wrapped():
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            return run()
        finally:
            torch.set_num_threads(before)
    return wrapped


def marian_config(size: str, vocab: int) -> ModelConfig:
    """An OPUS-MT model's options at preset `size`: Marian's ids, swish, halves, tied, logits bias."""
    pad = vocab - 1
    return preset(size, src_vocab_size=vocab, tgt_vocab_size=vocab, activation="swish", pe_layout="halves",
                  final_logits_bias=True, tie_embeddings=True, pad_id=pad, eos_id=0, unk_id=1,
                  decoder_start_id=pad, dropout=0.0)


def hf_marian(cfg: ModelConfig):
    """A random MarianMTModel of the same shape and options, from the config our exporter writes
    (explorer.interop.marian.hf_config), with no forced EOS (the outputs are forced to a length)."""
    from transformers import MarianConfig, MarianMTModel

    return MarianMTModel(MarianConfig.from_dict({**hf_config(cfg), "forced_eos_token_id": None})).eval()


def vocabulary(cfg: ModelConfig) -> list[str]:
    """Piece names by id, Marian's layout: </s> 0, <unk> 1, <pad> last; CTranslate2 reads them."""
    names = [f"\u2581t{i}" for i in range(cfg.tgt_vocab_size)]
    names[cfg.eos_id], names[cfg.unk_id], names[cfg.pad_id] = "</s>", "<unk>", "<pad>"
    return names


class _Pieces:
    """The one thing explorer.interop.ct2 reads from a tokenizer: the piece of each id. Standing in
    for a real tokenizer saves training sentencepiece models for a random model."""

    def __init__(self, names: list[str]):
        self.names = names

    def id_to_piece(self, i: int, side: str = "tgt") -> str:
        return self.names[i]


def ct2_model_dir(model: Transformer, out_dir: Path) -> Path:
    """Our model (HF's weights imported) converted by the project's own exporter (explorer.interop.ct2),
    float32 on disk; int8 is chosen when a Translator loads it."""
    ct2_dir = out_dir / "ct2"
    ct2.convert(model, _Pieces(vocabulary(model.cfg)), ct2_dir)
    return ct2_dir


def sources(n: int, length: int, cfg: ModelConfig, seed: int = 0) -> list[torch.Tensor]:
    """n random sources of `length` ids, EOS last, no special id inside. Each [1, S]."""
    gen = torch.Generator().manual_seed(seed)
    low, high = max(cfg.eos_id, cfg.unk_id) + 1, cfg.pad_id      # Marian's content ids lie between
    return [torch.cat([torch.randint(low, high, (1, length - 1), generator=gen), torch.tensor([[cfg.eos_id]])], 1)
            for _ in range(n)]


def ours(model: Transformer, srcs: list[torch.Tensor], cfg: DecodeConfig, trace: bool) -> Callable[[], object]:
    return lambda: [beam_search(model, src, cfg, trace=trace) for src in srcs]


def hf_generate(model, srcs: list[torch.Tensor], beam: int, out_len: int) -> Callable[[], object]:
    """generate() as an OPUS-MT model's generation config has it (pad banned), forced to out_len."""
    pad = model.config.pad_token_id

    def run():
        with torch.inference_mode():
            return [model.generate(input_ids=src, attention_mask=torch.ones_like(src), num_beams=beam,
                                   num_return_sequences=beam, max_new_tokens=out_len, min_new_tokens=out_len,
                                   do_sample=False, early_stopping=False, length_penalty=1.0, use_cache=True,
                                   bad_words_ids=[[pad]])
                    for src in srcs]
    return run


def ct2_translate(translator, srcs: list[torch.Tensor], names: list[str], beam: int,
                  out_len: int) -> Callable[[], object]:
    """translate_batch on the sources' pieces (EOS included, as a Marian tokenizer gives them)."""
    tokens = [[names[i] for i in src[0].tolist()] for src in srcs]

    def run():
        return [translator.translate_batch([t], beam_size=beam, num_hypotheses=beam, min_decoding_length=out_len,
                                           max_decoding_length=out_len) for t in tokens]
    return run


def check_outputs(variants: dict[str, Callable[[], object]], out_len: int, beam: int, names: list[str]) -> str:
    """Every variant returns `beam` hypotheses of exactly out_len tokens (the same work). Returns how
    many sentences' n-best (HF) and best hypothesis (CTranslate2) equal ours: with one model's
    weights everywhere they should all, up to near-ties that float rounding may order either way."""
    results, ids, number = {name: run() for name, run in variants.items()}, {}, {n: i for i, n in enumerate(names)}
    for name, result in results.items():
        if name in (TRACED, PLAIN) or name.startswith(INT8):
            ids[name] = [[h.ids for h in r[0].hypotheses] for r in result]
        elif name == HF:
            ids[name] = [[row[1:] for row in r.tolist()] for r in result]          # the start id first
        else:
            ids[name] = [[[number[t] for t in h] for h in r[0].hypotheses] for r in result]
        lengths = {len(h) for sentence in ids[name] for h in sentence}
        counts = {len(sentence) for sentence in ids[name]}
        assert lengths == {out_len} and counts == {beam}, \
            f"{name} produced {counts} hypotheses of lengths {lengths}, wanted {beam} x {out_len}"
    notes = []
    if HF in ids:
        notes.append(f"{sum(a == b for a, b in zip(ids[TRACED], ids[HF]))}/{len(ids[HF])} n-best lists equal HF's")
    if CT2_F32 in ids:
        same = sum(a[0] == b[0] for a, b in zip(ids[TRACED], ids[CT2_F32]))
        notes.append(f"{same}/{len(ids[CT2_F32])} best hypotheses equal CTranslate2 float32's")
    if INT8 in ids:
        same = sum(a[0] == b[0] for a, b in zip(ids[INT8], ids[TRACED]))
        notes.append(f"ours int8: {same}/{len(ids[INT8])} best hypotheses equal ours float32's")
    if INT8 in ids and CT2_INT8 in ids:
        versus = int8_quality.agreement([h[0] for h in ids[INT8]], [h[0] for h in ids[CT2_INT8]])
        notes.append(f"{versus['identical']}/{versus['n']} equal CTranslate2 int8's, BLEU against them "
                     f"{versus['bleu']:.2f}")
    return "; ".join(notes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks marian", description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="base")
    parser.add_argument("--vocab", type=int, default=OPUS_VOCAB)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--sentences", type=int, default=10)
    parser.add_argument("--src-len", type=int, default=25, help="source tokens, EOS included")
    parser.add_argument("--out-len", type=int, default=40, help="output tokens every variant is forced to")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds (each: every sentence)")
    parser.add_argument("--no-hf", action="store_true", help="skip Hugging Face generate")
    parser.add_argument("--no-ct2", action="store_true", help="skip CTranslate2 (also skipped without transformers)")
    parser.add_argument("--no-int8", action="store_true", help="skip the int8 rows and the test-set comparison")
    parser.add_argument("--int8-threads", default="1,2", help="thread counts of the int8 rows (comma-separated)")
    parser.add_argument("--bible", default=str(int8_quality.BIBLE),
                        help="checkpoint whose test set is translated in float32 and int8 (default: bible-es-en)")
    parser.add_argument("--bible-limit", type=int, default=0, help="only its first N sentences (0: all)")
    parser.add_argument("--no-bible", action="store_true", help="skip the test-set comparison")
    parser.add_argument("--json", help="also write the medians to this file")
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = marian_config(args.preset, args.vocab)
    model = Transformer(cfg).eval()
    srcs = sources(args.sentences, args.src_len, cfg)
    decode_cfg = DecodeConfig(beam_size=args.beam, n_best=args.beam, max_len_a=0.0, max_len_b=args.out_len,
                              min_len=args.out_len, length_penalty="average")
    variants: dict[str, Callable[[], object]] = {TRACED: ours(model, srcs, decode_cfg, True),
                                                 PLAIN: ours(model, srcs, decode_cfg, False)}
    int8_threads = [] if args.no_int8 else sorted({int(t) for t in args.int8_threads.split(",") if t.strip()})
    notes = []
    if int8_threads and int8.engine() is None:
        notes.append("no int8 rows: this torch has no working int8 engine")
        int8_threads = []
    with tempfile.TemporaryDirectory(prefix="bench-marian-") as tmp:
        if not (args.no_hf and args.no_ct2):
            import transformers

            transformers.utils.logging.disable_progress_bar()          # save/load bars per conversion
            hf = hf_marian(cfg)
            model.load_state_dict(state_from_hf(hf.state_dict().get, cfg, {name: tuple(p.shape) for name, p in
                                                                         model.state_dict().items()}))
            notes.append(f"transformers {transformers.__version__} ({hf.config._attn_implementation})")
            if not args.no_hf:
                variants[HF] = hf_generate(hf, srcs, args.beam, args.out_len)
            if not args.no_ct2:
                import ctranslate2

                model_dir = ct2_model_dir(model, Path(tmp))
                rows = [(CT2_F32, "float32", args.threads)] + [
                    (at_threads(CT2_INT8, t, args.threads), "int8", t) for t in sorted({args.threads, *int8_threads})]
                for name, compute, threads in rows:
                    translator = ctranslate2.Translator(str(model_dir), device="cpu", compute_type=compute,
                                                        inter_threads=1, intra_threads=threads)
                    variants[name] = ct2_translate(translator, srcs, vocabulary(cfg), args.beam, args.out_len)
                notes.append(f"ctranslate2 {ctranslate2.__version__}")
        if int8_threads:
            quantized = quantize(model)                  # after the import: HF's weights, as the others
            notes.append(f"int8: {quantized.kernel}")
            for t in int8_threads:
                variants[at_threads(INT8, t, args.threads)] = with_threads(
                    t, ours(quantized, srcs, decode_cfg, True))
        agreement = check_outputs(variants, args.out_len, args.beam, vocabulary(cfg))
        wall, cpu = time_rounds(variants, args.warmup, args.repeats)
    n = args.sentences
    median = {name: statistics.median(ts) / n for name, ts in wall.items()}          # per sentence
    median_cpu = {name: statistics.median(ts) / n for name, ts in cpu.items()}
    print(f"preset {args.preset}, vocab {args.vocab}, beam {args.beam}, {n} sentences of {args.src_len} tokens -> "
          f"{args.out_len} tokens, {args.threads} thread(s), torch {torch.__version__}, median of {args.repeats} "
          f"interleaved rounds after {args.warmup} warm-up; {', '.join(notes) or 'ours only'}")
    if agreement:
        print(f"one model's weights in all (HF's, imported into ours): {agreement}")
    print(f"{'variant':34s} {'CPU ms/sent':>12s} {'wall ms/sent':>13s} {'wall min':>9s}")
    for name in variants:
        print(f"{name:34s} {median_cpu[name] * 1e3:12.1f} {median[name] * 1e3:13.1f} "
              f"{min(wall[name]) / n * 1e3:9.1f}")
    ratios = ratio_table(median_cpu, median, args.threads, int8_threads)
    for name, (value, goal) in ratios.items():
        met = "" if not goal else f"  goal {goal}: " + ("met" if _met(value, goal) else "MISSED")
        print(f"{name:44s} {value:6.2f}x{met}")
    quality = None
    if int8_threads and not args.no_bible:
        quality = int8_quality.held_out_agreement(args.bible, args.bible_limit, args.beam)
        print(int8_quality.report(quality))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"args": vars(args), "median_wall_s_per_sentence": median,
                                               "median_cpu_s_per_sentence": median_cpu, "agreement": agreement,
                                               "ratios": {k: v[0] for k, v in ratios.items()},
                                               "int8_test_set": quality}, indent=2))
    return 0


def ratio_table(median_cpu: dict[str, float], median: dict[str, float], threads: int = 1,
                int8_threads: list[int] = ()) -> dict[str, tuple[float, str]]:
    """name -> (ratio, goal or ""): speed-ups over HF, slow-downs against CTranslate2, CPU and wall;
    ours int8 against CTranslate2 int8 at each thread count, and against ours float32."""
    out = {}
    for label, m in (("CPU", median_cpu), ("wall", median)):
        out[f"trace / no trace ({label})"] = (m[TRACED] / m[PLAIN], "")
        if HF in m:
            out[f"HF / ours+trace ({label})"] = (m[HF] / m[TRACED], ">= 1.5x")
        if CT2_F32 in m:
            out[f"ours+trace / CT2 f32 ({label})"] = (m[TRACED] / m[CT2_F32], "<= 1.5x")
            out[f"ours+trace / CT2 int8 ({label})"] = (m[TRACED] / m[CT2_INT8], "")
        if INT8 in m:
            out[f"ours f32 / ours int8, both traced ({label})"] = (m[TRACED] / m[INT8], "")
        for t in int8_threads:
            ours_int8, theirs = at_threads(INT8, t, threads), at_threads(CT2_INT8, t, threads)
            if ours_int8 in m and theirs in m:
                out[f"ours int8 / CT2 int8, {t} thread{'s' * (t > 1)} ({label})"] = (m[ours_int8] / m[theirs],
                                                                                   "<= 1.0x")
    return out


def _met(value: float, goal: str) -> bool:
    if goal.startswith("<="):
        return value <= float(goal.strip("<=x "))
    return value >= float(goal.strip(">=x "))


if __name__ == "__main__":
    raise SystemExit(main())
