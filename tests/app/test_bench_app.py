"""The app benchmark's own parts, without a browser: the reference page it times ours against is a
valid Streamlit script that redraws on a head or step switch, and what counts as an external request."""
from __future__ import annotations

import pytest

from benchmarks import browser as driver
from benchmarks.app import REFERENCE
from support.waiting import STALL_S

AppTest = pytest.importorskip("streamlit.testing.v1").AppTest


def test_reference_page_redraws_on_head_and_step(tmp_path):
    script = tmp_path / "reference.py"
    script.write_text(REFERENCE.format(q=7, k=11, heads=4, steps=9))
    at = AppTest.from_file(str(script), default_timeout=STALL_S).run()
    assert not at.exception

    def figure():
        import json

        chart = at.get("plotly_chart")[0].proto
        return json.loads(chart.spec)

    first = figure()
    assert first["data"][0]["z"]["shape"] == "7, 11"             # q x k, as plotly encodes arrays
    assert "head 1 · step 1" in first["layout"]["title"]["text"]
    at.radio(key="head").set_value(3).run()
    at.slider(key="step").set_value(5).run()
    after = figure()
    assert "head 3 · step 5" in after["layout"]["title"]["text"]
    assert after["data"][0]["z"]["bdata"] != first["data"][0]["z"]["bdata"]
    assert any("ranked at step 5" in s.value for s in at.subheader)


@pytest.mark.parametrize("url, external", [
    ("http://127.0.0.1:8501/_stcore/health", False), ("ws://localhost:1234/x", False),
    ("data:image/png;base64,AAAA", False), ("about:srcdoc", False), ("blob:http://127.0.0.1/abc", False),
    ("https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.6/require.min.js", True),
    ("http://127.0.0.2.example.com/", True), ("https://fonts.googleapis.com/css", True)])
def test_external_requests_are_recognised(url, external):
    assert driver.is_external(url) is external
