"""A feature's page and steering, on the shipped numbers model with a small dictionary of each kind of site:
a clamp to the feature's own value, or of a silent feature to 0, changes nothing to the bit; a removal
equals a second, dense implementation; the training contexts, densities and histograms equal a brute
force over every row, and each stored context's activation is what the sentence's own reading finds
there; the effects at the contexts equal a per-context computation; a contexts file of other weights,
another site or damaged is refused in one line."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer.data import load_corpus
from explorer.data.encoded import encode_pairs
from explorer.store.checkpoint import load_checkpoint
from explorer.studies.common.sentences import greedy_ids
from explorer.studies.features import contexts, files, reading, sites, steering
from explorer.studies.features import transcoder as tcm
from support.app_support import ROOT

NUMBERS = ROOT / "checkpoints" / "numbers-en-de"
pytestmark = pytest.mark.skipif(not (NUMBERS / "model.safetensors").is_file(), reason="needs numbers-en-de")
SITES = ("encoder.layers.1.ffn", "decoder.layers.0.ffn")
QUICK = tcm.TrainSettings(width=128, k=8, steps=150, batch=512)
READ = 300                                         # training pairs the contexts read


@pytest.fixture(scope="module")
def numbers():
    torch.set_num_threads(1)
    ckpt = load_checkpoint(NUMBERS)
    train = load_corpus("numbers").train[:3000]
    made = {}
    for site in SITES:
        rows = sites.collect(ckpt.model, ckpt.tokenizer, train, site, 15_000)
        made[site] = tcm.train(rows.inputs, rows.outputs, QUICK)
    return ckpt, train, made


@pytest.fixture(scope="module")
def indexes(numbers):
    """Each site's training contexts over READ pairs drawn with seed 3."""
    ckpt, train, made = numbers
    return {site: contexts.build(ckpt.model, ckpt.tokenizer, train, site, made[site], sentences=READ, seed=3)
            for site in SITES}


def _source(ckpt, text="three hundred and twenty one"):
    src = ckpt.tokenizer.encode(text, side="src") + [ckpt.model.cfg.special.eos]
    return src, greedy_ids(ckpt.model, [src])[0] + [ckpt.model.cfg.special.eos]


def _activations(ckpt, tc, site, src, out):
    """The feature activations at every position the site reads, by a plain pass and a dense encode: [L, m]."""
    seen = {}
    handle = sites.ffn(ckpt.model, site).register_forward_hook(lambda _m, a, _o: seen.__setitem__("x", a[0]))
    with torch.no_grad():
        ckpt.model.logits(torch.tensor([src]), torch.tensor([[ckpt.model.cfg.special.start] + out[:-1]]))
    handle.remove()
    with torch.no_grad():
        return torch.relu(tcm.topk_relu(seen["x"][0] @ tc.W_enc + tc.b_enc, tc.k))


@pytest.mark.parametrize("site", SITES)
def test_a_clamp_to_its_own_value_or_of_a_silent_feature_to_zero_changes_nothing(numbers, site):
    ckpt, _, made = numbers
    tc, model = made[site], ckpt.model
    src, out = _source(ckpt)
    z = _activations(ckpt, tc, site, src, out)                                      # [L, m]
    position, feature = divmod(int(z.argmax()), z.shape[1])
    own = float(z[position, feature])
    plain = steering.forced_logprobs(model, src, out)
    length = len(src) if site.startswith("encoder.") else len(out)
    mask = steering.positions_mask(length, [position])[0:1]
    with steering.clamped(model, site, tc, feature, own, mask):
        assert torch.equal(steering.forced_logprobs(model, src, out), plain)
    silent = int(torch.nonzero(z.max(0).values == 0)[0])                             # fires nowhere here
    with steering.clamped(model, site, tc, silent, 0.0):
        assert torch.equal(steering.forced_logprobs(model, src, out), plain)
    # a removal, against a second implementation: the FFN's output minus the feature's dense write
    direction = tc.W_dec[feature].detach()

    def minus(_m, args, output):
        dense = torch.relu(tcm.topk_relu(args[0] @ tc.W_enc + tc.b_enc, tc.k))[..., feature]     # [B, L]
        keep = torch.zeros_like(dense)
        keep[0, position] = 1.0
        return output - (dense * keep).unsqueeze(-1) * direction
    handle = sites.ffn(model, site).register_forward_hook(minus)
    expected = steering.forced_logprobs(model, src, out)
    handle.remove()
    with steering.clamped(model, site, tc, feature, 0.0, mask):
        removed = steering.forced_logprobs(model, src, out)
    assert not torch.equal(removed, plain)
    assert (removed - expected).abs().max() < 1e-4


