"""Training speed: our Transformer against torch.nn.Transformer of the same size, same batches, same run.

Both models are the `small` preset's shape (d_model 256, 4 heads, ffn 1024, 3+3 layers, dropout 0.1,
post-LN, joint vocabulary 8000) with scaled token embeddings, sinusoidal positions and the output
projection tied to the embedding; both take the same training step (label-smoothed cross-entropy
0.1, Adam(0.9, 0.98, 1e-9), gradient clipping 1.0) on the same token-count batches (~4,000 tokens
a side: real Bible batches when data/bible exists, else random ids with Bible-like lengths).
Rounds interleave the models (A B B A ...) so load from other processes hits both alike; the
ratio is what counts on a shared machine, and tokens per CPU-second of this process is the steadier
figure there (waiting for a core is not counted). Goal: ours >= 1.2x the reference on CPU.

"Ours" is the trainer's own step, Transformer.forward(targets=...): the vocabulary projection and
the decoder's FFN blocks skip padded target positions (~20% of a token batch), self-attention's
q/k/v (and cross-attention's k/v) are one matrix product, and CPU dropout masks come from integer
draws. The reference is the textbook step: logits at every position, padding ignored by the loss.
bf16 autocast is not worth measuring on CPUs without native bfloat16 (AVX2 only, as here): bf16
matrix products fall back to slow kernels (a 480x256x1024 product: 5 ms float32, 14-200 ms bf16).

    python -m benchmarks train [--rounds 6] [--steps 3] [--threads N] [--bf16] [--profile]
"""
from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from explorer.config import TrainConfig, preset
from explorer.data.batching import make_batches, pad_batch
from explorer.model import Transformer, sinusoidal_table
from explorer.runtime.device import training_optimizer
from explorer.text.encoding import source_ids, target_ids
from explorer.text.special import BOS_ID, SPECIAL_PIECES
from explorer.text.special import PAD_ID as PAD

VOCAB, MAX_LEN = 8000, TrainConfig.max_len            # the trainer's default sentence cut
FIRST_PIECE = len(SPECIAL_PIECES)                      # random ids stay clear of the special ones


class ReferenceTransformer(nn.Module):
    """torch.nn.Transformer with the same embeddings, positions and tied generator as ours."""

    def __init__(self, cfg):
        super().__init__()
        self.d_model = cfg.d_model
        self.embed = nn.Embedding(cfg.src_vocab_size, cfg.d_model)
        nn.init.normal_(self.embed.weight, std=cfg.d_model ** -0.5)
        self.register_buffer("pe", sinusoidal_table(cfg.max_len, cfg.d_model, cfg.pe_base), persistent=False)
        self.dropout = nn.Dropout(cfg.dropout)
        self.core = nn.Transformer(d_model=cfg.d_model, nhead=cfg.n_heads, num_encoder_layers=cfg.n_encoder_layers,
                                   num_decoder_layers=cfg.n_decoder_layers, dim_feedforward=cfg.d_ff,
                                   dropout=cfg.dropout, batch_first=True, norm_first=False)
        # nn.Transformer always adds a final LayerNorm to each stack; the paper's post-LN model (ours) has none.
        self.core.encoder.norm = None
        self.core.decoder.norm = None

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.embed(ids) * math.sqrt(self.d_model) + self.pe[: ids.shape[1]])  # [B, T, d]

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        length = tgt_in.shape[1]
        causal = torch.ones(length, length, dtype=torch.bool, device=src.device).triu(1)  # [T, T] True = masked
        src_pad, tgt_pad = src == PAD, tgt_in == PAD                                # [B, S], [B, T]
        hidden = self.core(self._embed(src), self._embed(tgt_in), tgt_mask=causal, tgt_is_causal=True,
                           src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad,
                           memory_key_padding_mask=src_pad)                          # [B, T, d]
        return hidden @ self.embed.weight.t()                                        # [B, T, V]


