"""Both lenses over a test set, as one JSON file: BLEU / chrF of the DecoderLens per encoder layer
(embeddings first, the last layer last: that row is the model's own score) and the logit lens's
top-1 agreement per decoder layer.

A claim about what a layer "knows" is a claim about a set of sentences, so the command runs on a
checkpoint's held-out pairs, like the head lab (explorer.studies.heads, whose SentenceSet it reuses). The
job reports progress and can be cancelled (explorer.runtime.progress); the file is written once at
the end (explorer.studies.common.result): whole, or not at all.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from explorer.config import DecodeConfig
from explorer.decoding.translate import forced_target
from explorer.evaluation.arguments import check_ranges
from explorer.evaluation.scores import MAX_HELD_OUT, corpus_scores
from explorer.studies.common.context import RunContext
from explorer.studies.common.kept import layer_label
from explorer.studies.common.result import Study
from explorer.studies.common.sentences import FORCED, build_sentences
from explorer.studies.lens.decoder_lens import LENS_DECODING, decoder_lens
from explorer.studies.lens.logit_lens import set_agreement

# What a run may ask for (checked here and by `python -m explorer lens` while it parses): a whole
# shipped test set at most (MAX_HELD_OUT); a beam of at most 10 (each layer is a full decode).
RANGES = {"sentences": (1, MAX_HELD_OUT), "beam": (1, 10), "batch_size": (1, 64)}
RESULT_KEYS = ("settings", "decoder_lens", "logit_lens")
STAGES = ("decoder lens", "logit lens")


@dataclass(frozen=True)
class LensSettings:
    sentences: int = 200             # the first N held-out pairs
    beam: int = 1                    # the DecoderLens's beam (1: greedy)
    forced: str = "output"           # the logit lens reads the model's own greedy output or the reference
    batch_size: int = 16

    def __post_init__(self) -> None:
        if self.forced not in FORCED:
            raise ValueError(f"forced must be one of {', '.join(FORCED)}, not {self.forced!r}")
        check_ranges(self, RANGES)


def lens_decoding(beam: int) -> DecodeConfig:
    """Greedy (beam 1) or beam search, both cut at 1.5 x source + 10 tokens, one best output."""
    if beam == 1:
        return LENS_DECODING
    return DecodeConfig(strategy="beam", beam_size=beam, n_best=1, max_len_a=LENS_DECODING.max_len_a,
                        max_len_b=LENS_DECODING.max_len_b)


def run_lens(model, tokenizer, pairs, settings: LensSettings = LensSettings(), *,
             context: RunContext = RunContext()) -> dict:
    """The DecoderLens and logit-lens tables over the first `settings.sentences` pairs (JSON-ready)."""
    batch_size = settings.batch_size
    t0 = time.time()
    ticker = context.ticker()
    sents = build_sentences(model, tokenizer, pairs, settings.sentences, settings.forced)
    cfg = lens_decoding(settings.beam)
    given = forced_target(tokenizer)                # the tag a multilingual model starts with
    depths = model.cfg.n_encoder_layers + 1
    texts: list[list[str]] = [[""] * len(sents) for _ in range(depths)]
    order = sorted(range(len(sents)), key=lambda i: len(sents.src[i]))          # similar lengths share a batch
    tick = ticker.stage("decoder lens", len(sents))
    for first in range(0, len(order), batch_size):
        idx = order[first:first + batch_size]
        for k, decoded in enumerate(decoder_lens(model, [sents.src[i] for i in idx], cfg, given=given)):
            for i, d in zip(idx, decoded):
                texts[k][i] = tokenizer.decode(d.best.output_ids, side="tgt")
        ticker.check(tick, first + len(idx))
    context.say(f"decoder lens: {depths} encoder depths x {len(sents)} sentences in {time.time() - t0:.1f} s")
    tick = ticker.stage("logit lens", len(sents))
    agreement = set_agreement(model, sents, batch_size, lambda done: ticker.check(tick, done))
    return {
        "settings": {**context.checkpoint(), "sentences": len(sents), "forced": settings.forced,
                     "decoding": cfg.to_dict(),
                     "norm_first": bool(model.cfg.norm_first)},
        "decoder_lens": [{"layer": k, "label": layer_label(k), **_rounded(corpus_scores(texts[k], sents.refs)),
                          "translations": texts[k]} for k in range(depths)],
        "logit_lens": [{"layer": i + 1, "top1_agreement": agreement["top1_agreement"][i],
                        "final_logprob": agreement["final_logprob"][i], "final_rank": agreement["final_rank"][i]}
                       for i in range(model.cfg.n_decoder_layers)],
        "positions": agreement["positions"],
        "seconds": round(time.time() - t0, 1),
    }


def _rounded(scores: dict) -> dict:
    return {name: round(float(value), 4) for name, value in scores.items()}


def report(result: dict) -> str:
    """The two tables as text (what the command prints)."""
    s = result["settings"]
    lines = [f"DecoderLens over {s['sentences']} sentences ({s['decoding']['strategy']}): the decoder reads encoder depth k",
             f"  {'depth':12s} {'BLEU':>7s} {'chrF':>7s}  first translation"]
    for row in result["decoder_lens"]:
        first = row["translations"][0] if row["translations"] else ""
        lines.append(f"  {row['label']:12s} {row['bleu']:7.2f} {row['chrf']:7.2f}  {first[:60]}")
    lines.append(f"logit lens, forced on the {'model output' if s['forced'] == 'output' else 'references'} "
                 f"({result['positions']} positions): top-1 agreement with the final prediction")
    for row in result["logit_lens"]:
        lines.append(f"  decoder layer {row['layer']}: {row['top1_agreement']:.3f}  (mean log p {row['final_logprob']:.2f},"
                     f" mean rank {row['final_rank']:.1f})")
    return "\n".join(lines)


LENSES = Study("lens", run_lens, RESULT_KEYS, report, STAGES)
