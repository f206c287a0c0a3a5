"""The GPU check's correctness stages: what must hold on the device before any speed figure counts.

Each check returns a plain dict: `ok` (True / False), `line` (its one summary line) and the figures
behind it. They run on whatever device they are given, so `python -m benchmarks gpu --tiny` runs them
on the CPU in CI (the device comparison is then CPU against CPU: it checks the code, not a GPU).
"""
from __future__ import annotations

import copy
from pathlib import Path

import torch

from explorer.config import DecodeConfig, preset
from explorer.data.batching import pad_batch
from explorer.data.encoded import encode_pairs
from explorer.data.files import read_tsv
from explorer.decoding import beam_search, greedy_search, score_targets
from explorer.inspection.hooks import capture
from explorer.model import Transformer
from explorer.runtime.device import training_optimizer
from explorer.store.checkpoint import load_checkpoint

SHIPPED = ("checkpoints/bible-es-en", "checkpoints/numbers-en-de")
LOGPROB_TOLERANCE = 1e-4          # the issue's: log-probs on the device within 1e-4 of the CPU's
BF16_TOLERANCE = 0.02             # bf16 autocast's loss after 50 steps within 2% (relative) of float32's


def test_pairs(checkpoint: str, n: int, max_len: int | None = 64):
    """The first n held-out pairs of a shipped checkpoint, encoded with its own tokenizer and cut to
    max_len pieces (None: the model's own limit)."""
    loaded = load_checkpoint(checkpoint)
    pairs = read_tsv(str(Path(checkpoint) / "test.tsv"))[:n]
    return loaded, encode_pairs(loaded.tokenizer, pairs, max_len or loaded.config.max_len, loaded.config.special)


def teacher_batch(split, device, rows: slice = slice(None)) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(src [B, S], tgt_in [B, T], tgt_out [B, T]) of an encoded split's `rows`, padded with its pad id."""
    tgt = pad_batch(split.tgt[rows], split.pad_id).to(device)                     # [B, T+1]
    return pad_batch(split.src[rows], split.pad_id).to(device), tgt[:, :-1], tgt[:, 1:]


def capture_matches(device, sentences: int) -> dict:
    """Capturing every point changes nothing: the log-probs with capture on equal those with it off
    (the capture path materialises attention weights; the plain one takes the fused kernel)."""
    loaded, split = test_pairs(SHIPPED[0], sentences)
    model = loaded.model.to(device).eval()
    src, tgt_in, _ = teacher_batch(split, device)
    with torch.inference_mode():
        plain = model(src, tgt_in)                                               # [B, T, V]
        with capture(model, "*") as trace:
            watched = model(src, tgt_in)                                         # [B, T, V]
    diff = float((plain - watched).abs().max())
    ok = diff <= LOGPROB_TOLERANCE and len(trace.arrays) > 0
    return {"ok": ok, "max_abs_diff": diff, "capture_points": len(trace.arrays), "sentences": len(split),
            "line": f"capture on == off: max |d log-prob| {diff:.2e} over {len(trace.arrays)} capture points, "
                    f"{len(split)} sentences ({'pass' if ok else 'FAIL'}, <= {LOGPROB_TOLERANCE:g})"}


def incremental_matches(device, sentences: int) -> dict:
    """Incremental decoding (the KV cache, one token a step) == one full teacher-forced forward of
    the same output: each token's log-prob within the tolerance, on both shipped models."""
    worst, tokens = 0.0, 0
    for checkpoint in SHIPPED:
        loaded, split = test_pairs(checkpoint, sentences)
        model = loaded.model.to(device).eval()
        with torch.inference_mode():
            decoded = greedy_search(model, split.src)
            outputs = [d.best.ids for d in decoded]
            forced = score_targets(model, split.src, outputs, add_eos=False)
        for d, f in zip(decoded, forced):
            a, b = torch.tensor(d.best.token_logprobs), torch.tensor(f.token_logprobs)
            worst = max(worst, float((a - b).abs().max()) if len(a) else 0.0)
            tokens += len(a)
    ok = worst <= LOGPROB_TOLERANCE
    return {"ok": ok, "max_abs_diff": worst, "tokens": tokens,
            "line": f"incremental == full forward: max |d log-prob| {worst:.2e} over {tokens} greedy tokens "
                    f"of both shipped models ({'pass' if ok else 'FAIL'})"}