def bench_batches(n: int, batch_tokens: int, seed: int = 0) -> tuple[list[tuple[torch.Tensor, ...]], str]:
    """n padded (src, tgt_in, tgt_out) batches: real Bible sentences if available, else random ids."""
    lengths, seqs, source = _bible_ids(n * 300)
    if seqs is None:
        lengths, seqs = random_pairs(n * 300, seed)
        source = "random ids, Bible-like lengths"
    return padded_batches(make_batches(lengths, batch_tokens, seed=seed)[:n], seqs), source


def random_pairs(count: int, seed: int = 0) -> tuple[list[tuple[int, int]], list[tuple[list[int], list[int]]]]:
    """count (source ids, BOS + target ids) pairs of random non-special ids with Bible-like lengths
    (34 +- 14 source, 30 +- 12 target pieces), and their (source, target) lengths."""
    rng = random.Random(seed)
    lengths = [(max(3, int(rng.gauss(34, 14))), max(3, int(rng.gauss(30, 12)))) for _ in range(count)]
    seqs = [([rng.randrange(FIRST_PIECE, VOCAB) for _ in range(s)],
             [BOS_ID] + [rng.randrange(FIRST_PIECE, VOCAB) for _ in range(t)])
            for s, t in lengths]
    return lengths, seqs


def padded_batches(groups: list[list[int]], seqs, device="cpu") -> list[tuple[torch.Tensor, ...]]:
    """(src [B, S], tgt_in [B, T], tgt_out [B, T]) for each group of pair indices, padded, on `device`."""
    out = []
    for idx in groups:
        src = pad_batch([seqs[i][0] for i in idx]).to(device)                     # [B, S]
        tgt = pad_batch([seqs[i][1] for i in idx]).to(device)                     # [B, T+1]
        out.append((src, tgt[:, :-1], tgt[:, 1:]))
    return out


def _bible_ids(limit: int):
    """Encoded Bible pairs with the Bible run's tokenizer, when both exist on this machine."""
    from explorer.text.tokenizer import Tokenizer

    tok_dirs = [Path("checkpoints/bible-es-en"), Path("runs/bible/tokenizer")]
    if not Path("data/bible/train.tsv").is_file():
        return None, None, None
    for tok_dir in tok_dirs:
        try:
            tok = Tokenizer.load(str(tok_dir))
        except Exception:
            continue
        from explorer.data import load_corpus
        pairs = load_corpus("bible").train[:limit]
        seqs = [(source_ids(tok, p.src, MAX_LEN), target_ids(tok, p.tgt, MAX_LEN)) for p in pairs]
        return [(len(s), len(t) - 1) for s, t in seqs], seqs, f"Bible batches ({tok_dir} tokenizer)"
    return None, None, None


def reference_loss(model: nn.Module, src, tgt_in, tgt_out) -> torch.Tensor:
    """The textbook step: logits for every position, padding ignored by the loss."""
    logits = model(src, tgt_in)                                                    # [B, T, V]
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), tgt_out.reshape(-1),
                           ignore_index=PAD, label_smoothing=0.1, reduction="sum")


def our_loss(model: nn.Module, src, tgt_in, tgt_out) -> torch.Tensor:
    """Our trainer's step: the same loss from Transformer.forward(targets=...)."""
    return model(src, tgt_in, targets=tgt_out, label_smoothing=0.1)