def test_steering_to_its_own_value_keeps_the_translation_and_every_log_p(numbers):
    ckpt, _, made = numbers
    site = SITES[0]
    src, out = _source(ckpt)
    z = _activations(ckpt, made[site], site, src, out)
    position, feature = divmod(int(z.argmax()), z.shape[1])
    same = steering.steer(ckpt.model, made[site], site, feature, float(z[position, feature]), src, out, [position])
    assert same.out_ids == same.plain_ids == out[:-1] and np.array_equal(same.before, same.after)
    with pytest.raises(ValueError, match="every target position"):
        steering.steer(ckpt.model, made[SITES[1]], SITES[1], 0, 0.0, src, out, [0])
    with pytest.raises(ValueError, match="outside"):
        steering.steer(ckpt.model, made[site], site, feature, 0.0, src, out, [len(src)])


@pytest.mark.parametrize("site", SITES)
def test_the_contexts_equal_a_brute_force_over_every_row(numbers, indexes, site, tmp_path):
    ckpt, train, made = numbers
    tc, index = made[site], indexes[site]
    chosen = np.sort(np.random.default_rng(3).permutation(len(train))[:READ])
    assert np.array_equal(index.pairs, chosen)
    encoded = encode_pairs(ckpt.tokenizer, [train[i] for i in chosen], ckpt.model.cfg.max_len, ckpt.model.cfg.special)
    dense = []
    for src, tgt in zip(encoded.src, encoded.tgt):
        dense.append(_activations(ckpt, tc, site, list(src), list(tgt[1:])).numpy())      # [L, m]
    z = np.concatenate(dense)                                                             # [N, m]
    assert index.tokens == len(z)
    # batched passes and a pass per sentence may round differently, and a latent at the k-th place or at 0
    # may then fire in one and not the other: counts agree within a few positions in a thousand
    assert np.abs(index.active - (z > 0).sum(0)).sum() <= 0.002 * index.tokens * QUICK.k
    assert np.array_equal(index.hist.sum(1), index.active)
    busiest = int(np.argmax(index.active))
    top = np.sort(z[:, busiest])[::-1][:contexts.TOP]
    assert np.allclose(index.top_value[busiest], top, atol=1e-4 * max(1.0, top.max()))
    assert index.max_value[busiest] == pytest.approx(top[0], rel=1e-4)
    for pair, position, value in index.contexts(busiest)[:5]:                 # each context is where it says
        at = int(np.searchsorted(chosen, pair))
        assert dense[at][position, busiest] == pytest.approx(value, rel=1e-4)
    # the file reads back whole; another site, a retrained dictionary and damage are refused in one line
    folder = files.save(tc, tmp_path / "trained", site=site, weights_sha256="ab", model_name="numbers")
    contexts.save(index, folder)
    again = contexts.load(folder, site=site, width=tc.width, n_pairs=len(train))
    assert all(np.array_equal(getattr(again, k), getattr(index, k)) for k in ("pairs", "top_pair", "hist", "active"))
    with pytest.raises(files.DictionaryUnusable, match="not the contexts of"):
        contexts.load(folder, site="encoder.layers.0.ffn", width=tc.width, n_pairs=len(train))
    with pytest.raises(files.DictionaryUnusable, match="tensors"):
        contexts.load(folder, site=site, width=tc.width * 2, n_pairs=len(train))
    with pytest.raises(files.DictionaryUnusable, match="out of range|tensors"):
        contexts.load(folder, site=site, width=tc.width, n_pairs=5)
    files.save(made[SITES[0] if site != SITES[0] else SITES[1]], folder, site=site, weights_sha256="ab",
               model_name="numbers")                                          # the dictionary trained again
    with pytest.raises(files.DictionaryUnusable, match="other weights"):
        contexts.load(folder, site=site, width=tc.width, n_pairs=len(train))
    (folder / "contexts.safetensors").write_bytes(b"\x00" * 64)
    with pytest.raises(files.DictionaryUnusable, match="damaged"):
        contexts.load(folder, site=site, width=tc.width, n_pairs=len(train))