def beam_matches_cpu(device, sentences: int) -> dict:
    """Beam search (beam 5) on the device returns the CPU's best ids, scores within the tolerance."""
    cfg = DecodeConfig(beam_size=5, n_best=5)
    same, total, worst, per_model = 0, 0, 0.0, {}
    for checkpoint in SHIPPED:
        loaded, split = test_pairs(checkpoint, sentences)
        cpu_model = loaded.model.eval()
        dev_model = copy.deepcopy(cpu_model).to(device)
        with torch.inference_mode():
            on_cpu = beam_search(cpu_model, split.src, cfg)
            on_dev = beam_search(dev_model, split.src, cfg)
        equal = sum(a.best.ids == b.best.ids for a, b in zip(on_cpu, on_dev))
        diffs = [abs(a.best.score - b.best.score) for a, b in zip(on_cpu, on_dev) if a.best.ids == b.best.ids]
        per_model[Path(checkpoint).name] = {"same_best_ids": equal, "sentences": len(split),
                                            "max_abs_score_diff": max(diffs, default=0.0)}
        same, total, worst = same + equal, total + len(split), max(worst, max(diffs, default=0.0))
    ok = same == total and worst <= LOGPROB_TOLERANCE
    return {"ok": ok, "same": same, "sentences": total, "max_abs_score_diff": worst, "models": per_model,
            "line": f"beam ids {device.type} == cpu: {same}/{total} sentences, max |d score| {worst:.2e} "
                    f"({'pass' if ok else 'FAIL'})"}


def _train(model: Transformer, batches, steps: int, bf16: bool, device) -> list[float]:
    """`steps` Adam steps (constant rate 5e-4, clip 1.0) cycling over `batches`; the losses per token."""
    opt = training_optimizer(model.parameters(), lr=5e-4)
    losses = []
    for i in range(steps):
        src, tgt_in, tgt_out = batches[i % len(batches)]
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            loss = model(src, tgt_in, targets=tgt_out, label_smoothing=0.1)
        loss = loss / (tgt_out != model.cfg.pad_id).sum()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def held_loss(model: Transformer, batch) -> float:
    """Label-smoothed loss per target token of one held batch, in float32, no dropout."""
    model.eval()
    with torch.inference_mode():
        src, tgt_in, tgt_out = batch
        loss = model(src, tgt_in, targets=tgt_out, label_smoothing=0.1) / (tgt_out != model.cfg.pad_id).sum()
    model.train()
    return float(loss)


def training_converges(device, size: str, steps: int, sentences: int) -> dict:
    """A training step lowers the loss, and bf16 autocast follows float32: two copies of one `size`
    model (the Bible model's 8k vocabulary) trained `steps` steps on the same real held-out verses,
    their held-batch loss after it within BF16_TOLERANCE of each other."""
    loaded, split = test_pairs(SHIPPED[0], sentences)
    chunk = max(1, len(split) // 8)
    batches = [teacher_batch(split, device, slice(i, i + chunk)) for i in range(0, len(split), chunk)]
    held, batches = batches[-1], batches[:-1]
    cfg = preset(size, src_vocab_size=loaded.config.src_vocab_size, tgt_vocab_size=loaded.config.tgt_vocab_size)
    torch.manual_seed(0)
    first = Transformer(cfg).to(device).train()
    second = copy.deepcopy(first)
    before = held_loss(first, held)
    losses32 = _train(first, batches, steps, False, device)
    losses16 = _train(second, batches, steps, True, device)
    after32, after16 = held_loss(first, held), held_loss(second, held)
    relative = abs(after16 - after32) / after32
    decreased = after32 < before and losses32[-1] < losses32[0]
    ok = decreased and relative <= BF16_TOLERANCE
    return {"ok": ok, "preset": size, "steps": steps, "held_loss_before": before, "held_loss_fp32": after32,
            "held_loss_bf16": after16, "relative_diff": relative, "train_losses_fp32": losses32,
            "train_losses_bf16": losses16,
            "line": f"training ({size}, {steps} steps): held loss {before:.3f} -> fp32 {after32:.3f} / bf16 "
                    f"{after16:.3f} ({relative:.1%} apart; {'pass' if ok else 'FAIL'}: decreases, <= "
                    f"{BF16_TOLERANCE:.0%})"}

