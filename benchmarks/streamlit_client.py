"""A Streamlit client without a browser: one session over `/_stcore/stream`, speaking the protobuf
messages the Streamlit frontend speaks (streamlit.proto: BackMsg up, ForwardMsg down).

Used by the load benchmark (benchmarks/load.py) to drive many sessions of `streamlit run app.py`
from one process. It sends what the frontend sends for each user action (checked against the
frames Chromium sends, recorded with Playwright): a page load is a `rerun_script` with the URL's
query string; a widget change a `rerun_script` with that widget's new value, the current query
string, the page and, for a widget drawn inside an `st.fragment`, the fragment's id; a click on a
page in the sidebar a `rerun_script` naming the page's script hash. It keeps Streamlit's message
cache as the frontend does (large messages come back as `ref_hash` references once the client has
announced it holds them).

It does not render anything: "visible" here means "the element arrived over the websocket". Only
the widgets changed are sent (the frontend sends every widget's value); the server keeps the
others' values between runs, so the script sees the same state.
"""
from __future__ import annotations

import html
import json
import re
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Callable

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState

FINISHED = {ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY}
ALERT_ERROR = 1                                  # streamlit.proto.Alert.Format.ERROR
ALERT_INFO = 3                                   # streamlit.proto.Alert.Format.INFO
ASSET = re.compile(r'(?:src|href)="\./(static/[^"]+)"')


class ClientError(Exception):
    """The session broke: the websocket closed, or nothing came within the timeout."""


@dataclass
class Node:
    """What the client holds at one delta path: an element or a block, and the fragment it was drawn in."""
    kind: str                     # "element" or "block"
    type: str                     # the element's oneof (markdown, plotly_chart, ...) or the block's
    proto: Any
    fragment_id: str


@dataclass
class RunResult:
    """One user action: from sending it to the first message `wanted` accepted (visible) and to the
    end of the script run it started (settled); what `wanted` returned; errors the run showed."""
    visible: float | None = None
    settled: float | None = None
    found: Any = None
    errors: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)   # info messages drawn during the run, in order
    messages: int = 0
    bytes: int = 0


def widget_key(widget_id: str) -> str:
    """The user key of a widget id ("$$ID-<hash>-<key>"); "" for an unkeyed widget."""
    parts = widget_id.split("-", 2)
    return parts[2] if len(parts) == 3 and widget_id.startswith("$$ID") else ""


