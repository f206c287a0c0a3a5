"""Training-data attribution (explorer.studies.grounding.gradients and influence): the per-pair gradients
are autograd's, one batch gives each pair its own, the projection is the formula it claims, the Grad-Cos
scores equal dattri's (a maintained attribution library) on the same layers, and a kept store is refused
when it belongs to other weights or data, or is damaged."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.numpy import save as save_tensors
from torch.func import functional_call
from torch.utils.data import DataLoader, TensorDataset

from explorer.data.batching import pad_batch
from explorer.studies.grounding import gradients as grads
from explorer.studies.grounding import influence
from support.model_helpers import BOS, EOS, make_model, one_thread  # noqa: F401
from support.numerics import gradient_atol

LENGTHS = [(5, 4), (3, 6), (7, 2), (2, 3), (6, 6), (4, 1)]       # (source, target) lengths: padding in both


def _pairs(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    src = [torch.randint(4, 40, (s,), generator=gen).tolist() + [EOS] for s, _ in LENGTHS]
    tgt = [[BOS] + torch.randint(4, 40, (t,), generator=gen).tolist() + [EOS] for _, t in LENGTHS]
    return src, tgt


def _batch(model, src, tgt):
    return pad_batch(src, model.cfg.pad_id), pad_batch(tgt, model.cfg.pad_id)


def _autograd(model, src, tgt) -> torch.Tensor:
    """One pair alone: its summed NLL's gradient w.r.t. the watched weights, flattened in their order."""
    s, t = torch.tensor([src]), torch.tensor([tgt])
    nll = -model(s, t[:, :-1]).gather(2, t[:, 1:, None]).sum()
    weights = [m.weight for _, m in grads.watched_linears(model)]
    return torch.cat([g.flatten() for g in torch.autograd.grad(nll, weights)])


def test_the_watched_layers_are_the_decoder_maps_that_run_as_modules():
    model = make_model()
    names = [n for n, _ in grads.watched_linears(model)]
    per_layer = ["self_attn.w_o", "cross_attn.w_q", "cross_attn.w_o", "ffn.w_1", "ffn.w_2"]
    assert names == [f"decoder.layers.{i}.{p}" for i in range(model.cfg.n_decoder_layers) for p in per_layer]


def test_exact_features_are_each_pairs_own_autograd_gradient_in_a_padded_batch():
    model = make_model()
    src, tgt = _pairs()
    exact = grads.features(model, *_batch(model, src, tgt), exact=True)                 # [B, F]
    alone = torch.stack([_autograd(model, s, t) for s, t in zip(src, tgt)])
    assert exact.shape == alone.shape
    assert (exact - alone).abs().max() <= gradient_atol(model, alone)
    assert (alone[0] - alone[1]).abs().max() > 100 * gradient_atol(model, alone)       # pairs differ


def test_projected_features_are_the_factorised_projection_of_the_exact_gradients():
    model = make_model()
    src, tgt = _pairs(1)
    batch = _batch(model, src, tgt)
    projection = grads.Projection.for_model(model)
    exact = grads.features(model, *batch, exact=True)                                    # [B, F]
    blocks, start = [], 0
    for (p, q), (_, m) in zip(projection.per_layer, grads.watched_linears(model)):
        g = exact[:, start:start + m.out_features * m.in_features].view(-1, m.out_features, m.in_features)
        blocks.append((p @ g @ q.T).flatten(1))                                          # [B, K*K]
        start += m.out_features * m.in_features
    expected = torch.cat(blocks, 1) @ projection.final                                   # [B, DIM]
    got = grads.features(model, *batch, projection=projection)
    assert got.shape == (len(LENGTHS), grads.DIM)
    assert torch.allclose(got, expected, rtol=1e-4, atol=1e-4 * expected.abs().max().item())


