"""Beam search speed: ours (cached, with and without BeamTrace, uncached) against Hugging Face.

One process, one machine, one thread setting for everything: our beam search (beam 5) on the
`small` preset and MarianMTModel.generate(num_beams=5) on a randomly initialised MarianConfig of the
same dimensions (d_model 256, 4 heads, ffn 1024, 3+3 layers, vocab 8000, ReLU, scaled embeddings,
sinusoidal positions). Both are forced to exactly --out-len tokens (EOS forbidden until then:
our min_len, HF's min_new_tokens), so they do the same amount of decoder work. Runs are
interleaved round-robin after warm-up, so load from other processes hits every variant alike;
the table shows medians of process CPU time (steady on a shared machine) and of wall time. Goals: with the trace >= 1.5x faster than HF; the trace < 20%
over plain beam search; cached >= 3x faster than uncached for 40-token outputs.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Callable

import torch

from explorer.config import DecodeConfig, preset
from explorer.decoding import beam_search
from explorer.decoding.core import start
from explorer.model import Transformer
from explorer.text.special import BOS_ID, EOS_ID, PAD_ID

PLAIN, TRACED, UNCACHED = "ours, cached", "ours, cached + BeamTrace", "ours, uncached"
HF = "HF MarianMTModel.generate"


def our_model(name: str, vocab: int) -> Transformer:
    return Transformer(preset(name, src_vocab_size=vocab, tgt_vocab_size=vocab)).eval()


def hf_model(cfg, vocab: int):
    """A random MarianMTModel with our model's dimensions and our special ids."""
    from transformers import MarianConfig, MarianMTModel

    config = MarianConfig(vocab_size=vocab, decoder_vocab_size=vocab, d_model=cfg.d_model,
                          encoder_layers=cfg.n_encoder_layers, decoder_layers=cfg.n_decoder_layers,
                          encoder_attention_heads=cfg.n_heads, decoder_attention_heads=cfg.n_heads,
                          encoder_ffn_dim=cfg.d_ff, decoder_ffn_dim=cfg.d_ff, max_position_embeddings=cfg.max_len,
                          activation_function="relu", dropout=cfg.dropout, scale_embedding=True,
                          pad_token_id=PAD_ID, eos_token_id=EOS_ID, bos_token_id=BOS_ID, decoder_start_token_id=BOS_ID,
                          forced_eos_token_id=None)
    return MarianMTModel(config).eval()


