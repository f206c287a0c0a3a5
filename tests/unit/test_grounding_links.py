"""The links of the training data (explorer.studies.grounding.links): exact co-occurrence counts, the same
as a plain double loop however they are chunked; the rule that makes a link; the output words marked
when no source word brings them along; an index without links (an older format) or with damaged ones
refused in one line."""
from __future__ import annotations

import gzip
import json
import random
from collections import Counter
from types import SimpleNamespace as Pair

import pytest

from explorer.studies.grounding import index as ix
from explorer.studies.grounding import links as lk
from explorer.studies.grounding.verdict import verdict
from explorer.studies.common.words import words


def plain_counts(pairs, skip):
    """Pairs with s in the source and t in the target, by a double loop over each pair's words."""
    together, verses = Counter(), Counter()
    for p in pairs:
        src, tgt = set(words(p.src)), set(words(p.tgt)) - skip
        verses.update(src)
        together.update((s, t) for s in src for t in tgt)
    return together, verses


def random_corpus(n: int, seed: int = 0) -> list[Pair]:
    rng = random.Random(seed)
    src_vocab, tgt_vocab = [f"s{i}" for i in range(40)], [f"t{i}" for i in range(40)]
    return [Pair(src=" ".join(rng.choices(src_vocab, k=rng.randint(1, 8))),
                 tgt=" ".join(rng.choices(tgt_vocab, k=rng.randint(0, 8)))) for _ in range(n)]


@pytest.mark.parametrize("chunk", [3, 4096])                 # merged over many chunks, or counted at once
def test_the_links_are_the_exact_counts_of_a_plain_loop_under_the_rule(monkeypatch, chunk):
    monkeypatch.setattr(lk, "CHUNK", chunk)
    pairs, skip = random_corpus(300), {"t0", "t1"}
    links, verses = lk.count_links(pairs, skip)
    together, plain_verses = plain_counts(pairs, skip)
    assert verses == dict(plain_verses)
    expected = {}
    for (s, t), n in together.items():
        if n >= lk.LINK_MIN and n >= lk.LINK_SHARE * plain_verses[s]:
            expected.setdefault(s, {})[t] = n
    assert links == expected and expected                    # the same links, and some
    assert not any(t in skip for targets in links.values() for t in targets)


def test_a_link_needs_a_tenth_of_the_source_words_pairs_and_two_of_them():
    pairs = [Pair(src="rey", tgt="king")] * 2 + [Pair(src="rey", tgt="x")] * 17 \
        + [Pair(src="rey", tgt="queen")] * 1 + [Pair(src="ley", tgt="law")] * 1 + [Pair(src="ley", tgt="y")] * 3
    links, verses = lk.count_links(pairs, set())
    assert verses["rey"] == 20 and links["rey"]["king"] == 2          # 2 of 20 pairs: a tenth, and two
    assert "queen" not in links["rey"]                                  # 1 of 20
    more = lk.count_links(pairs + [Pair(src="rey", tgt="y")], set())[0]
    assert "king" not in more["rey"]                                    # 2 of 21: under a tenth
    assert "law" not in links.get("ley", {})                            # a quarter of them, but only one


def test_made_up_output_words_are_marked_and_linked_ones_say_where_from():
    filler = ["".join(chr(97 + (i // 26 ** k) % 26) for k in range(3)) for i in range(4000)]   # aaa, baa ...
    train = [Pair(src="el rey dijo", tgt="the king said")] * 30 + [Pair(src="la casa", tgt="the house")] * 30 \
        + [Pair(src=f"x{w}", tgt=f"y{w}") for w in filler]          # 4,060 pairs: "the" in 1.5%, "king" 0.7%
    index = ix.count(train, "toy", "es", "en")
    assert "the" in index.glue() and "king" not in index.glue()
    found = verdict(index, "el rey dijo", "toy", "The king said the dragon")
    by_word = {w.word: w for w in found.output}
    assert by_word["dragon"].marked and not by_word["king"].marked and not by_word["the"].marked
    assert (by_word["king"].source, by_word["king"].together, by_word["king"].of) in \
        {("rey", 30, 30), ("el", 30, 30), ("dijo", 30, 30)}
    assert lk.marked(found.output) == ["dragon"]
    assert verdict(index, "el rey dijo", "toy").output == ()           # no output given: nothing marked


def test_a_typographic_apostrophe_is_the_plain_one():
    assert words("My daughter’s house") == words("My daughter's house") == ["my", "daughter's", "house"]


def test_an_index_of_the_older_format_or_with_damaged_links_is_refused(tmp_path):
    index = ix.count([Pair(src="el rey", tgt="the king")] * 3, "toy", "es", "en")
    record = index.to_json()
    older = {k: v for k, v in record.items() if k not in ("links", "src_verses")} | {"format": 1}
    (tmp_path / "older.json.gz").write_bytes(gzip.compress(json.dumps(older).encode()))
    damaged = record | {"links": {"rey": {"king": "many"}}}
    (tmp_path / "damaged.json.gz").write_bytes(gzip.compress(json.dumps(damaged).encode()))
    for name, why in (("older", f"format {ix.FORMAT}"), ("damaged", "positive counts")):
        with pytest.raises(ix.IndexUnusable, match=why) as refused:
            ix.load(tmp_path / f"{name}.json.gz")
        assert "\n" not in str(refused.value)
