"""Four users at once on one shared model (the app's sessions share the loaded checkpoint): each
translates its own sentence with a beam trace and captures every point of the best output, one of
them with a head removed; each gets exactly (bit for bit) what it gets alone, and no hook is left."""
import threading

import numpy as np
import pytest

from explorer.config import DecodeConfig
from explorer.decoding.translate import attention_trace, translate
from explorer.files.places import REPO_ROOT
from support.waiting import STALL_S, join

NUMBERS = REPO_ROOT / "checkpoints" / "numbers-en-de"
SENTENCES = ["three hundred and fourteen", "twenty one thousand and five", "nine hundred and ninety nine",
             "four thousand three hundred and twelve"]
ABLATE = [[], [], [("cross", 0, 1), ("encoder", 1, 0)], []]


def user(model, tokenizer, text, ablate):
    t = translate(model, tokenizer, text, DecodeConfig(strategy="beam", beam_size=4), ablate=ablate, trace=True)
    best = t.hypotheses[0]
    trace = attention_trace(model, tokenizer, t.src_ids, best.ids, ablate=ablate)
    candidates = t.beam_trace.candidates.tobytes()              # the whole BeamTrace, every field of every row
    return best.ids, best.score, candidates, trace


@pytest.mark.skipif(not (NUMBERS / "model.safetensors").is_file(), reason="needs checkpoints/numbers-en-de")
def test_four_concurrent_users_each_get_their_single_user_result():
    """At the app's torch thread count (1, set in the main thread: new threads must follow it)."""
    import torch
    from explorer.store.checkpoint import load_checkpoint
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        check_users(load_checkpoint(NUMBERS))
    finally:
        torch.set_num_threads(before)


def check_users(ckpt):
    alone = [user(ckpt.model, ckpt.tokenizer, s, a) for s, a in zip(SENTENCES, ABLATE)]
    assert alone[2][0] != user(ckpt.model, ckpt.tokenizer, SENTENCES[2], [])[0] or \
        alone[2][1] != user(ckpt.model, ckpt.tokenizer, SENTENCES[2], [])[1]          # the ablation matters
    for _ in range(3):
        start, results, errors = threading.Barrier(4), [None] * 4, []

        def run(i):
            try:
                start.wait(STALL_S)
                results[i] = user(ckpt.model, ckpt.tokenizer, SENTENCES[i], ABLATE[i])
            except Exception as err:  # noqa: BLE001
                errors.append(err)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            join(t, "four users' requests")
        assert not errors
        for got, want in zip(results, alone):
            assert got[:3] == want[:3]
            assert got[3].names() == want[3].names()
            for name in want[3].names():
                np.testing.assert_array_equal(got[3][name], want[3][name])
    assert sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in ckpt.model.modules()) == 0