def test_a_pairs_projected_features_do_not_depend_on_its_batch():
    model = make_model()
    src, tgt = _pairs(2)
    projection = grads.Projection.for_model(model)
    together = grads.features(model, *_batch(model, src, tgt), projection=projection)
    for k in (0, 3):
        alone = grads.features(model, *_batch(model, [src[k]], [tgt[k]]), projection=projection)[0]
        # norm-wise, from the pair's own magnitude: another batch only reassociates float32 sums (relative
        # error ~1e-6 per layer); a pair mixed with a padded neighbour's positions is off by O(1)
        assert (alone - together[k]).norm() <= 1e-4 * together[k].norm()
        assert (together[k] - together[k + 1]).norm() > 0.1 * together[k].norm()


def test_grad_cos_equals_dattris_on_the_same_layers():
    from dattri.algorithm.tracin import TracInAttributor
    from dattri.task import AttributionTask

    model = make_model(tie_embeddings=False, tie_output=False)     # dattri reads shared matrices twice
    src, tgt = _pairs(3)
    s_pad, t_pad = _batch(model, src, tgt)
    layer_names = [f"{n}.weight" for n, _ in grads.watched_linears(model)]
    pad = model.cfg.pad_id

    def loss(params, data):                      # one pair (dattri vmaps over the batch): summed NLL
        s, t = data
        log_probs = functional_call(model, params, (s.unsqueeze(0), t[:-1].unsqueeze(0)))
        nll = -log_probs[0].gather(1, t[1:].unsqueeze(1)).squeeze(1)
        return (nll * (t[1:] != pad)).sum()

    task = AttributionTask(loss_func=loss, model=model, checkpoints=model.state_dict())
    attributor = TracInAttributor(task, weight_list=torch.ones(1), normalized_grad=True, layer_name=layer_names)
    attributor.projector_kwargs = None      # dattri 0.3 always projects to 512; None: attribute() uses exact gradients
    loader = DataLoader(TensorDataset(s_pad, t_pad), batch_size=3, shuffle=False)
    theirs = attributor.attribute(loader, DataLoader(TensorDataset(s_pad[:2], t_pad[:2]), batch_size=2))  # [N, 2]
    ours = torch.nn.functional.normalize(grads.features(model, s_pad, t_pad, exact=True), dim=1)
    mine = ours @ ours[:2].T                                                                # [N, 2]
    assert torch.allclose(mine, theirs, atol=1e-4)
    assert theirs.min() < 0.9                    # not every pair alike: the comparison could fail


def test_a_words_positions_are_its_pieces_only():
    pieces = ["▁The", "▁gov", "ern", "or", ".", "</s>"]
    assert influence.word_positions(pieces, "governor") == [1, 2, 3]
    assert influence.word_positions(["▁neun", "▁hundert", "▁zwölf", "</s>"], "zwölf") == [2]
    assert influence.word_positions(["▁a", "▁b", "▁a"], "a", occurrence=1) == [2]
    assert influence.word_positions(["▁a"], "b") == []


def _store(model, n: int = 12) -> influence.GradientStore:
    gen = torch.Generator().manual_seed(5)
    src = [torch.randint(4, 40, (3 + i % 5,), generator=gen).tolist() + [EOS] for i in range(n)]
    tgt = [[BOS] + torch.randint(4, 40, (2 + i % 4,), generator=gen).tolist() + [EOS] for i in range(n)]
    feats = grads.features(model, *_batch(model, src, tgt), projection=grads.Projection.for_model(model))
    unit = torch.nn.functional.normalize(feats, dim=1).numpy().astype(np.float16)
    return influence.GradientStore("data.tsv", "ab" * 32, tuple(n for n, _ in grads.watched_linears(model)), unit)


def test_a_pair_used_as_the_query_ranks_itself_first():
    model = make_model()
    store = _store(model)
    for i in range(store.pairs):
        assert influence.top(store, store.features[i].astype(np.float32), 3)[0].index == i