def make_step(model: nn.Module, loss_fn, bf16: bool, device_type: str = "cpu", fused_adam: bool = False):
    """One optimizer step as the trainer takes it (loss / target tokens, clip 1.0, Adam); returns tokens.
    The batches must already be on the model's device (`device_type` is its kind, for autocast)."""
    opt = training_optimizer(model.parameters(), lr=1e-4, fused=fused_adam)

    def step(src, tgt_in, tgt_out) -> int:
        opt.zero_grad(set_to_none=True)
        n_tgt = int((tgt_out != PAD).sum())
        with torch.autocast(device_type, dtype=torch.bfloat16, enabled=bf16):
            loss = loss_fn(model, src, tgt_in, tgt_out) / n_tgt
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return int((src != PAD).sum()) + n_tgt

    return step


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks train", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=6, help="interleaved rounds (A B, then B A, ...)")
    parser.add_argument("--steps", type=int, default=3, help="training steps per model per round")
    parser.add_argument("--batch-tokens", type=int, default=4000)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    parser.add_argument("--bf16", action="store_true", help="bf16 autocast for both models")
    parser.add_argument("--profile", action="store_true", help="print a torch.profiler table for ours")
    parser.add_argument("--json", help="also write the figures to this file (e.g. bench-results/train.json)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = preset("small", src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, dropout=0.1)
    batches, source = bench_batches(args.rounds * args.steps, args.batch_tokens)
    torch.manual_seed(0)
    models = {"ours": Transformer(cfg).train(), "nn.Transformer": ReferenceTransformer(cfg).train()}
    losses = {"ours": our_loss, "nn.Transformer": reference_loss}
    steps = {name: make_step(m, losses[name], args.bf16) for name, m in models.items()}
    n_params = {name: sum(p.numel() for p in m.parameters()) for name, m in models.items()}
    print(f"batches: {source}; {len(batches)} x ~{args.batch_tokens} tokens/side; threads {torch.get_num_threads()}"
          f"; {'bf16 autocast' if args.bf16 else 'float32'}")
    print("parameters: " + ", ".join(f"{k} {v:,}" for k, v in n_params.items()))
    for name in models:                                          # warm-up: allocator, kernels
        for b in batches[:2]:
            steps[name](*b)
    if args.profile:
        _profile(steps["ours"], batches[:3])
    tokens = {name: 0 for name in models}
    wall = {name: 0.0 for name in models}
    cpu = {name: 0.0 for name in models}
    ratios = []
    for r in range(args.rounds):
        chunk = batches[r * args.steps:(r + 1) * args.steps]
        order = list(models) if r % 2 == 0 else list(models)[::-1]
        rate = {}
        for name in order:
            t0, c0 = time.perf_counter(), time.process_time()
            n = sum(steps[name](*b) for b in chunk)
            wall[name] += time.perf_counter() - t0
            cpu[name] += time.process_time() - c0
            tokens[name] += n
            rate[name] = n / (time.perf_counter() - t0)
        ratios.append(rate["ours"] / rate["nn.Transformer"])
        print(f"round {r + 1}: " + "  ".join(f"{k} {v:,.0f} tok/s" for k, v in rate.items())
              + f"  ratio {ratios[-1]:.2f}", flush=True)
    # CPU seconds of this process: the steadier figure when other jobs share the cores (waiting for a
    # core is not counted); with one thread on an idle machine it equals wall time.
    print(f"{'':15s}{'tokens/s (wall)':>16s}{'tokens per CPU-s':>18s}")
    for name in models:
        print(f"{name:15s}{tokens[name] / wall[name]:16,.0f}{tokens[name] / cpu[name]:18,.0f}")
    wall_ratio = (tokens["ours"] / wall["ours"]) / (tokens["nn.Transformer"] / wall["nn.Transformer"])
    cpu_ratio = (tokens["ours"] / cpu["ours"]) / (tokens["nn.Transformer"] / cpu["nn.Transformer"])
    print(f"ratio ours / nn.Transformer: {wall_ratio:.2f} wall ({statistics.median(ratios):.2f} median of "
          f"rounds), {cpu_ratio:.2f} CPU time  (goal >= 1.2)")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({
            "args": vars(args), "batches": source, "threads": torch.get_num_threads(),
            "tokens_per_s_wall": {k: tokens[k] / wall[k] for k in models},
            "tokens_per_cpu_s": {k: tokens[k] / cpu[k] for k in models},
            "ratio_wall": wall_ratio, "ratio_cpu": cpu_ratio, "round_ratios_wall": ratios}, indent=2))
    return 0


def _profile(step, batches) -> None:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for b in batches:
            step(*b)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
