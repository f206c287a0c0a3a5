"""Layer-wise contributions rolled out to the model's inputs: ALTI+ (Ferrando, Gállego, Alastruey,
Escolano & Costa-jussà, "Towards Opening the Black Box of Neural Machine Translation: Source and Target
Contributions to the Model's Predictions", EMNLP 2022).

Only attention mixes tokens; the FFN, the final norms and the output projection act on each position
alone, so what a position's representation owes to the model's input tokens is carried by the
attention blocks' contribution matrices (explorer.studies.contributions.decomposition), multiplied layer by
layer:

* encoder: R_0 = I, R_l = C_l R_{l-1}: [S, S], each encoder output over the source tokens;
* decoder, over [source tokens; decoder inputs] (start id + the forced prefix), starting from
  P_0 = [0 | I]: the self-attention block mixes the layer's input positions, P' = C^self_l P_{l-1};
  the cross-attention block mixes the encoder's outputs and its own input (the residual column r),
  P_l = [C^cross_l[:, :S] R_L | 0] + r * P'. Rows stay distributions (each factor's rows sum to 1).

A generated token's row of P_L is its distribution over [source; target prefix]; the source share is
its mass on the source. The reference code's joint matrix [C^cross[:, :S] | r * C^self] is the same
product, written per layer.
"""
from __future__ import annotations

import torch

Tensor = torch.Tensor


def encoder_rollout(layers: list[Tensor]) -> list[Tensor]:
    """R_l for each encoder layer, from its self-attention contributions C_l [S, S]: [S, S] each."""
    if not layers:
        raise ValueError("no encoder layers to roll out")
    rolled, current = [], torch.eye(layers[0].shape[0], dtype=layers[0].dtype, device=layers[0].device)
    for c in layers:
        current = c @ current                                                     # [S, S]
        rolled.append(current)
    return rolled


def decoder_rollout(self_layers: list[Tensor], cross_layers: list[Tensor], encoder_out: Tensor) -> list[Tensor]:
    """P_l for each decoder layer: [T, S + T], rows over [source tokens; decoder inputs].

    self_layers[l] [T, T] and cross_layers[l] [T, S + 1] (last column: the residual) are the
    layer's contributions; encoder_out [S, S] is the encoder's rollout at its last layer."""
    if len(self_layers) != len(cross_layers) or not self_layers:
        raise ValueError("need one self- and one cross-attention contribution matrix per decoder layer")
    n_tgt, n_src = self_layers[0].shape[0], encoder_out.shape[0]
    eye = torch.eye(n_tgt, dtype=encoder_out.dtype, device=encoder_out.device)           # [T, T]
    current = torch.cat([torch.zeros(n_tgt, n_src, dtype=eye.dtype, device=eye.device), eye], dim=1)  # [T, S+T]
    rolled = []
    for c_self, c_cross in zip(self_layers, cross_layers):
        mixed = c_self @ current                                                  # [T, S+T] after self-attention
        residual = c_cross[:, n_src:]                                             # [T, 1]
        current = residual * mixed                                                # [T, S+T]
        current[:, :n_src] += c_cross[:, :n_src] @ encoder_out                    # [T, S] through the memory
        rolled.append(current)
    return rolled


def source_share(rolled: Tensor, n_src: int) -> Tensor:
    """Each generated token's share of the source in a decoder rollout [T, S + T]: [T]."""
    return rolled[:, :n_src].sum(dim=-1)                                          # [T]