def test_a_kept_store_reads_back_and_is_refused_for_other_weights_data_size_or_damage(tmp_path):
    model = make_model()
    store = _store(model)
    layers = list(store.layers)
    path = influence.save(store, tmp_path / "s.safetensors")
    back = influence.load(path, "data.tsv", "ab" * 32, store.pairs, layers)
    assert np.array_equal(back.features, store.features)
    for args, said in (((path, "data.tsv", "cd" * 32, store.pairs, layers), "weights_sha256"),
                       ((path, "other.tsv", "ab" * 32, store.pairs, layers), "dataset"),
                       ((path, "data.tsv", "ab" * 32, store.pairs + 1, layers), "float16"),
                       ((path, "data.tsv", "ab" * 32, store.pairs, layers[:-1]), "layers"),
                       ((tmp_path / "none", "data.tsv", "ab" * 32, store.pairs, layers), "no gradient store")):
        with pytest.raises(influence.StoreUnusable, match=said):
            influence.load(*args)
    raw = path.read_bytes()
    (tmp_path / "cut").write_bytes(raw[:len(raw) // 2])
    (tmp_path / "junk").write_bytes(b"\xff" * len(raw))
    for name in ("cut", "junk"):
        with pytest.raises(influence.StoreUnusable, match="damaged"):
            influence.load(tmp_path / name, "data.tsv", "ab" * 32, store.pairs, layers)
    meta = {"format": "1", "dataset": "data.tsv", "weights_sha256": "ab" * 32, "layers": json.dumps(layers),
            "dim": str(grads.DIM), "k": str(grads.K), "seed": str(grads.SEED)}
    bad = store.features.copy()
    bad[0, 0] = np.nan
    (tmp_path / "nan").write_bytes(save_tensors({"features": bad}, metadata=meta))
    with pytest.raises(influence.StoreUnusable, match="NaN"):
        influence.load(tmp_path / "nan", "data.tsv", "ab" * 32, store.pairs, layers)
    with pytest.raises(influence.StoreUnusable, match="within"):        # a size no store may have
        influence.load(path, "data.tsv", "ab" * 32, 10 ** 9, layers)
    (tmp_path / "kept").mkdir()                          # a store linked from outside its folder is not read
    (tmp_path / "kept" / "s.safetensors").symlink_to(path)
    with pytest.raises(influence.StoreUnusable, match="symbolic link leading out of"):
        influence.load(tmp_path / "kept" / "s.safetensors", "data.tsv", "ab" * 32, store.pairs, layers)


def test_stores_of_other_weights_or_corpora_live_apart():
    a = influence.store_path("runs/uploads/a.tsv", "ab" * 32)
    assert a != influence.store_path("runs/uploads/b.tsv", "ab" * 32)
    assert a != influence.store_path("runs/uploads/a.tsv", "cd" * 32)


def test_a_words_query_is_the_projected_gradient_of_its_positions_alone():
    """influence.query (the word a user picks, Where did it learn this?): the summed negative log-probability
    of the output tokens at its positions alone, differentiated by autograd w.r.t. the watched weights,
    projected and made unit length; the other positions' tokens add nothing to it."""
    from explorer.store.checkpoint import load_checkpoint
    from explorer.text.encoding import source_ids
    from support.app_support import ROOT
    ckpt = load_checkpoint(ROOT / "checkpoints" / "numbers-en-de")
    model, tok = ckpt.model, ckpt.tokenizer
    special = model.cfg.special
    source = "nine hundred and twelve"
    out_ids = tok.encode("neun hundert zwölf", side="tgt") + [special.eos]
    positions = [1, 2]
    src = torch.tensor([source_ids(tok, source, model.cfg.max_len, special)])           # [1, S]
    tgt = torch.tensor([[special.start] + out_ids])                                      # [1, T+1]
    log_probs = model(src, tgt[:, :-1])                                                  # [1, T, V]
    nll = -log_probs[0, positions].gather(1, tgt[0, 1:][positions, None]).sum()
    linears = grads.watched_linears(model)
    gradients = torch.autograd.grad(nll, [m.weight for _, m in linears])                # each [out, in]
    projection = grads.Projection.for_model(model)
    blocks = [(p @ g @ q.T).flatten() for (p, q), g in zip(projection.per_layer, gradients)]   # each [K*K]
    expected = torch.nn.functional.normalize(torch.cat(blocks) @ projection.final, dim=0)  # [DIM]
    got = influence.query(model, tok, source, out_ids, positions)
    assert np.allclose(got, expected.detach().numpy(), atol=1e-4)
    other = influence.query(model, tok, source, out_ids, [0])
    assert float(np.dot(got, other)) < 0.99                    # another word's query differs: the check has teeth