@pytest.mark.parametrize("site", SITES)
def test_the_effects_at_the_contexts_equal_one_context_at_a_time(numbers, indexes, site):
    ckpt, train, made = numbers
    tc, model, index = made[site], ckpt.model, indexes[site]
    feature = int(np.argmax(index.active))
    found = index.contexts(feature)[:6]
    effects = reading.context_effects(model, ckpt.tokenizer, tc, site, feature, train, found)
    encoder = site.startswith("encoder.")
    per_context, head_change = [], []
    attns = [m for n, m in model.named_modules() if n.startswith("decoder.") and n.endswith("cross_attn")]
    for pair, position, _ in found:
        encoded = encode_pairs(ckpt.tokenizer, [train[pair]], model.cfg.max_len, model.cfg.special)
        src, out = list(encoded.src[0]), list(encoded.tgt[0][1:])
        contexts_seen = []                                   # each cross-attention's per-head output, per pass
        handles = [a.context.register_forward_hook(lambda _m, _a, c: contexts_seen.append(c[0])) for a in attns]
        before = steering.forced_logprobs(model, src, out)                                  # [T, V]
        mask = steering.positions_mask(len(src) if encoder else len(out), [position])
        with steering.clamped(model, site, tc, feature, 0.0, mask):
            after = steering.forced_logprobs(model, src, out)
        for handle in handles:
            handle.remove()
        n = len(attns)
        per_head = []                                        # [layers][heads]: |change of the head's write|
        for layer, attn in enumerate(attns):
            d_head = attn.d_head
            delta = contexts_seen[n + layer] - contexts_seen[layer]                             # [H, T, dh]
            per_head.append([float((delta[h] @ attn.w_o.weight.detach()[:, h * d_head:(h + 1) * d_head].T).norm())
                             for h in range(attn.n_heads)])
        head_change.append(per_head)
        if encoder:
            gained = (before - after).gather(1, torch.tensor(out)[:, None])[:, 0]          # [T]
            per_context.append((int(gained.argmax()), float(gained.max())))
        else:
            per_context.append(before[position] - after[position])                         # [V]
    if encoder:
        expected = np.mean(head_change, axis=0)                                             # [layers, heads]
        assert effects.heads.shape == expected.shape and expected.max() > 0
        assert np.allclose(effects.heads, expected, rtol=1e-3, atol=1e-5 * expected.max())
        assert [p for p, _ in effects.helps] == [p for p, _ in per_context]
        assert np.allclose([v for _, v in effects.helps], [v for _, v in per_context], atol=1e-4)
    else:
        mean = torch.stack(per_context).mean(0)
        assert [i for i, _ in effects.raised[:3]] == mean.topk(3).indices.tolist()
        assert effects.raised[0][1] == pytest.approx(float(mean.max()), abs=1e-4)
        assert effects.lowered[0][1] == pytest.approx(float(mean.min()), abs=1e-4)


def test_a_sentences_features_are_its_strongest_activations(numbers):
    ckpt, _, made = numbers
    for site in SITES:
        src, out = _source(ckpt)
        found = reading.sentence_features(ckpt.model, made[site], site, src, out)
        z = _activations(ckpt, made[site], site, src, out)
        assert found.features.shape == (len(src) if site.startswith("encoder.") else len(out), reading.SHOWN)
        assert np.allclose(found.values[:, 0], z.max(1).values.numpy(), atol=1e-5)
        assert all(z[t, f] > 0 for t, f in enumerate(found.features[:, 0]) if f >= 0)