class Session:
    """One browser tab's worth of Streamlit session, for one thread."""

    def __init__(self, url: str, timeout: float = 120.0):
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.nodes: dict[tuple[int, ...], Node] = {}
        self.pages: dict[str, str] = {}                    # url_pathname -> page_script_hash
        self.page_hash = ""
        self.query = ""
        self.path = "/"
        self.cache: dict[str, ForwardMsg] = {}               # the frontend's message cache
        self.media_pending: list[str] = []                   # download buttons' files not fetched yet
        self.media_seen: set[str] = set()
        self.http_requests = self.http_bytes = 0
        self.ws = None

    # ---- connection --------------------------------------------------------------------------------
    def get(self, path: str) -> bytes:
        """GET a path of the server (as a browser does: gzip accepted)."""
        request = urllib.request.Request(f"{self.url}/{path.lstrip('/')}", headers={"Accept-Encoding": "gzip"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as reply:
                body = reply.read()
        except OSError as err:
            raise ClientError(f"GET /{path.lstrip('/')}: {err}") from err
        self.http_requests, self.http_bytes = self.http_requests + 1, self.http_bytes + len(body)
        return body

    def fetch_assets(self, paths: list[str] | None = None) -> None:
        """What a browser's first visit fetches over HTTP besides the websocket, with an empty cache:
        `paths` (e.g. recorded from a real browser: the page, its scripts, the chunks loaded for the
        elements it draws, fonts), else the page, the scripts and styles it names, and the health and
        host-config endpoints."""
        if paths is not None:
            for path in paths:
                self.get(path)
            return
        page = self.get("").decode("utf-8", "replace")
        for asset in dict.fromkeys(ASSET.findall(page)):
            self.get(asset)
        self.get("_stcore/health")
        self.get("_stcore/host-config")

    def fetch_media(self) -> None:
        """The media files the page's download buttons point at (the frontend fetches them when it
        draws the buttons)."""
        while self.media_pending:
            self.get(self.media_pending.pop(0))

    def connect(self) -> None:
        from websockets.sync.client import connect

        ws_url = "ws" + self.url[len("http"):] + "/_stcore/stream"
        self.ws = connect(ws_url, subprotocols=["streamlit"], max_size=None, open_timeout=self.timeout,
                          compression=None)

    def close(self) -> None:
        if self.ws is not None:
            try:
                self.ws.close()
            except Exception:  # noqa: BLE001 - closing a broken socket
                pass
            self.ws = None

    # ---- actions (each returns when the script run it started is over) -------------------------------
    def open(self, path: str = "/", query: str = "", wanted=None) -> RunResult:
        """Load a page: what the frontend sends once its websocket is up."""
        self.path, self.query = path, query
        msg = self._rerun(query_string=query)
        return self.run(msg, wanted)

    def set_widget(self, key: str, wanted=None, **value) -> RunResult:
        """Change the widget with user key `key` (value: string_value=..., double_array_value=[...], ...)."""
        widget = self.widget(key)
        if widget is None:
            raise ClientError(f"no widget with key {key!r} on the page")
        state = WidgetState(id=widget.proto.id)
        for name, v in value.items():
            if name.endswith("array_value"):
                getattr(state, name).data.extend(v)
            else:
                setattr(state, name, v)
        msg = self._rerun(query_string=self.query, widgets=[state], fragment_id=widget.fragment_id)
        return self.run(msg, wanted)

    def navigate(self, url_pathname: str, wanted=None) -> RunResult:
        """Click a page in the sidebar's navigation: the frontend names the page and drops the query string."""
        if url_pathname not in self.pages:
            raise ClientError(f"no page {url_pathname!r} in the navigation")
        self.path, self.query = "/" + url_pathname, ""
        msg = self._rerun(query_string="", page_script_hash=self.pages[url_pathname])
        return self.run(msg, wanted)

    def _rerun(self, query_string: str, widgets=(), page_script_hash: str | None = None,
               fragment_id: str = "") -> BackMsg:
        msg = BackMsg()
        rerun = msg.rerun_script
        rerun.query_string = query_string
        rerun.widget_states.widgets.extend(widgets)
        rerun.page_script_hash = self.page_hash if page_script_hash is None else page_script_hash
        if fragment_id:
            rerun.fragment_id = fragment_id
        rerun.cached_message_hashes.extend(self.cache)
        info = rerun.context_info
        info.timezone, info.timezone_offset, info.locale = "UTC", 0, "en-US"
        info.url, info.color_scheme = self.url + self.path, "light"
        return msg

    def run(self, msg: BackMsg, wanted: Callable[["Session", ForwardMsg], Any] | None = None) -> RunResult:
        """Send `msg`; read until its script run ends. wanted(session, forward_msg) -> a value, not None,
        when the message shows what the user waits for (checked after the message is applied)."""
        if self.ws is None:
            self.connect()
        if not msg.rerun_script.fragment_id:
            self.nodes.clear()           # a whole run re-sends the page; the frontend drops what it does not
        result = RunResult()
        start = time.perf_counter()
        try:
            self.ws.send(msg.SerializeToString())
        except Exception as err:  # noqa: BLE001 - any socket failure is the session breaking
            raise ClientError(f"send failed: {type(err).__name__}: {err}") from err
        deadline = start + self.timeout
        while True:
            left = deadline - time.perf_counter()
            if left <= 0:
                raise ClientError(f"no end of the script run within {self.timeout:.0f} s")
            try:
                raw = self.ws.recv(timeout=left)
            except TimeoutError:
                continue
            except Exception as err:  # noqa: BLE001
                raise ClientError(f"websocket: {type(err).__name__}: {err}") from err
            result.messages += 1
            result.bytes += len(raw)
            fwd = ForwardMsg()
            fwd.ParseFromString(raw)
            fwd = self._resolve(fwd)
            kind = fwd.WhichOneof("type")
            self._apply(fwd, kind, result)
            if wanted is not None and result.visible is None and kind == "delta":
                found = wanted(self, fwd)
                if found is not None:
                    result.visible, result.found = time.perf_counter() - start, found
            if kind == "script_finished":
                if fwd.script_finished in FINISHED:
                    result.settled = time.perf_counter() - start
                    return result
                if fwd.script_finished == ForwardMsg.FINISHED_WITH_COMPILE_ERROR:
                    result.errors.append("script finished with a compile error")
                    result.settled = time.perf_counter() - start
                    return result
                # FINISHED_EARLY_FOR_RERUN: another run follows; keep reading

    def _resolve(self, fwd: ForwardMsg) -> ForwardMsg:
        if fwd.WhichOneof("type") == "ref_hash":
            cached = self.cache.get(fwd.ref_hash)
            if cached is None:
                raise ClientError(f"the server referred to a message this client does not hold ({fwd.ref_hash})")
            full = ForwardMsg()
            full.CopyFrom(cached)
            full.metadata.CopyFrom(fwd.metadata)
            return full
        if fwd.metadata.cacheable and fwd.hash:
            self.cache[fwd.hash] = fwd
        return fwd

    def _apply(self, fwd: ForwardMsg, kind: str, result: RunResult) -> None:
        if kind == "delta":
            delta = fwd.delta
            path = tuple(fwd.metadata.delta_path)
            which = delta.WhichOneof("type")
            if which == "new_element":
                etype = delta.new_element.WhichOneof("type")
                proto = getattr(delta.new_element, etype) if etype else None
                self.nodes[path] = Node("element", etype or "", proto, delta.fragment_id)
                if etype == "exception":
                    result.errors.append(f"exception on the page: {proto.type}: {proto.message[:200]}")
                elif etype == "alert" and proto.format == ALERT_ERROR:
                    result.errors.append(f"error message on the page: {proto.body[:200]}")
                elif etype == "alert" and proto.format == ALERT_INFO:
                    result.notices.append(proto.body)
                elif etype == "download_button" and proto.url and proto.url not in self.media_seen:
                    self.media_seen.add(proto.url)
                    self.media_pending.append(proto.url)
            elif which == "add_block":
                block = delta.add_block
                self.nodes[path] = Node("block", block.WhichOneof("type") or "", block, delta.fragment_id)
        elif kind == "page_info_changed":
            self.query = fwd.page_info_changed.query_string
        elif kind == "navigation":
            self.pages = {p.url_pathname: p.page_script_hash for p in fwd.navigation.app_pages}
            self.page_hash = fwd.navigation.page_script_hash
        elif kind == "new_session":
            self.page_hash = fwd.new_session.page_script_hash or self.page_hash
        elif kind == "session_event" and fwd.session_event.HasField("script_compilation_exception"):
            result.errors.append("script compilation exception")

    # ---- reading the page ----------------------------------------------------------------------------
    def widget(self, key: str) -> Node | None:
        """The element drawn last with user key `key` (exact, or a prefix ending in "*")."""
        found = None
        for node in self.nodes.values():
            wid = getattr(node.proto, "id", "") if node.kind == "element" and node.proto is not None else ""
            k = widget_key(wid) if wid else ""
            if k and (k == key or key.endswith("*") and k.startswith(key[:-1])):
                found = node
        return found

    def block_path(self, key: str) -> tuple[int, ...] | None:
        """The delta path of the block (st.container(key=...)) with user key `key`."""
        for path, node in self.nodes.items():
            if node.kind == "block" and widget_key(getattr(node.proto, "id", "")) == key:
                return path
        return None


# ---- what a user looks at, as comparable text (the browser benchmark reads the same from the DOM) ----
_MD_ESCAPED = re.compile(r"\\(.)")
_MD_STRONG = re.compile(r"(?<!\\)(\*\*|__)")
_TAGS = re.compile(r"<[^>]+>")


def plain(text: str) -> str:
    """Text as a reader sees it: heading marks, bold marks and markdown escapes off, HTML entities
    resolved, whitespace collapsed."""
    text = re.sub(r"^#+\s*", "", text.strip())
    text = _MD_ESCAPED.sub(r"\1", _MD_STRONG.sub("", text))
    return " ".join(html.unescape(text).split())


def plain_title(text: str) -> str:
    """A plotly title as shown: its HTML tags (<b>) off."""
    return plain(_TAGS.sub("", str(text)))


def plotly_fingerprint(spec: dict) -> tuple:
    """A heatmap as a user reads it: title, axis labels, and the sum of its squared cells (3 decimals)."""
    import numpy as np

    layout = spec.get("layout", {})
    title = layout.get("title", {})
    title = title.get("text", "") if isinstance(title, dict) else str(title)
    ticks = tuple(tuple(plain(str(t)) for t in layout.get(axis, {}).get("ticktext", []) or [])
                  for axis in ("xaxis", "yaxis"))
    total = 0.0
    for trace in spec.get("data", []):
        z = trace.get("z")
        if isinstance(z, dict) and "bdata" in z:              # plotly's typed-array encoding
            import base64
            z = np.frombuffer(base64.b64decode(z["bdata"]), dtype=np.dtype(z.get("dtype", "f8")))
        if z is not None:
            total += float(np.nansum(np.asarray(z, dtype=float) ** 2))
    return (plain_title(title),) + ticks + (round(total, 3),)


def plotly_spec(node: Node) -> dict:
    return json.loads(node.proto.spec) if node.proto.spec else {}
