"""What a page offers to take away, for the AppTests of the export convention (webapp/downloads.py): every
figure drawn through downloads.chart (its camera button saves in the sidebar's format, the checkpoint's
name first in the file name), every CSV and JSON button named after the checkpoint.

AppTest's download-button protos carry no file name (it lives in the media file manager), so
`recorded_downloads` records the file_name of each st.download_button call while the page runs.
"""
from __future__ import annotations

import json


def recorded_downloads(monkeypatch) -> list[dict]:
    """A list that fills with {"label", "file_name", "data"} for every download button the app draws from
    now on (data as given: text, bytes, or the callable that builds it)."""
    import streamlit

    seen: list[dict] = []
    original = streamlit.download_button

    def recording(label, *args, **kwargs):
        data = kwargs.get("data", args[0] if args else None)
        file_name = kwargs.get("file_name", args[1] if len(args) > 1 else None)
        seen.append({"label": label, "file_name": file_name, "data": data})
        return original(label, *args, **kwargs)

    monkeypatch.setattr(streamlit, "download_button", recording)
    return seen


def chart_key(chart) -> str:
    """A plotly chart's widget key, from its element id ("$$ID-<hash>-<key>")."""
    return chart.proto.id.split("-", 2)[-1]


def figure_exports(at) -> dict[str, dict]:
    """Each drawn figure's camera-button settings (plotly's toImageButtonOptions), by chart key; {} for a
    figure drawn without them (not through downloads.chart)."""
    return {chart_key(c): json.loads(c.proto.config or "{}").get("toImageButtonOptions", {})
            for c in at.get("plotly_chart")}


def assert_named_for(at, seen: list[dict], ckpt_name: str, figures: set[str], fmt: str = "svg") -> None:
    """Every figure in `figures` is drawn, and every figure drawn saves as `fmt` under a name that starts
    with the checkpoint's; every download button's file name starts with it too."""
    exports = figure_exports(at)
    assert figures <= set(exports), f"figures missing: {figures - set(exports)}; drawn: {sorted(exports)}"
    for key, options in exports.items():
        assert options.get("format") == fmt, (key, options)
        assert str(options.get("filename", "")).startswith(ckpt_name), (key, options)
    assert seen, "no download button was drawn"
    for button in seen:
        assert str(button["file_name"]).startswith(ckpt_name), button