def test_word_detection_equals_a_count_by_hand(numbers):
    from explorer.studies.common.words import span_word
    from explorer.studies.features.detection import detect

    ckpt, train, made = numbers
    site, pairs = SITES[0], train[:120]
    words = ["hundred", "thousand", "twenty", "and", "seven", "no-such-word"]
    found = detect(ckpt.model, ckpt.tokenizer, pairs, site, made[site], words)
    assert found.words == words[:5]                                     # a word never read is left out
    fires, labels = [], []
    for pair in pairs:
        src = ckpt.tokenizer.encode(pair.src, side="src") + [ckpt.model.cfg.special.eos]
        fires.append(_activations(ckpt, made[site], site, src, src[:1]).numpy() > 0)      # [L, m]
        pieces = [ckpt.tokenizer.id_to_piece(i, "src") for i in src]
        labels += [span_word(pieces, p) for p in range(len(pieces))]
    fired, labels = np.concatenate(fires), np.array(labels)
    for i, word in enumerate(found.words):
        here = labels == word
        f1 = 2 * (fired & here[:, None]).sum(0) / (fired.sum(0) + here.sum())             # [m]
        assert found.positions[i] == here.sum()
        # one pass per sentence against batched passes: a latent at the k-th place may differ; the best F1 not much
        assert found.best_f1[i] == pytest.approx(f1.max(), abs=0.01)
        assert 0 < found.best_f1[i] <= 1
        best = found.best_feature[i]
        hits = (fired[:, best] & here).sum()
        assert found.precision[i] == pytest.approx(hits / fired[:, best].sum(), abs=0.01)
        assert found.recall[i] == pytest.approx(hits / here.sum(), abs=0.01)
    with pytest.raises(ValueError, match="encoder site"):
        detect(ckpt.model, ckpt.tokenizer, pairs, SITES[1], made[SITES[1]], words)


class _AndJoined:
    """The numbers tokenizer with "▁and" read as "and": a piece that continues the word before it, so
    "hundred and" is one word of two pieces ("hundredand"), as a bible word of several pieces is."""

    def __init__(self, tokenizer):
        self._tokenizer = tokenizer

    def __getattr__(self, name):
        return getattr(self._tokenizer, name)

    def id_to_piece(self, i, side):
        piece = self._tokenizer.id_to_piece(i, side)
        return "and" if piece == "▁and" else piece


def test_word_detection_by_occurrence_equals_a_count_by_hand(numbers):
    """by="word": a word occurrence (its span of pieces) is one unit, found when the feature fires on any of
    its pieces, counted once however many of them it fires on."""
    from explorer.inspection.attention_stats import piece_words as groups_of
    from explorer.studies.common.words import span_word
    from explorer.studies.features.detection import detect

    ckpt, train, made = numbers
    site, pairs, tok = SITES[0], train[:120], _AndJoined(ckpt.tokenizer)
    fires, labels, sizes = [], [], []
    for pair in pairs:
        src = ckpt.tokenizer.encode(pair.src, side="src") + [ckpt.model.cfg.special.eos]
        fired = _activations(ckpt, made[site], site, src, src[:1]).numpy() > 0                 # [L, m]
        pieces = [tok.id_to_piece(i, "src") for i in src]
        for group in groups_of(pieces):
            fires.append(fired[group].any(0))                                                   # [m]
            labels.append(span_word(pieces, group[0]))
            sizes.append(len(group))
    fired, labels, sizes = np.stack(fires), np.array(labels), np.array(sizes)                   # [U, m], [U], [U]
    joined = [w for w in dict.fromkeys(labels[sizes == 2]) if w][:2]                            # "hundredand", ...
    words = [*joined, "twenty", "seven"]
    assert len(joined) == 2
    found = detect(ckpt.model, tok, pairs, site, made[site], words, by="word")
    by_piece = detect(ckpt.model, tok, pairs, site, made[site], words)
    assert found.by == "word" and by_piece.by == "piece" and found.words == words
    for i, word in enumerate(words):
        here = labels == word
        f1 = 2 * (fired & here[:, None]).sum(0) / (fired.sum(0) + here.sum())                  # [m]
        assert found.positions[i] == here.sum()
        assert found.best_f1[i] == pytest.approx(f1.max(), abs=0.01)
        hits = (fired[:, found.best_feature[i]] & here).sum()
        assert found.recall[i] == pytest.approx(hits / here.sum(), abs=0.01)
        assert found.precision[i] == pytest.approx(hits / fired[:, found.best_feature[i]].sum(), abs=0.01)
    assert (by_piece.positions[:2] == 2 * found.positions[:2]).all()        # two pieces each, one occurrence

    class Everywhere:                   # a dictionary whose feature 0 fires on every piece: each unit counted once
        width = 3

        def encode(self, x):
            return torch.nn.functional.one_hot(torch.zeros(len(x), dtype=torch.long), 3).float()    # [c, 3]

    everywhere = detect(ckpt.model, tok, pairs, site, Everywhere(), words, by="word")
    assert (everywhere.best_feature == 0).all() and np.allclose(everywhere.recall, 1.0)
    assert np.allclose(everywhere.precision, [(labels == w).sum() / len(labels) for w in words])
    with pytest.raises(ValueError, match="piece"):
        detect(ckpt.model, tok, pairs, site, made[site], words, by="sentence")


