"""The GPU check's speed stages: training throughput and model FLOPs utilisation against
torch.nn.Transformer on the same batches, and beam search against Hugging Face generate.

Model FLOPs are counted from the shapes (`training_flops`): every matrix product of the forward pass
over the real (non-pad) tokens, attention at each sentence's own length (all query-key pairs, as the
dense kernels compute them), the output projection over the real targets, times 3 for a training step
(the backward pass takes twice the forward's products). Both models do the same useful work, so the
same count divides both times: their MFU ratio is their throughput ratio. tests/unit/test_gpu_check.py
holds the forward count equal to torch's FlopCounterMode on a batch without padding.
"""
from __future__ import annotations

import statistics
import time
from typing import Callable

import torch

from benchmarks.train import VOCAB, ReferenceTransformer, make_step, our_loss, padded_batches, random_pairs, \
    reference_loss
from explorer.config import ModelConfig, preset
from explorer.data.batching import make_batches
from explorer.model import Transformer
from explorer.text.special import PAD_ID

# Dense (no sparsity) tensor-core peaks from NVIDIA's H100 / H200 SXM datasheets, FLOP/s: bf16 989.4 T
# ("1,979 teraFLOPS with sparsity"), TF32 494.7 T ("989 teraFLOPS with sparsity"). Matched on the name
# torch reports; other chips get no MFU (said, not guessed).
PEAKS = {"H100": {"bf16": 989.4e12, "fp32": 494.7e12}, "H200": {"bf16": 989.4e12, "fp32": 494.7e12}}
PAPER_BATCH_TOKENS = 25_000      # "approximately 25000 source tokens and 25000 target tokens" (Vaswani et al. 2017, 5.1)
OURS, REFERENCE = "ours", "nn.Transformer"


def peak_flops(device: torch.device, precision: str) -> float | None:
    """The datasheet peak for this chip and precision, or None where the chip is not in PEAKS."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    for chip, peaks in PEAKS.items():
        if chip in name and "PCIe" not in name and "NVL" not in name:
            return peaks[precision]
    return None


def forward_macs(cfg: ModelConfig, src_lens: list[int], tgt_lens: list[int]) -> int:
    """Multiply-adds of one forward pass over sentences of these real (non-pad) lengths: every linear
    map, attention's scores and weighted sums at each sentence's own length, the output projection."""
    d, ff, vocab = cfg.d_model, cfg.d_ff, cfg.tgt_vocab_size
    n_src, n_tgt = sum(src_lens), sum(tgt_lens)
    enc = n_src * (4 * d * d + 2 * d * ff) + sum(2 * s * s * d for s in src_lens)        # q k v o, FFN, attention
    dec = (n_tgt * (6 * d * d + 2 * d * ff) + n_src * 2 * d * d                        # + cross q o, cross k v
           + sum(2 * t * t * d + 2 * t * s * d for s, t in zip(src_lens, tgt_lens)))
    return cfg.n_encoder_layers * enc + cfg.n_decoder_layers * dec + n_tgt * d * vocab


def training_flops(cfg: ModelConfig, src_lens: list[int], tgt_lens: list[int]) -> float:
    """Model FLOPs of one training step: 2 per multiply-add, and the backward pass counted as twice the
    forward's products (the 6-per-parameter-per-token convention of Kaplan et al. 2020, 2.1)."""
    return 3 * 2 * float(forward_macs(cfg, src_lens, tgt_lens))


