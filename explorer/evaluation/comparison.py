"""Comparing two checkpoints on the same input: scores, attention, test-set quality, weights.

Everything here reuses the library's own computations (decoding.score_targets / score_text for
log-probs, Trace.stack for attention weights, evaluate.corpus_scores for BLEU/chrF), so the Checkpoints
page shows exactly the numbers those functions give. Functions that need the same token ids under
both models (aligned log-probs, attention differences) check that the tokenizers are identical and
say so when they are not, instead of comparing positions that mean different tokens.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from explorer.config import DecodeConfig
from explorer.data import DataError
from explorer.data.encoded import encode_pairs
from explorer.decoding import score_targets, score_text
from explorer.decoding.translate import forced_target
from explorer.evaluation.scores import corpus_scores, held_out_pairs, translate_ids
from explorer.store import run_files as rf
from explorer.store import run_paths as rp



class ComparisonError(ValueError):
    """The two checkpoints cannot be compared this way (different tokenizer or architecture)."""


# ---- tokens and log-probs ------------------------------------------------------------------------
def same_tokenizer(tok_a, tok_b) -> bool:
    """True when both tokenizers map text to the same ids (same sentencepiece model bytes)."""
    if hasattr(tok_a, "model_bytes") and hasattr(tok_b, "model_bytes"):
        return tok_a.model_bytes() == tok_b.model_bytes()
    return tok_a is tok_b


@dataclass(frozen=True)
class TokenScores:
    """Per-token log-probs of one output text under model A and model B."""

    text: str
    pieces_a: list[str]
    lp_a: list[float]
    pieces_b: list[str]
    lp_b: list[float]

    @property
    def aligned(self) -> bool:
        """Both models scored the same pieces (same tokenizer), so the lists line up token by token."""
        return self.pieces_a == self.pieces_b

    @property
    def totals(self) -> tuple[float, float]:
        return float(sum(self.lp_a)), float(sum(self.lp_b))


def score_under_both(a, b, source: str, output: str, cfg: DecodeConfig | None = None) -> TokenScores:
    """Teacher-forced log-prob of `output` given `source` under the LoadedCheckpoints a and b.

    Uses decoding.score_text for each model with its own tokenizer; EOS is scored too.
    """
    hyp_a = score_text(a.model, a.tokenizer, source, output, cfg)
    hyp_b = score_text(b.model, b.tokenizer, source, output, cfg)
    if hyp_a is None or hyp_b is None:
        raise ComparisonError("empty source text: nothing to score")
    return TokenScores(output, hyp_a.pieces, hyp_a.token_logprobs, hyp_b.pieces, hyp_b.token_logprobs)


def score_ids_under_both(a, b, src_ids: Sequence[int], out_ids: Sequence[int]) -> tuple[list[float], list[float]]:
    """Log-probs of the exact output ids (e.g. A's hypothesis, EOS included) under both models."""
    if not same_tokenizer(a.tokenizer, b.tokenizer):
        raise ComparisonError("the checkpoints use different tokenizers; score the text instead")
    lps = [score_targets(m, [list(src_ids)], [list(out_ids)])[0].token_logprobs for m in (a.model, b.model)]
    return lps[0], lps[1]


# ---- attention -----------------------------------------------------------------------------------
def attention_difference(trace_a, trace_b, kind: str) -> np.ndarray:
    """B - A per layer x head x query x key, for two traces of the same (source, output) ids."""
    if trace_a.meta.get("src_ids") != trace_b.meta.get("src_ids") or \
            trace_a.meta.get("tgt_ids") != trace_b.meta.get("tgt_ids"):
        raise ComparisonError("the two traces are over different token ids (different tokenizers?)")
    wa, wb = trace_a.stack(kind), trace_b.stack(kind)                                # [L, H, q, k] each
    if wa.shape != wb.shape:
        raise ComparisonError(f"{kind} attention shapes differ: {wa.shape} vs {wb.shape} "
                              "(different numbers of layers or heads)")
    return wb - wa                                                                   # [L, H, q, k]


# ---- test-set quality -----------------------------------------------------------------------------
def test_pairs(ckpt_path: str | Path, meta: dict, n: int | None = None, data_dir: str | Path | None = None):
    """The checkpoint's test sentences (evaluation.scores.held_out_pairs), the first n (a fixed sample).

    Returns (pairs, where) with `where` naming the source.
    """
    try:
        pairs, origin = held_out_pairs(ckpt_path, meta, data_dir)
    except DataError as err:
        raise ComparisonError(f"no test sentences: {err}") from None
    where = str(origin) if isinstance(origin, Path) else f"test split of {origin}"
    return (pairs[:n] if n else pairs), where


def test_scores(model, tokenizer, pairs, cfg: DecodeConfig | None = None) -> dict:
    """BLEU / chrF / exact match of the model's translations of `pairs` (greedy unless cfg says)."""
    split = encode_pairs(tokenizer, pairs, model.cfg.max_len, model.cfg.special)
    device = next(model.parameters()).device
    ids = translate_ids(model, split.src, cfg or DecodeConfig(strategy="greedy"), device,
                        given=forced_target(tokenizer))
    hyps = [tokenizer.decode(x, side="tgt") for x in ids]
    return {**corpus_scores(hyps, split.tgt_text), "n": len(hyps), "hyps": hyps}


# ---- weights ---------------------------------------------------------------------------------------
def _group(name: str) -> str:
    """encoder.layers.3.ffn.w_1.weight -> encoder.layers.3; decoder.embed.lookup.weight -> decoder.embed."""
    parts = name.split(".")
    return ".".join(parts[:3]) if len(parts) > 2 and parts[1] == "layers" else ".".join(parts[:2])


@torch.no_grad()
def param_change(model_a, model_b) -> list[tuple[str, float]]:
    """Per-layer ||B - A|| / ||A|| over all parameters of the layer (in the models' own order)."""
    pa, pb = dict(model_a.named_parameters()), dict(model_b.named_parameters())
    if pa.keys() != pb.keys() or any(pa[k].shape != pb[k].shape for k in pa):
        raise ComparisonError("the checkpoints have different architectures (parameter names or shapes differ)")
    diff_sq: dict[str, float] = {}
    base_sq: dict[str, float] = {}
    for name, a in pa.items():
        g = _group(name)
        a64, b64 = a.detach().double().cpu(), pb[name].detach().double().cpu()
        diff_sq[g] = diff_sq.get(g, 0.0) + float(((b64 - a64) ** 2).sum())
        base_sq[g] = base_sq.get(g, 0.0) + float((a64 ** 2).sum())
    return [(g, (diff_sq[g] ** 0.5) / max(base_sq[g] ** 0.5, 1e-30)) for g in diff_sq]


# ---- the table of checkpoints ------------------------------------------------------------------------
def _dev_bleu_by_step(run_dir: Path, cache: dict) -> dict[int, float | None]:
    if run_dir not in cache:
        curves = rf.read_curves(run_dir)
        cache[run_dir] = {int(step): float(bleu) if np.isfinite(bleu) else None
                          for step, bleu in zip(curves.eval_step, curves.bleu)}
    return cache[run_dir]


def _short(path) -> str:
    """runs/numbers/checkpoints/step_000300 -> numbers@300; other paths -> their last part."""
    run, step = rp.run_of(path), rp.step_of(path)
    return f"{run.name}@{step}" if run is not None else Path(str(path)).name


def _test_bleu(card) -> float | None:
    """Beam-search test BLEU from card.json (explorer.evaluate writes test.beam5), else greedy."""
    test = card.get("test") if isinstance(card, dict) else None
    if not isinstance(test, dict):
        return None
    for key in sorted(test, key=lambda k: (not k.startswith("beam"), k)):
        value = test[key].get("bleu") if isinstance(test[key], dict) else None
        if isinstance(value, (int, float)):
            return float(value)
    return None


def _recorded_dev_bleu(train: dict) -> float | None:
    """The dev BLEU config.json's training section records for this very step: the trainer keeps
    best_dev_bleu with its best_step, so it is this checkpoint's own only when the two steps agree.
    A shipped checkpoint carries no metrics.jsonl, so this is all it has."""
    bleu, step = train.get("best_dev_bleu"), train.get("step")
    same = isinstance(step, int) and train.get("best_step") == step
    return float(bleu) if same and isinstance(bleu, (int, float)) and np.isfinite(bleu) else None


def checkpoint_rows(infos) -> list[dict]:
    """One row per CheckpointInfo: run, step, data, preset, params, dev/test BLEU, created, error.
    A value that is not known is None (dev BLEU: the run's metrics, else the step's own recorded
    best; test BLEU: card.json's)."""
    rows, cache = [], {}
    for info in infos:
        train = (info.meta or {}).get("training") or {}
        train = train if isinstance(train, dict) else {}
        step = train.get("step")
        run_dir = rp.run_of(info.path)
        dev = _dev_bleu_by_step(run_dir, cache).get(int(step)) if run_dir and isinstance(step, int) else None
        dev = dev if dev is not None else _recorded_dev_bleu(train)
        test_bleu = _test_bleu(info.card)
        dataset = train.get("dataset")
        rows.append({"checkpoint": info.name, "run": train.get("run") or (run_dir.name if run_dir else ""),
                     "step": step, "data": rp.dataset_label(dataset) if isinstance(dataset, str) else dataset,
                     "preset": train.get("preset") if not train.get("init_from") else
                     f"fine-tuned from {_short(train['init_from'])}",
                     "params (M)": round(info.n_params / 1e6, 2) if info.n_params else None,
                     "dev BLEU": round(dev, 2) if isinstance(dev, (int, float)) else None,
                     "test BLEU": round(test_bleu, 2) if isinstance(test_bleu, (int, float)) else None,
                     "created": info.created, "problem": info.error or "", "path": str(info.path)})
    return rows


# ---- checkpoints of one run ----------------------------------------------------------------------
@dataclass(frozen=True)
class RunGroup:
    """The checkpoints of one training run, by training step: a run directory's step_N folders, or
    shipped checkpoints whose config.json names the same run (explorer.store.ship records it as
    training.run, e.g. bible-es-en-epoch1 beside bible-es-en)."""

    name: str
    checkpoints: tuple           # CheckpointInfo, by step
    steps: tuple                 # int | None each


def _step(info) -> int | None:
    train = (info.meta or {}).get("training")
    step = train.get("step") if isinstance(train, dict) else None
    return step if isinstance(step, int) and not isinstance(step, bool) else rp.step_of(info.path)


def runs_of(infos) -> list[RunGroup]:
    """Checkpoints grouped by the run that saved them, in the order the runs first appear. A run's
    own folder (runs/<name>/checkpoints/step_N) groups by that folder; any other checkpoint by the
    run name its config.json records; one that records none (an imported model) is in no group.
    Damaged ones are left out."""
    groups: dict[tuple, list] = {}
    names: dict[tuple, str] = {}
    for info in infos:
        if getattr(info, "error", None):
            continue
        run_dir = rp.run_of(info.path)
        train = (info.meta or {}).get("training")
        recorded = train.get("run") if isinstance(train, dict) else None
        if run_dir is not None:
            key, name = ("dir", str(run_dir)), run_dir.name
        elif isinstance(recorded, str) and recorded.strip():
            key, name = ("name", recorded.strip()), recorded.strip()
        else:
            continue
        groups.setdefault(key, []).append(info)
        names[key] = name
    taken: dict[str, int] = {}
    out = []
    for key, members in groups.items():
        members = sorted(members, key=lambda i: (_step(i) is None, _step(i) or 0, str(i.path)))
        name = names[key]
        taken[name] = taken.get(name, 0) + 1
        label = name if taken[name] == 1 else f"{name} ({key[1]})"       # a run folder and a shipped run alike named
        out.append(RunGroup(label, tuple(members), tuple(_step(i) for i in members)))
    return out


def default_pair(infos, current: str | Path | None) -> tuple[int, int]:
    """The indices into `infos` (healthy checkpoints) that a comparison opens on: A = the checkpoint in
    use, B = the closest other one, so that the first comparison means something. Closest: an earlier
    checkpoint of the same run (the latest such), else a later one of it, else one with the same
    languages and shape (its attention can be subtracted), else the same languages, else the first."""
    if len(infos) < 2:
        return 0, 0
    a = next((i for i, info in enumerate(infos) if str(info.path) == str(current)), 0)
    here, here_meta = infos[a], infos[a].meta or {}
    run = next((g for g in runs_of(infos) if any(str(c.path) == str(here.path) for c in g.checkpoints)), None)
    run_paths = {str(c.path) for c in run.checkpoints} if run else set()

    def distance(i: int) -> tuple:
        other, meta = infos[i], infos[i].meta or {}
        same_run = str(other.path) in run_paths
        earlier = same_run and (_step(other) or 0) <= (_step(here) or 0)
        same_langs = (meta.get("src_lang"), meta.get("tgt_lang")) == (here_meta.get("src_lang"), here_meta.get("tgt_lang"))
        same_shape = same_langs and meta.get("model") == here_meta.get("model")
        return (not earlier, not same_run, not same_shape, not same_langs, -(_step(other) or 0) if same_run else 0, i)

    return a, min((i for i in range(len(infos)) if i != a), key=distance)
