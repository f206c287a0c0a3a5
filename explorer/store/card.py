"""card.json's provenance section, "model_card": where a model comes from and what it is for.

card.json holds two kinds of facts about a checkpoint: how well it scores ("test", rewritten by
`python -m explorer evaluate`) and where it comes from ("model_card": its source, licence,
languages, size, the domain it knows; written by whoever made the checkpoint: the importer
`python -m explorer convert from-hf`, the trainer for a fine-tuned checkpoint (`fine_tuned_card`: a
new card saying which checkpoint it derives from, so an imported model's provenance and licence
are not lost one fine-tune later), or by hand for the shipped ones). Only this module names the
"model_card" key; the evaluate command rewrites card.json keeping every section but "test".

card.json is untrusted input (a user's models folder, a hand-edited file): model_card() never
raises, whatever the file holds; a field of the wrong type reads as None and a long string is cut,
so the sidebar can show a card from anywhere without a traceback or a wall of text.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from explorer.config import PAPER_MODELS

MODEL_CARD = "model_card"
MAX_TEXT = 300                    # characters kept of any text field (the sidebar shows it whole)
MAX_LANGUAGES = 20
PAPER_BASE = {k: v for k, v in PAPER_MODELS["base"].items() if k != "stated"}   # what "this model vs the paper" compares


@dataclass(frozen=True)
class ModelCard:
    """A checkpoint's provenance; every field may be None (unknown, or unreadable in the file)."""
    source: str | None = None         # a Hugging Face model id, a local path, or "trained by this project (...)"
    license: str | None = None        # of the weights, e.g. "cc-by-4.0"; None: not stated
    languages: tuple[str, ...] | None = None    # e.g. ("es", "en"): source first
    parameters: int | None = None     # values stored (a tied matrix once)
    domain: str | None = None         # what text it knows, honestly: where it will fail
    data: str | None = None           # what it was trained on, when known
    converted: str | None = None      # ISO time of the import (imported models only)
    tool: str | None = None           # what wrote the card, e.g. "explorer.convert from-hf"
    fine_tuned_from: str | None = None  # the checkpoint it was fine-tuned from (fine-tuned models only)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["languages"] = list(self.languages) if self.languages is not None else None
        return out


def model_card(card: Any) -> ModelCard | None:
    """The "model_card" section of a card.json's contents, or None when there is none (no card,
    a card that is not a JSON object, a section that is not one). Never raises."""
    section = card.get(MODEL_CARD) if isinstance(card, dict) else None
    if not isinstance(section, dict):
        return None
    return ModelCard(source=_text(section.get("source")), license=_text(section.get("license")),
                     languages=_languages(section.get("languages")), parameters=_count(section.get("parameters")),
                     domain=_text(section.get("domain")), data=_text(section.get("data")),
                     converted=_text(section.get("converted")), tool=_text(section.get("tool")),
                     fine_tuned_from=_text(section.get("fine_tuned_from")))


def with_model_card(card: Any, found: ModelCard) -> dict:
    """A copy of card.json's contents with its "model_card" section set to `found` (the rest kept)."""
    return {**(card if isinstance(card, dict) else {}), MODEL_CARD: found.to_dict()}


FINE_TUNE_TOOL = "explorer.train"


def fine_tuned_card(parent_card: Any, parent: str, *, data: str | None, languages: tuple[str, ...] | None,
                    parameters: int | None) -> dict:
    """card.json for a checkpoint fine-tuned from `parent` (its name or path), whose card.json
    contents are `parent_card` (anything: read with model_card, never raising).

    A new card, not the parent's: its numbers (the "test" section) describe the parent only, and
    so does its source. What carries over is what still holds: the licence (fine-tuned weights
    derive from the parent's, so its terms follow them) and the parent's own source, named in
    this card's source. The domain is the parent's, said to be from before fine-tuning; `data`
    (what it was fine-tuned on) is added to what the parent was trained on, when known.
    """
    before = model_card(parent_card) or ModelCard()
    origin = f" (itself: {before.source})" if before.source else ""
    trained = "; ".join(x for x in (before.data, f"fine-tuned on {data}" if data else None) if x) or None
    return with_model_card({}, ModelCard(
        source=f"fine-tuned by this project from {parent}{origin}", license=before.license,
        languages=languages or before.languages, parameters=parameters,
        domain=f"{before.domain} (before fine-tuning)" if before.domain else None, data=trained,
        tool=FINE_TUNE_TOOL, fine_tuned_from=parent))


def summary(found: ModelCard | None) -> str:
    """One line for a caption: source · licence · languages · size · domain ("no model card" if None)."""
    if found is None:
        return "no model card"
    parts = [found.source or "source not stated",
             f"licence {found.license}" if found.license else "licence not stated"]
    if found.languages:
        parts.append(" → ".join(found.languages))
    if found.parameters is not None:
        parts.append(f"{found.parameters / 1e6:.1f}M parameters")
    if found.domain:
        parts.append(found.domain)
    return " · ".join(parts)


def versus_paper(cfg: Any) -> str | None:
    """This model's shape next to the paper's base model, in one line; cfg: a ModelConfig or its
    dict (config.json's "model"). None when the shape is unknown (a damaged config)."""
    get = cfg.get if isinstance(cfg, dict) else (lambda key: getattr(cfg, key, None))
    mine = {k: get(k) for k in PAPER_BASE}
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in mine.values()):
        return None
    shape = (f"d_model {mine['d_model']}, {mine['n_heads']} heads, {mine['n_encoder_layers']}+"
             f"{mine['n_decoder_layers']} layers, d_ff {mine['d_ff']}")
    if mine == PAPER_BASE:
        return f"{shape}: the paper's base model"
    base = PAPER_BASE
    return (f"{shape} (the paper's base: d_model {base['d_model']}, {base['n_heads']} heads, "
            f"{base['n_encoder_layers']}+{base['n_decoder_layers']} layers, d_ff {base['d_ff']})")


def _text(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    value = " ".join(value.split())                       # no newlines or runs of spaces in a caption
    return value if len(value) <= MAX_TEXT else value[:MAX_TEXT - 1] + "…"


def _languages(value: Any) -> tuple[str, ...] | None:
    if not isinstance(value, (list, tuple)) or not value or len(value) > MAX_LANGUAGES:
        return None
    found = tuple(_text(v) for v in value)
    return None if any(v is None or len(v) > 40 for v in found) else found


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value