def random_batches(n: int, batch_tokens: int, device, seed: int = 0) -> list[tuple[torch.Tensor, ...]]:
    """n (src, tgt_in, tgt_out) batches of random ids with Bible-like lengths (benchmarks/train.py's), bucketed
    by length as the trainer batches them, each side at most batch_tokens padded tokens: the fullest n."""
    lengths, seqs = random_pairs(n * batch_tokens // 25 + 64, seed)
    groups = sorted(make_batches(lengths, batch_tokens, seed=seed), key=len, reverse=True)[:n]
    return padded_batches(groups, seqs, device)


def _sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def compare_training(device, size: str, bf16: bool, batches, rounds: int, steps: int,
                     compile_ours: bool = False, fused_adam: bool = False, compile_backend: str = "inductor") -> dict:
    """Ours against nn.Transformer, one size and precision: interleaved rounds (A B, B A, ...) of
    `steps` steps each after two warm-up steps; tokens/s, model TFLOP/s and MFU of each, their ratio.
    compile_backend: torch.compile's backend for ours ("eager" captures graphs without generating code)."""
    cfg = preset(size, src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, dropout=0.1)
    torch.manual_seed(0)
    models = {OURS: Transformer(cfg).to(device).train(), REFERENCE: ReferenceTransformer(cfg).to(device).train()}
    if compile_ours:                      # the warm-up steps below pay the compilation
        models[OURS] = torch.compile(models[OURS], dynamic=True, backend=compile_backend)
    losses = {OURS: our_loss, REFERENCE: reference_loss}
    step = {name: make_step(m, losses[name], bf16, device.type, fused_adam) for name, m in models.items()}
    flops = []
    for src, _, tgt_out in batches:
        flops.append(training_flops(cfg, (src != PAD_ID).sum(1).tolist(), (tgt_out != PAD_ID).sum(1).tolist()))
    warm = time.perf_counter()
    for name in models:
        for b in batches[:2]:
            step[name](*b)
    _sync(device)
    warm_up = time.perf_counter() - warm              # with --compile, mostly the compilation
    tokens, seconds, work = {n: 0 for n in models}, {n: 0.0 for n in models}, {n: 0.0 for n in models}
    for r in range(rounds):
        chunk = range(r * steps, (r + 1) * steps)
        for name in (list(models) if r % 2 == 0 else list(models)[::-1]):
            _sync(device)
            start = time.perf_counter()
            tokens[name] += sum(step[name](*batches[i % len(batches)]) for i in chunk)
            _sync(device)
            seconds[name] += time.perf_counter() - start
            work[name] += sum(flops[i % len(batches)] for i in chunk)
    profile = profile_table(step[OURS], batches[:3], device) if device.type == "cuda" else None
    precision = "bf16" if bf16 else "fp32"
    peak = peak_flops(device, precision)
    rows = {}
    for name in models:
        rate = work[name] / seconds[name]
        rows[name] = {"tokens_per_s": tokens[name] / seconds[name], "model_tflops": rate / 1e12,
                      "mfu": None if peak is None else rate / peak, "seconds": seconds[name]}
    ratio = rows[OURS]["tokens_per_s"] / rows[REFERENCE]["tokens_per_s"]
    del models, step
    if device.type == "cuda":
        torch.cuda.empty_cache()
    mfu = rows[OURS]["mfu"]
    line = (f"train {size} {precision}{' (ours compiled)' if compile_ours else ''}"
            f"{' fused Adam' if fused_adam else ''}, ~{batch_tokens_of(batches):,} padded tokens a side: "
            f"ours {rows[OURS]['tokens_per_s']:,.0f} tok/s"
            f"{'' if mfu is None else f' MFU {mfu:.1%}'}, nn.Transformer {rows[REFERENCE]['tokens_per_s']:,.0f} "
            f"tok/s; ratio {ratio:.2f}")
    return {"ok": True, "preset": size, "precision": precision, "compiled": compile_ours, "fused_adam": fused_adam,
            "cudnn_attention": torch.backends.cuda.cudnn_sdp_enabled(), "peak_flops": peak, "parameters": cfg.to_dict(),
            "batches": len(batches), "padded_tokens_per_side": batch_tokens_of(batches), "rounds": rounds,
            "steps_per_round": steps, "warm_up_seconds": warm_up, "models": rows, "ratio": ratio,
            "profile_ours": profile, "line": line}


def profile_table(step, batches, device) -> str:
    """Where ours spends a step on the GPU: torch.profiler's operators by their CUDA time (3 steps)."""
    from torch.profiler import ProfilerActivity, profile

    try:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for b in batches:
                step(*b)
            _sync(device)
        return prof.key_averages().table(sort_by="self_device_time_total", row_limit=18, max_name_column_width=48)
    except Exception as err:              # the profiler is a look inside, never a reason to lose the row
        return f"profiler failed: {type(err).__name__}: {err}"


def batch_tokens_of(batches) -> int:
    return int(statistics.mean(int(src.numel()) for src, _, _ in batches))


def timed(fn: Callable[[], object], device) -> Callable[[], object]:
    """fn, returning only once the device has finished its work (so wall time measures it)."""
    def run():
        out = fn()
        _sync(device)
        return out
    return run


def beam_against_hf(device, size: str, vocab: int, sentences: int, src_len: int, out_len: int,
                    repeats: int) -> dict:
    """Beam 5 with the full BeamTrace (and without) against MarianMTModel.generate on the same random
    OPUS-MT-shaped weights on the device, every variant forced to out_len tokens (benchmarks/marian.py's
    set-up); per-sentence medians of interleaved rounds, and how many n-best lists equal HF's."""
    import transformers

    from benchmarks.decode import time_rounds
    from benchmarks.marian import HF, PLAIN, TRACED, check_outputs, hf_generate, hf_marian, marian_config, ours
    from benchmarks.marian import sources, vocabulary
    from explorer.config import DecodeConfig
    from explorer.interop.marian import state_from_hf

    transformers.utils.logging.disable_progress_bar()
    cfg = marian_config(size, vocab)
    torch.manual_seed(0)
    model = Transformer(cfg).eval()
    hf = hf_marian(cfg)
    model.load_state_dict(state_from_hf(hf.state_dict().get, cfg, {n: tuple(p.shape) for n, p in
                                                                  model.state_dict().items()}))
    model, hf = model.to(device), hf.to(device)
    srcs = [s.to(device) for s in sources(sentences, src_len, cfg)]
    decode_cfg = DecodeConfig(beam_size=5, n_best=5, max_len_a=0.0, max_len_b=out_len, min_len=out_len,
                              length_penalty="average")
    variants = {TRACED: timed(ours(model, srcs, decode_cfg, True), device),
                PLAIN: timed(ours(model, srcs, decode_cfg, False), device),
                HF: timed(hf_generate(hf, srcs, 5, out_len), device)}
    agreement = check_outputs(variants, out_len, 5, vocabulary(cfg))
    wall, _ = time_rounds(variants, 1, repeats)
    per_sentence = {name: statistics.median(ts) / sentences for name, ts in wall.items()}
    ratio = per_sentence[HF] / per_sentence[TRACED]
    return {"ok": True, "preset": size, "vocab": vocab, "sentences": sentences, "src_len": src_len, "out_len": out_len,
            "repeats": repeats, "seconds_per_sentence": per_sentence, "ratio_hf_over_traced": ratio,
            "agreement": agreement, "transformers": transformers.__version__,
            "line": (f"beam 5 ({size}, vocab {vocab}): ours + BeamTrace {per_sentence[TRACED] * 1e3:.1f} ms/sentence, "
                     f"no trace {per_sentence[PLAIN] * 1e3:.1f}, HF generate {per_sentence[HF] * 1e3:.1f}; "
                     f"HF / ours+trace {ratio:.2f}; {agreement}")}


def batched_throughput(device, checkpoint: str, sentences: int, batch_size: int) -> dict:
    """The evaluate path (length-sorted batches, beam 5) over a shipped model's held-out sources."""
    from benchmarks.gpu_checks import test_pairs
    from explorer.config import DecodeConfig
    from explorer.evaluation.scores import translate_ids

    loaded, split = test_pairs(checkpoint, sentences, max_len=None)
    model = loaded.model.to(device).eval()
    cfg = DecodeConfig(beam_size=5)
    translate_ids(model, split.src[:batch_size], cfg, device, batch_size)          # warm-up
    _sync(device)
    start = time.perf_counter()
    outputs = translate_ids(model, split.src, cfg, device, batch_size)
    _sync(device)
    seconds = time.perf_counter() - start
    rate = len(split) / seconds
    return {"ok": True, "checkpoint": checkpoint, "sentences": len(split), "batch_size": batch_size, "seconds": seconds,
            "sentences_per_s": rate, "output_tokens": sum(len(o) for o in outputs),
            "line": f"evaluate path ({checkpoint.split('/')[-1]}, beam 5, batches of {batch_size}): "
                    f"{rate:,.1f} sentences/s over {len(split)} sentences"}

