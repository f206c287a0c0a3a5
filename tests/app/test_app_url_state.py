"""AppTest: a shared link reopens the same view.

The URL carries the decoding settings (webapp.decode_url), the Attention page's Show quantity and
the ablated heads; a link made from one session's URL gives a fresh session the same settings and
the same output; hostile URL values fall back to the defaults with no traceback; the Translate page
answers at /translate as well as at /.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from support.app_support import no_exception, numbers, open_app, shown_translation  # noqa: F401  (numbers: a fixture)
from explorer.config import DecodeConfig
from explorer.decoding import translate
from webapp import decode_url, url_keys

ATTENTION = "webapp/pages/attention.py"
TEXT = "three hundred and twenty one"


def headline(at) -> str:
    return shown_translation(at)


def test_a_greedy_link_reopens_as_greedy(numbers):
    info, ckpt = numbers
    at = open_app(info.name, text=TEXT, query={"dec": "greedy", "minlen": 2, "maxlen": 30})
    no_exception(at)
    cfg = at.session_state["decode_cfg"]
    assert (cfg["strategy"], cfg["min_len"], cfg["max_len_b"]) == ("greedy", 2, 30)
    assert at.radio(key="dec_strategy").value == "greedy" and at.number_input(key="dec_minlen").value == 2
    want = translate(ckpt.model, ckpt.tokenizer, TEXT, DecodeConfig(strategy="greedy", min_len=2, max_len_b=30))
    assert headline(at) == want.text and len(at.dataframe[0].value) == 1
    assert at.query_params["dec"] == "greedy" and "beam" not in at.query_params      # a greedy link stays short


def test_linked_settings_are_sent_to_the_browser_on_every_run(numbers):
    """A browser that missed the first run's value (a page switched to at once) shows the widget's own
    default and sends it back on the next run: the linked value must reach it on later runs too."""
    info, _ = numbers
    at = open_app(info.name, text=TEXT, query={"dec": "greedy", "minlen": 2})
    at.run()                                                     # a second run, nothing changed
    for box in (at.radio(key="dec_strategy"), at.number_input(key="dec_minlen")):
        assert box.proto.set_value, box.key


def test_every_setting_round_trips_through_the_url(numbers):
    info, _ = numbers
    at = open_app(info.name, text=TEXT)
    at.radio(key="dec_strategy").set_value("sample").run()
    at.slider(key="dec_temp").set_value(1.5).run()
    at.number_input(key="dec_topk").set_value(7).run()
    at.slider(key="dec_topp").set_value(0.9).run()
    at.number_input(key="dec_seed").set_value(11).run()
    at.slider(key="dec_samples").set_value(4).run()
    at.number_input(key="dec_minlen").set_value(1).run()
    no_exception(at)
    link = {k: at.query_params[k] for k in at.query_params}
    assert {"dec", "temp", "topk", "topp", "seed", "samples", "minlen"} <= set(link) and "beam" not in link
    again = open_app(info.name, query={k: v for k, v in link.items() if k != "ckpt"})      # a fresh session
    no_exception(again)
    assert again.session_state["decode_cfg"] == at.session_state["decode_cfg"]
    assert again.slider(key="dec_samples").value == 4 and again.number_input(key="dec_seed").value == 11
    assert headline(again) == headline(at)
    assert list(again.dataframe[0].value["translation"]) == list(at.dataframe[0].value["translation"])

    at.radio(key="dec_strategy").set_value("beam").run()
    at.slider(key="dec_beam").set_value(3).run()
    at.slider(key="dec_nbest").set_value(2).run()
    at.selectbox(key="dec_lp").set_value("average").run()
    no_exception(at)
    link = {k: at.query_params[k] for k in at.query_params}
    assert (link["dec"], link["beam"], link["nbest"], link["lp"]) == ("beam", "3", "2", "average")
    assert "temp" not in link and "seed" not in link                                  # sampling's settings left
    again = open_app(info.name, query={k: v for k, v in link.items() if k != "ckpt"})
    assert again.session_state["decode_cfg"] == at.session_state["decode_cfg"]
    assert headline(again) == headline(at) and len(again.dataframe[0].value) == 2


def test_the_attention_page_reopens_with_its_show_quantity_and_ablation(numbers):
    info, ckpt = numbers
    query = {"dec": "greedy", "show": "scores", "ablate": "cross.1.2,encoder.2.1", "view": "Head ablation"}
    at = open_app(info.name, ATTENTION, text=TEXT, query=query)
    no_exception(at)
    assert at.selectbox(key="attn_quantity").value == "scores"
    assert at.multiselect(key="ablate_pick").value == [("cross", 0, 1), ("encoder", 1, 0)]
    greedy = DecodeConfig(strategy="greedy")
    plain = translate(ckpt.model, ckpt.tokenizer, TEXT, greedy)
    ablated = translate(ckpt.model, ckpt.tokenizer, TEXT, greedy, ablate=[("cross", 0, 1), ("encoder", 1, 0)])
    lines = [m.value.replace("\\", "") for m in at.markdown]
    assert f"**Translation** (greedy): {plain.text}" in lines
    assert f"**Without those heads:** {ablated.text}" in lines
    assert at.query_params["show"] == "scores" and at.query_params["ablate"] == "cross.1.2,encoder.2.1"
    at.selectbox(key="attn_quantity").set_value("unscaled").run()
    at.multiselect(key="ablate_pick").unselect(("encoder", 1, 0)).run()
    no_exception(at)
    assert at.query_params["show"] == "unscaled" and at.query_params["ablate"] == "cross.1.2"
    at.multiselect(key="ablate_pick").unselect(("cross", 0, 1)).run()
    assert "ablate" not in at.query_params


@pytest.mark.parametrize("query, expected", [
    ({"dec": "bogus", "beam": "999", "nbest": "-1", "lp": "<script>", "alpha": "nan", "minlen": "1e3"},
     {"strategy": "beam", "beam_size": 16, "n_best": 1}),
    ({"dec": "sample", "temp": "50", "topk": "abc", "topp": "0", "seed": "9" * 5000, "samples": "0",
      "maxlen": "0"}, {"strategy": "sample", "temperature": 2.0, "top_p": 0.05, "max_len_b": 1, "samples": 1}),
    ({"dec": "beam", "beam": "2.5", "alpha": "inf", "samples": "11", "maxlen": "-3"},
     {"strategy": "beam", "max_len_b": 1}),
    ({"dec": "beam", "beam": "9" * 400, "nbest": "9" * 309, "maxlen": "9" * 309},   # past any float: still a number
     {"strategy": "beam", "beam_size": 16, "n_best": 16, "max_len_b": decode_url.MAX_DECODE_LEN}),
])
def test_hostile_decoding_values_are_clamped_or_fall_back_and_the_url_says_so(numbers, query, expected):
    """A number outside its widget's range is the nearest allowed one, anything malformed the default;
    the URL then holds the values decoded with."""
    info, _ = numbers
    at = open_app(info.name, text=TEXT, query=query)
    no_exception(at)
    cfg = dict(at.session_state["decode_cfg"])
    if cfg["strategy"] == "sample":
        cfg["samples"] = at.slider(key="dec_samples").value
    for field in ("beam_size", "n_best", "length_penalty", "alpha", "temperature", "top_k", "top_p", "seed",
                  "min_len", "max_len_b", "strategy", "samples"):
        if field in cfg:
            assert cfg[field] == expected.get(field, decode_url.DEFAULTS.get(field, decode_url.DEFAULT_SAMPLES)), field
    written = decode_url.to_query(at.session_state["decode_cfg"], cfg.get("samples", decode_url.DEFAULT_SAMPLES))
    assert {k: at.query_params.get(k) for k in decode_url.KEYS} == written
    assert headline(at)


def test_hostile_attention_values_fall_back_to_the_defaults(numbers):
    info, _ = numbers
    query = {"show": "<img src=x>", "ablate": "cross.99.1,nonsense,encoder.1,decoder.x.1,cross.1.1.1,,",
             "kind": "x", "layer": "-4", "head": "1e9", "view": "Head ablation"}
    at = open_app(info.name, ATTENTION, text=TEXT, query=query)
    no_exception(at)
    assert at.selectbox(key="attn_quantity").value == "weights"
    assert at.multiselect(key="ablate_pick").value == []
    assert "ablate" not in at.query_params and at.query_params["show"] == "weights"


def test_a_links_100_kb_checkpoint_name_is_not_echoed_whole(numbers):
    at = open_app("A" * 100_000, text=TEXT)
    no_exception(at)
    said = " ".join(str(w.value) for w in at.sidebar.warning)
    assert "named by the link is not here" in said and len(said) < 1_000
    assert at.query_params["ckpt"] != "A" * 100_000


def test_the_translate_page_answers_at_its_own_path_too(numbers):
    """Streamlit gives the default page the path "" only: a second, hidden entry answers /translate."""
    info, _ = numbers
    at = open_app(info.name, text=TEXT)
    pages = {p["url_pathname"]: p["script_path"] for p in at._registered_pages.values()}
    assert pages[""].endswith("webapp/pages/translate.py")                 # the landing page, at /
    assert pages["translate"].endswith("webapp/pages/translate.py")        # and at /translate
    at.switch_page("webapp/pages/translate.py").run()
    no_exception(at)
    assert "Translate" in [t.value for t in at.title]


def test_only_url_keys_reads_or_writes_the_url():
    """One idiom for URL state: every page, view and shared module goes through webapp.url_keys (its
    UrlKeys carry each key's type and range); a tab bar bound by Streamlit keeps its key itself."""
    root = Path(__file__).resolve().parents[2]
    files = [f for f in [root / "app.py", *sorted((root / "webapp").rglob("*.py"))] if f.name != "url_keys.py"]
    assert [str(f.relative_to(root)) for f in files if re.search(r"\bst\.query_params\b", f.read_text())] == []
    bound = [str(f.relative_to(root)) for f in files if 'bind="query-params"' in f.read_text()]
    assert bound == ["webapp/pages/attention.py", "webapp/pages/checkpoints.py"]       # the two tab bars,
    assert url_keys.ATTN_VIEW in url_keys.PAGE_KEYS["attention"]                      # their keys in the table
    assert url_keys.CK_TAB in url_keys.PAGE_KEYS["checkpoints"]


def test_no_page_key_is_a_shared_one_or_declared_twice():
    """A page key that is also a carried one (the decoding settings' lp, beam...) would be overwritten by
    them, and one key declared twice on a page would be two controls fighting over one value."""
    from webapp.lecture import CARRIED

    for page, specs in url_keys.PAGE_KEYS.items():
        keys = [spec.key for spec in specs]
        assert not set(keys) & set(CARRIED), page
        assert len(keys) == len(set(keys)), page
    assert {url_keys.ALIGN_PAIRS, url_keys.ALIGN_GRAD} <= set(url_keys.PAGE_KEYS["alignment"])
    assert {url_keys.SEARCH_EXACT_N, url_keys.SEARCH_EXACT_S} <= set(url_keys.PAGE_KEYS["search"])


def test_the_ablated_heads_leave_the_link_while_their_tab_is_closed(numbers):
    """A tab not open draws no picker: `ablate=` stayed in the address bar on the heads tab."""
    info, _ = numbers
    at = open_app(info.name, ATTENTION, text=TEXT, query={"ablate": "cross.1.2", "view": "Heads"})
    no_exception(at)
    assert "ablate" not in at.query_params
