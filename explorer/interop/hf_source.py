"""Where a Hugging Face model comes from, and reading its files as untrusted input.

A source is a local directory (config.json + model.safetensors or pytorch_model.bin + the tokenizer
files) or a hub id such as `Helsinki-NLP/opus-mt-es-en`. A hub id is looked up in the local
Hugging Face cache first; only if it is not there is the hub asked, and only after a quick check
that it can be reached: offline, the import fails within seconds and says how to pass a directory
instead. Weights are never unpickled: safetensors, or `torch.load(weights_only=True)` for a .bin.
Every tensor's shape is checked against the config before it is used, so nothing is allocated
that the file does not hold.
"""
from __future__ import annotations

import os
import re
import socket
import threading
from pathlib import Path
from typing import Any, Callable

import torch
from safetensors import SafetensorError, safe_open

from explorer.files import names as n
from explorer.files.user_files import UserFileError, json_of, read_user_file
from explorer.interop.config_fields import brief

HUB_HOST = "huggingface.co"
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
WEIGHT_FILES = n.HF_WEIGHTS
TOKENIZER_FILES = (n.MARIAN_SRC_SPM, n.MARIAN_TGT_SPM, n.MARIAN_VOCAB, n.MARIAN_TGT_VOCAB, n.HF_TOKENIZER_CONFIG,
                   n.MULTILINGUAL_SPM, n.HF_TOKENIZER_JSON)        # the last two: M2M100's and NLLB's
WANTED = (n.HF_CONFIG, n.HF_GENERATION_CONFIG, n.HF_README, *WEIGHT_FILES, *TOKENIZER_FILES)
MAX_JSON_BYTES = 1 << 20          # config.json, tokenizer_config.json, generation_config.json
MAX_README_BYTES = 1 << 20
MAX_LANGUAGE_CODE = 32            # characters of a language code read from tokenizer_config.json ("eng_Latn": 8)
REACH_TIMEOUT_S = 4.0


class SourceError(ValueError):
    """A source that cannot be read, with what to do about it."""


def locate(source: str) -> tuple[Path, str]:
    """(local directory, provenance) of a directory path or a hub id."""
    path = Path(source).expanduser()
    if path.is_dir():
        return path.resolve(), str(path.resolve())
    if path.exists():
        raise SourceError(f"{source} is a file: pass the model's directory (config.json, weights, tokenizer files)")
    if not HUB_ID.match(source):
        raise SourceError(f"{source}: no such directory, and not a hub id of the form owner/name")
    return _from_hub(source), source


def _from_hub(repo_id: str) -> Path:
    try:
        from huggingface_hub import snapshot_download   # here: optional, only a hub id needs it
    except ImportError:
        raise SourceError(f"{repo_id}: downloading needs huggingface_hub (pip install huggingface_hub), "
                          "or pass a local directory") from None
    try:                                                  # already downloaded once: no network needed
        return Path(snapshot_download(repo_id, allow_patterns=list(WANTED), local_files_only=True))
    except Exception:                                     # noqa: BLE001 - not cached (any reason): go online
        pass
    offline_hint = (f"download it on a machine with internet access (e.g. `hf download {repo_id} --local-dir "
                    f"{repo_id.split('/')[-1]}`, or git clone https://{HUB_HOST}/{repo_id}), copy the directory here and pass its path")
    if os.environ.get("HF_HUB_OFFLINE", "").strip() not in ("", "0"):
        raise SourceError(f"{repo_id}: HF_HUB_OFFLINE is set and the model is not in the local cache; {offline_hint}")
    if not _reachable(HUB_HOST, 443, REACH_TIMEOUT_S):
        raise SourceError(f"{repo_id}: cannot reach {HUB_HOST} (offline?); {offline_hint}")
    try:
        return Path(snapshot_download(repo_id, allow_patterns=list(WANTED)))
    except Exception as exc:                              # noqa: BLE001 - the hub's errors, whatever their class
        raise SourceError(f"{repo_id}: download failed ({type(exc).__name__}: {exc}); {offline_hint}") from None


def _reachable(host: str, port: int, timeout: float) -> bool:
    """Whether a TCP connection opens within `timeout` seconds, name lookup included (which
    socket timeouts do not cover, so it runs in a thread that is abandoned if it hangs)."""
    result: list[bool] = []

    def probe() -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                result.append(True)
        except OSError:
            result.append(False)

    worker = threading.Thread(target=probe, daemon=True)
    worker.start()
    worker.join(timeout)
    return bool(result and result[0])


def read_json(path: Path, limit: int = MAX_JSON_BYTES) -> Any:
    """A small JSON file, read as explorer.files.user_files reads a user's file (a regular file of at most
    `limit` bytes, refused before it is read; a FIFO or /dev/zero never blocks or fills memory). Symbolic
    links are followed: a Hugging Face cache snapshot is made of links to its blobs."""
    if not os.path.lexists(path):
        raise SourceError(f"{path}: file missing")
    try:
        return parse_json(read_user_file(path, limit), path)
    except UserFileError as exc:
        raise SourceError(str(exc)) from None


def parse_json(data: bytes, path: Path) -> Any:
    """The JSON value of `data`, the bytes of the file `path`; SourceError naming the file otherwise
    (user_files.json_of's refusals)."""
    try:
        return json_of(data, path)
    except ValueError as err:
        raise SourceError(str(err)) from None


