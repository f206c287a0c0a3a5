"""The logit lens on the decoder: what each decoder layer would write if it were the last.

The logit lens (nostalgebraist, "interpreting GPT: the logit lens", LessWrong, 2020) reads a layer's
output through the model's own unembedding; here the decoder's: the generator (projection to the
vocabulary, log-softmax) applied to each decoder layer's output at every target position, teacher-forced
on a given output (the model's own, or a reference). For pre-LN models the stack's final LayerNorm
comes first, as it does for the last layer (the generator was only trained on normalised states);
post-LN layers end in a LayerNorm already and are read as they are (`decoder.norm` is the identity
there). Both are the model's own modules (`model.decoder.norm`, `model.generator`), so the last layer
through the lens *is* the model's output: a test checks it against the model's log-probs.

"The token the model finally writes" at a position is the last layer's top-1 there (the argmax over
the whole vocabulary); forced on the model's own greedy output that is the output itself. Over a
test set, a layer's top-1 agreement is the share of (non-padding) target positions where its top-1
is that token.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch
from torch import nn

from explorer.decoding.core import as_batch, decoding_session, special_ids
from explorer.decoding.translate import pieces
from explorer.studies.common.sentences import SentenceSet, teacher_batches
from explorer.studies.common.kept import decoder_outputs, kept
from explorer.text.encoding import decoder_inputs

MAX_TOP_K = 50                  # pieces listed per layer and position (the app shows 5)


def layer_states(model: nn.Module, src: torch.Tensor, tgt_in: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
    """One teacher-forced forward: (each decoder layer's output [B, T, d], layer 1 first; the model's
    log-probs [B, T, V]). Call inside decoding_session (eval mode, no autograd, a queue place)."""
    names = decoder_outputs(model)[1:]
    with kept(model, names) as found:
        log_probs = model(src, tgt_in)                                        # [B, T, V]
    return [found[name] for name in names], log_probs


def through_generator(model: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    """A decoder state [B, T, d] read as the last layer's: final norm (identity post-LN), generator."""
    return model.generator(model.decoder.norm(hidden))                         # [B, T, V]


@dataclass(frozen=True)
class LogitLens:
    """One sentence through the logit lens; layer axis = decoder layers 1 .. L (L = the model's output)."""

    out_ids: list[int]              # the forced output; position t shows what was predicted for out_ids[t]
    final_ids: list[int]            # the last layer's top-1 at each position: what the model writes
    top_ids: np.ndarray             # [L, T, k] each layer's k best pieces, best first
    top_logprobs: np.ndarray        # [L, T, k] their log-probabilities
    top_pieces: list                # [L][T][k] the pieces as text
    final_logprob: np.ndarray       # [L, T] log p of final_ids[t] under each layer
    final_rank: np.ndarray          # [L, T] its rank there, 1 = top

    @property
    def n_layers(self) -> int:
        return self.top_ids.shape[0]

    def top1_agreement(self) -> np.ndarray:
        """[L]: the share of positions where each layer's top-1 is the model's final token."""
        return (self.final_rank == 1).mean(axis=1)


def logit_lens(model: nn.Module, tokenizer, src_ids: Sequence[int], out_ids: Sequence[int],
               top_k: int = 5) -> LogitLens:
    """The logit lens over one pair: source ids (EOS included) and the output to force (EOS included:
    the model's own hypothesis ids or a reference's output_ids). ValueError for a bad k or target."""
    if not 1 <= int(top_k) <= min(MAX_TOP_K, model.cfg.tgt_vocab_size):
        raise ValueError(f"top_k must be in [1, {min(MAX_TOP_K, model.cfg.tgt_vocab_size)}], not {top_k}")
    out_ids = [int(t) for t in out_ids]
    if not out_ids or len(out_ids) > model.cfg.max_len:
        raise ValueError(f"the forced output needs 1 to {model.cfg.max_len} tokens, not {len(out_ids)}")
    if any(not 0 <= t < model.cfg.tgt_vocab_size for t in out_ids):
        raise ValueError(f"output ids must be in [0, {model.cfg.tgt_vocab_size - 1}]")
    with decoding_session(model):
        src, _ = as_batch([list(src_ids)], model)                             # [1, S]
        tgt_in = torch.tensor([decoder_inputs(out_ids, special_ids(model))], device=src.device)  # [1, T]
        states, final = layer_states(model, src, tgt_in)
        final_ids = final[0].argmax(-1)                                       # [T]
        tops, top_lps, final_lp, ranks = [], [], [], []
        for hidden in states:
            lp = through_generator(model, hidden)[0]                          # [T, V]
            best = lp.topk(int(top_k), dim=-1)                                # [T, k]
            tops.append(best.indices)
            top_lps.append(best.values)
            chosen = lp.gather(1, final_ids.unsqueeze(1))                     # [T, 1]
            final_lp.append(chosen.squeeze(1))
            ranks.append((lp > chosen).sum(dim=1) + 1)                        # [T]
    top_ids = torch.stack(tops).cpu().numpy()                                 # [L, T, k]
    return LogitLens(out_ids=out_ids, final_ids=final_ids.tolist(), top_ids=top_ids,
                     top_logprobs=torch.stack(top_lps).float().cpu().numpy(),
                     top_pieces=[[pieces(tokenizer, row, "tgt") for row in layer] for layer in top_ids.tolist()],
                     final_logprob=torch.stack(final_lp).float().cpu().numpy(),
                     final_rank=torch.stack(ranks).cpu().numpy())


def set_agreement(model: nn.Module, sents: SentenceSet, batch_size: int = 16,
                  tick: Callable[[int], object] | None = None) -> dict[str, list[float]]:
    """Over a set (forced on its `out`: the references, or the model's own greedy outputs), per decoder
    layer: `top1_agreement` (share of target positions where the layer's top-1 is the model's final
    token), `final_logprob` (mean log p of that token) and `final_rank` (its mean rank)."""
    n_layers = model.cfg.n_decoder_layers
    agree, logprob, rank = (np.zeros(n_layers) for _ in range(3))
    positions, done = 0, 0
    with decoding_session(model):
        for idx, src, tgt_in, tgt_out in teacher_batches(model, sents, batch_size):
            real = tgt_out != special_ids(model).pad                          # [B, T]
            states, final = layer_states(model, src, tgt_in)
            final_ids = final.argmax(-1, keepdim=True)                        # [B, T, 1]
            for i, hidden in enumerate(states):
                lp = through_generator(model, hidden)                         # [B, T, V]
                chosen = lp.gather(2, final_ids)                              # [B, T, 1]
                layer_rank = (lp > chosen).sum(dim=2) + 1                     # [B, T]
                agree[i] += float((layer_rank == 1)[real].sum())
                logprob[i] += float(chosen.squeeze(2)[real].sum())
                rank[i] += float(layer_rank[real].float().sum())
            positions += int(real.sum())
            done += len(idx)
            if tick is not None:
                tick(done)
    scale = 1.0 / max(positions, 1)
    return {"top1_agreement": (agree * scale).tolist(), "final_logprob": (logprob * scale).tolist(),
            "final_rank": (rank * scale).tolist(), "positions": positions}