def test_mutual_pairs_keep_the_pairs_tied_both_ways():
    from explorer.studies.grounding.links import mutual_pairs

    links = {"dios": {"god": 90, "lord": 20}, "señor": {"lord": 80, "god": 30}, "de": {"israel": 40},
             "israel": {"israel": 70}, "rey": {"king": 50}}
    assert mutual_pairs(links, 10) == [("dios", "god", 90), ("señor", "lord", 80), ("israel", "israel", 70),
                                       ("rey", "king", 50)]
    assert mutual_pairs(links, 2) == [("dios", "god", 90), ("señor", "lord", 80)]


@pytest.mark.parametrize("site", SITES)
def test_a_feature_over_the_runs_checkpoints_ends_at_its_own_activations(numbers, indexes, site):
    """Read from each of the run's shipped checkpoints at the feature's contexts: at the dictionary's own
    checkpoint the values are the contexts' stored activations (a plain second computation, batched
    differently: rel 1e-4 as above); the run's earlier checkpoints read something else; a checkpoint with
    another tokenizer is refused in one line."""
    from explorer.studies.features import over_training

    ckpt, train, made = numbers
    tc, index = made[site], indexes[site]
    busiest = int(np.argmax(index.active))
    found = index.contexts(busiest)
    run = [load_checkpoint(ROOT / "checkpoints" / f"numbers-en-de-step{s}") for s in (150, 300)] + [ckpt]
    read = over_training.activation_over_training(ckpt.tokenizer, tc, site, busiest, train, found,
                                                  [(s, c.model, c.tokenizer) for s, c in zip(["150", "300", "900"], run)])
    assert read.values.shape == (3, len(found)) and read.labels == ["150", "300", "900"]
    stored = np.array([v for _, _, v in found], np.float32)
    assert np.allclose(read.values[-1], stored, rtol=1e-4, atol=1e-4 * float(stored.max()))
    assert not np.allclose(read.values[0], stored, rtol=1e-2)                 # step 150 reads another stream
    assert np.isfinite(read.values).all()
    bible = ROOT / "checkpoints" / "bible-es-en"
    if (bible / "tokenizer.model").is_file():
        other = load_checkpoint(bible)
        with pytest.raises(over_training.OtherTokenizer, match="reads other pieces") as err:
            over_training.activation_over_training(ckpt.tokenizer, tc, site, busiest, train, found,
                                                   [("900", ckpt.model, ckpt.tokenizer), ("bible", other.model, other.tokenizer)])
        assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="not in 0.."):
        over_training.activation_over_training(ckpt.tokenizer, tc, site, tc.width, train, found,
                                               [("900", ckpt.model, ckpt.tokenizer)])