def read_optional_json(path: Path) -> dict:
    """A JSON object file that may be absent (then {})."""
    if not path.is_file():
        return {}
    data = read_json(path)
    if not isinstance(data, dict):
        raise SourceError(f"{path}: expected a JSON object")
    return data


def check_generation_start(directory: Path, decoder_start_id: int) -> None:
    """Refuse a generation_config.json whose decoder_start_token_id differs from the one the import took
    from config.json: transformers' generate starts from generation_config.json's, so the import would
    translate otherwise than its source (only a damaged or hand-edited folder; the two agree as written)."""
    path = directory / n.HF_GENERATION_CONFIG
    value = read_optional_json(path).get("decoder_start_token_id")
    if value is None:
        return
    if type(value) is not int:
        raise SourceError(f"{path}: decoder_start_token_id must be a whole number, not {brief(value)}")
    if value != decoder_start_id:
        raise SourceError(f"{path}: decoder_start_token_id is {value}, config.json's is {decoder_start_id}: "
                          f"transformers' generate would start decoding from {value}, this import from "
                          f"{decoder_start_id} (make the two files agree)")


def tensor_reader(directory: Path) -> tuple[Callable[[str], torch.Tensor | None], Path]:
    """(get(name) -> tensor or None, the weights file) for model.safetensors or pytorch_model.bin."""
    st, binary = directory / WEIGHT_FILES[0], directory / WEIGHT_FILES[1]
    if st.is_file():
        try:
            handle = safe_open(str(st), framework="pt")
            names = set(handle.keys())
        except (SafetensorError, OSError, ValueError) as exc:
            raise SourceError(f"{st}: not a readable safetensors file ({exc})") from None

        def get(name: str) -> torch.Tensor | None:
            return handle.get_tensor(name) if name in names else None
        return get, st
    if binary.is_file():
        try:
            state = torch.load(binary, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError:                                  # the legacy (non-zip) format cannot be mmapped
            state = _load_bin(binary, mmap=False)
        except Exception:                                     # noqa: BLE001 - an untrusted file: any failure
            raise _unreadable_bin(binary) from None
        if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
            raise SourceError(f"{binary}: expected a mapping of names to tensors")
        return state.get, binary
    raise SourceError(f"{directory}: no weights ({' or '.join(WEIGHT_FILES)}); sharded checkpoints are not supported")


def _load_bin(path: Path, mmap: bool) -> Any:
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except Exception:                                         # noqa: BLE001
        raise _unreadable_bin(path) from None


def _unreadable_bin(path: Path) -> SourceError:
    """PyTorch's own message is many lines and advises weights_only=False, which runs the file's code: never."""
    return SourceError(f"{path}: not a readable PyTorch weights file (damaged, or holding more than tensors, "
                       "which cannot be loaded without unpickling code; that is never done here)")


def readme_facts(directory: Path) -> dict[str, str]:
    """The licence and datasets a model card's YAML front matter states (`license: cc-by-4.0`), if any."""
    path = directory / n.HF_README
    try:                                        # facts only: an unreadable card loses none of the import
        text = read_user_file(path, MAX_README_BYTES).decode("utf-8", errors="replace")
    except (UserFileError, OSError):
        return {}
    front = re.match(r"^---\s*\n(.*?)\n---", text, re.S)
    facts: dict[str, str] = {}
    if front:
        for key in ("license", "datasets", "dataset"):
            found = re.search(rf"^{key}:\s*(.+)$", front.group(1), re.M)
            value = found.group(1).strip().strip("'\"") if found else ""
            if not value and key.startswith("dataset"):       # a YAML list on the lines below
                items = re.search(rf"^{key}:\s*\n((?:\s*-\s*.+\n?)+)", front.group(1), re.M)
                value = ", ".join(re.findall(r"-\s*(.+)", items.group(1))) if items else ""
            if value:
                facts["domain" if key.startswith("dataset") else key] = value[:200]
    return facts


def languages(directory: Path, provenance: str) -> tuple[str | None, str | None]:
    """Source and target language: tokenizer_config.json's, else the opus-mt-xx-yy pattern of the name.
    A code is a short label (MAX_LANGUAGE_CODE printable characters, no spaces): the checkpoint's
    config.json and card keep it, and two codes of half a million characters made a config.json its own
    loader refused; a newline or a terminal escape would be printed as such. SourceError otherwise."""
    path = directory / n.HF_TOKENIZER_CONFIG
    tok = read_optional_json(path)
    src, tgt = tok.get("source_lang"), tok.get("target_lang")
    if isinstance(src, str) and isinstance(tgt, str):
        for key, code in (("source_lang", src), ("target_lang", tgt)):
            if not 1 <= len(code) <= MAX_LANGUAGE_CODE or not code.isprintable() or any(c.isspace() for c in code):
                shown = repr(code[:MAX_LANGUAGE_CODE]) + (f" ({len(code):,} characters)" if len(code) > MAX_LANGUAGE_CODE else "")
                raise SourceError(f"{path}: {key} {shown} is not a language code (1 to {MAX_LANGUAGE_CODE} printable "
                                  "characters, no spaces); pass --src-lang and --tgt-lang to name the languages")
        return src, tgt
    found = re.search(r"opus-mt-([a-z]{2,3})-([a-z]{2,3})\b", provenance.lower())
    return (found.group(1), found.group(2)) if found else (None, None)
