"""The Alignment page's one-sentence view on the model every user shares, measured in memory: four
sessions asking for integrated gradients at once (each on its own Bible gold verse), and one long pair
(a 150-word upload once took the server from 0.68 to 4.9 GB), stay within the compute queue's places
times the attribution budget (explorer.studies.align.attribution.ATTRIBUTION_BYTES) plus a stated allowance.

Each runs in a fresh process whose own peak (VmHWM) is read after a warm-up, with glibc held to 2
malloc arenas as the server holds itself (webapp.process_memory).
"""
from __future__ import annotations

import json
import os
import sys
import textwrap

import pytest

from support.app_support import ROOT
from support.waiting import run_watched

BIBLE = ROOT / "checkpoints" / "bible-es-en"
ALLOWANCE = 256 << 20          # four sessions' pages without attributions: ~165 MiB measured; and allocator slack

pytestmark = pytest.mark.skipif(not (BIBLE / "model.safetensors").is_file(), reason="needs checkpoints/bible-es-en")

PROBE = textwrap.dedent("""
    import json, os, sys, threading
    sys.path.insert(0, {tests!r})
    from support.app_support import open_app, no_exception
    from explorer.studies.align.attribution import ATTRIBUTION_BYTES
    from explorer.studies.align.gold import read_gold
    from explorer.runtime.compute_queue import QUEUE

    def status(key):
        return int(open("/proc/self/status").read().split(key + ":")[1].split()[0]) * 1024

    PAGE = "webapp/pages/alignment.py"
    gold = read_gold({gold!r})
    warm = open_app("bible-es-en", PAGE, gold[10].src_text)          # models, caches, figures: once
    no_exception(warm)
    before = status("VmRSS")
    errors = []

    def student(k):
        try:
            at = open_app("bible-es-en", PAGE, gold[k].src_text, session={{"align_with_ig": True}})
            no_exception(at)
            assert any("integrated" in c.value for c in at.caption) or at.session_state["align_with_ig"]
        except BaseException as err:
            errors.append(repr(err))
    threads = [threading.Thread(target=student, args=(k,)) for k in (20, 30, 40, 50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({{"added": status("VmHWM") - before, "slots": QUEUE.slots, "budget": ATTRIBUTION_BYTES,
                      "errors": errors}}))
""")


def test_four_sessions_with_integrated_gradients_at_once_stay_within_the_bound(tmp_path):
    env = {**os.environ, "MALLOC_ARENA_MAX": "2", "EXPLORER_COMPUTE_SLOTS": "2", "EXPLORER_RUNS_DIR": str(tmp_path),
           "EXPLORER_THREADS": "1"}
    env.pop("EXPLORER_CHECKPOINT_ROOTS", None)
    env.pop("EXPLORER_MODELS_DIR", None)
    script = PROBE.format(tests=str(ROOT / "tests"), gold=str(ROOT / "gold" / "bible-es-en.align"))
    run = run_watched([sys.executable, "-c", script], "four sessions aligning", cwd=ROOT, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    found = json.loads(run.stdout.strip().splitlines()[-1])
    assert not found["errors"], found
    assert found["added"] < found["slots"] * found["budget"] + ALLOWANCE, found
    print(f"four sessions with integrated gradients: +{found['added'] / 2**20:.0f} MiB")


LONG = textwrap.dedent("""
    import json, sys
    import torch
    from explorer.studies.align.attribution import ATTRIBUTION_BYTES
    from explorer.studies.align.gold import GoldPair, read_gold
    from explorer.studies.align.sentence import Method, align_sentence
    from explorer.store.checkpoint import load_checkpoint

    def status(key):
        return int(open("/proc/self/status").read().split(key + ":")[1].split()[0]) * 1024

    ck = load_checkpoint({ckpt!r})
    gold = read_gold({gold!r})
    methods = [Method("attention", "naive", None), Method("value-norm", "naive", None), Method("grad-x-input")]
    align_sentence(ck.model, ck.tokenizer, gold[3], methods)                       # warm
    words = [w for g in gold for w in g.src][:150], [w for g in gold for w in g.tgt][:150]
    before = status("VmRSS")
    found = align_sentence(ck.model, ck.tokenizer, GoldPair(words[0], words[1], frozenset()), methods)
    print(json.dumps({{"added": status("VmHWM") - before, "budget": ATTRIBUTION_BYTES,
                      "shape": list(found.matrices[methods[-1].label()].shape)}}))
""")


def test_a_150_word_pair_as_the_page_aligns_it_stays_within_the_budget():
    """What the page computes with no click (attention, value-norm, gradient x input) on the long pair."""
    script = LONG.format(ckpt=str(BIBLE), gold=str(ROOT / "gold" / "bible-es-en.align"))
    run = run_watched([sys.executable, "-c", script], "the 150-word pair", cwd=ROOT,
                      env={**os.environ, "MALLOC_ARENA_MAX": "2"})
    assert run.returncode == 0, run.stderr[-3000:]
    found = json.loads(run.stdout.strip().splitlines()[-1])
    assert found["shape"] == [150, 150]
    assert found["added"] < found["budget"] + (96 << 20), found
    print(f"a 150-word pair: +{found['added'] / 2**20:.0f} MiB")