def time_rounds(variants: dict[str, Callable[[], object]], warmup: int,
                repeats: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Warm up each variant, then time them round-robin `repeats` times: (wall, CPU) seconds.

    CPU time (this process) is the steadier figure when other jobs share the cores: waiting for
    a core is not counted. With one thread the two agree on an idle machine.
    """
    for fn in variants.values():
        for _ in range(warmup):
            fn()
    wall: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, fn in variants.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            cpu[name].append(time.process_time() - start_cpu)
            wall[name].append(time.perf_counter() - start)
    return wall, cpu


def decoder_steps_only(model: Transformer, src: torch.Tensor, beam: int, out_len: int) -> Callable[[], object]:
    """The decoder work of a cached beam search with no search logic: encode, then out_len steps of
    (reorder cache, feed k tokens). What is left of our time beyond this is search and trace."""
    def run():
        with torch.inference_mode():
            step, first = start(model, src, [], beam)
            tokens, index = torch.full((beam, 1), 7), torch.arange(beam)
            for _ in range(out_len - 1):
                step.reorder(index)
                step.feed(tokens)
    return run


def hf_generate(model, src: torch.Tensor, beam: int, out_len: int) -> Callable[[], object]:
    mask = torch.ones_like(src)

    def run():
        with torch.inference_mode():
            return model.generate(input_ids=src, attention_mask=mask, num_beams=beam, num_return_sequences=beam,
                                  max_new_tokens=out_len, min_new_tokens=out_len, do_sample=False,
                                  early_stopping=False, length_penalty=1.0, use_cache=True)
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks decode", description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="small")
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--src-len", type=int, default=25, help="source tokens, EOS included")
    parser.add_argument("--out-len", type=int, default=40, help="output tokens both sides are forced to")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--no-hf", action="store_true", help="skip Hugging Face (e.g. transformers missing)")
    parser.add_argument("--json", help="also write the medians to this file")
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = our_model(args.preset, args.vocab)
    src = torch.cat([torch.randint(4, args.vocab, (1, args.src_len - 1)), torch.tensor([[EOS_ID]])], dim=1)  # [1, S]
    cfg = DecodeConfig(beam_size=args.beam, n_best=args.beam, max_len_a=0.0, max_len_b=args.out_len,
                       min_len=args.out_len, length_penalty="average")
    variants: dict[str, Callable[[], object]] = {
        PLAIN: lambda: beam_search(model, src, cfg),
        TRACED: lambda: beam_search(model, src, cfg, trace=True),
        UNCACHED: lambda: beam_search(model, src, cfg, use_cache=False),
        "ours, decoder steps only": decoder_steps_only(model, src, args.beam, args.out_len),
    }
    lengths = {len(h.ids) for h in beam_search(model, src, cfg, trace=True)[0].hypotheses}
    assert lengths == {args.out_len}, f"ours produced lengths {lengths}"
    hf_note = "skipped"
    if not args.no_hf:
        import transformers

        hf = hf_model(model.cfg, args.vocab)
        variants[HF] = hf_generate(hf, src, args.beam, args.out_len)
        out = variants[HF]()
        assert out.shape == (args.beam, args.out_len + 1), f"HF produced {tuple(out.shape)}"
        hf_note = f"transformers {transformers.__version__}, attn {hf.config._attn_implementation}"

    wall, cpu = time_rounds(variants, args.warmup, args.repeats)
    median = {name: statistics.median(ts) for name, ts in wall.items()}
    median_cpu = {name: statistics.median(ts) for name, ts in cpu.items()}
    print(f"beam {args.beam}, {args.src_len}-token source -> {args.out_len}-token outputs, preset {args.preset} "
          f"(vocab {args.vocab}), torch {torch.__version__}, {torch.get_num_threads()} thread(s), "
          f"median of {args.repeats} after {args.warmup} warm-up; HF: {hf_note}")
    print(f"{'variant':28s} {'CPU ms':>8s} {'wall ms':>8s} {'wall min':>9s} {'CPU ms/token':>13s}")
    for name in variants:
        print(f"{name:28s} {median_cpu[name] * 1e3:8.1f} {median[name] * 1e3:8.1f} {min(wall[name]) * 1e3:9.1f} "
              f"{median_cpu[name] * 1e3 / args.out_len:13.2f}")
    ratios = {}
    for label, m in (("CPU", median_cpu), ("wall", median)):
        ratios[f"trace overhead ({label})"] = (m[TRACED] / m[PLAIN] - 1, "< 20%")
        ratios[f"uncached / cached ({label})"] = (m[UNCACHED] / m[PLAIN], ">= 3x")
        if HF in m:
            ratios[f"HF / ours+trace ({label})"] = (m[HF] / m[TRACED], ">= 1.5x")
            ratios[f"HF / ours plain ({label})"] = (m[HF] / m[PLAIN], "")
    for name, (value, goal) in ratios.items():
        shown = f"{value * 100:+.1f}%" if name.startswith("trace overhead") else f"{value:.2f}x"
        met = "" if not goal else ("  goal " + goal + (": met" if _met(value, goal) else ": MISSED"))
        print(f"{name:28s} {shown:>9s}{met}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"args": vars(args), "median_wall_s": median, "median_cpu_s": median_cpu,
                                               "ratios": {k: v[0] for k, v in ratios.items()}}, indent=2))
    return 0


def _met(value: float, goal: str) -> bool:
    if goal.startswith("<"):
        return value < float(goal.strip("<% ")) / 100
    return value >= float(goal.strip(">=x "))


if __name__ == "__main__":
    raise SystemExit(main())
