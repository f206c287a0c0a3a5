"""Turn one verse of SWORD OSIS markup into plain text.

pysword's own `clean=True` is wrong for our two Bibles: it glues words where a footnote was
("God<note>…</note>created" -> "Godcreated"), drops the canonical psalm superscriptions, keeps the
Song of Songs speaker labels and keeps the 26 KB glossary WEB stuffs into Rev 22:21. This module
applies the measured recipe instead (the facts: docs/DATA.md), in this order:

1. cut from the glossary `<div type="glossary">` to the end;
2. (es) space at `</w><transChange` and `</transChange><w`, unless the added word is an enclitic
   pronoun glued to a verb ("sáca</w><transChange>lo" is "sácalo", not "sáca lo");
3. `<note>…</note>` -> space;
4. `<speaker>` and non-canonical `<title>` elements, with their content -> space;
5. structural tags (div, chapter, l, lg, lb, list, item, milestone) -> space;
6. every other tag stripped, text kept (so canonical psalm titles stay);
7. whitespace collapsed, no space before `, . ; : ! ? ) ” ’` nor after `( “ ¿ ¡`;
8. (es, last verse of a book) the epistle colophon after the final "Amén." is cut;
9. (es, verse 1) the drop-cap word is title-cased ("EN el principio" -> "En el principio"), or
   lower-cased after another word when it is an ordinary word ("Y HABLÓ" -> "Y habló").

Everything is a pure function of the raw string, so tests run on markup copied from the modules.
"""
from __future__ import annotations

import html
import re

_GLOSSARY = re.compile(r'<div\b[^>]*\btype="glossary".*', re.S)
_NOTE = re.compile(r"<note\b[^>]*/>|<note\b[^>]*>.*?</note>", re.S)
_SPEAKER = re.compile(r"<speaker\b[^>]*>.*?</speaker>", re.S)
_TITLE_NONCANON = re.compile(r'<title\b(?![^>]*canonical="true")[^>]*>.*?</title>', re.S)
_STRUCTURAL = re.compile(r"</?(?:div|chapter|l|lg|lb|list|item|milestone)\b[^>]*>")
_ANY_TAG = re.compile(r"<[^>]*>")
_SPACE = re.compile(r"\s+")
_NO_SPACE_BEFORE = re.compile(r" +([,.;:!?)”’])")
_NO_SPACE_AFTER = re.compile(r"([(“¿¡]) +")

# transChange joins: group 1 = the word before (end of a <w>), group 2 = the added text.
_JOIN_LEFT = re.compile(r'(\w*)</w>(<transChange\b[^>]*>)([^<]*)')
_JOIN_RIGHT = re.compile(r"</transChange><w\b")
_CLITIC = re.compile(r"(?:me|te|se|nos|os|lo|la|los|las|le|les)+")
# Word shapes that take enclitics: infinitives, imperatives in -d, a few short imperatives, and
# any form whose written accent is not in its last syllable (only possible with a clitic attached
# or in a proparoxytone such as "cuánto", which the stop list excludes).
_INFINITIVE = re.compile(r"\w+(?:ar|er|ir|ír)", re.I)
_IMPERATIVE_D = re.compile(r"\w+[aei]d", re.I)
_SHORT_IMPERATIVES = {"di", "dí", "da", "dá", "haz", "ve", "pon", "ten", "ven", "sal", "oid", "oíd"}
_NOT_VERBS = {"david", "ciudad", "verdad", "maldad", "heredad", "soledad", "piedad", "bondad",
              "merced", "pared", "cuánto", "cuánta", "cuántos", "cuántas", "cómo", "dónde",
              "cuándo", "mujer", "lugar", "altar", "mar", "hogar", "menester"}
_ACCENT_NOT_LAST = re.compile(r"[áéíóú].*[aeiouáéíóú]", re.I)

_AMEN_COLOPHON = re.compile(r"(Amén\.)\s+\S.*$", re.S)
_FIRST_CAPS_WORD = re.compile(r"\b(\w{2,})\b")


def is_enclitic_join(word: str, added: str) -> bool:
    """True if `added` (a transChange text) is a pronoun glued onto the verb `word`."""
    if not _CLITIC.fullmatch(added):
        return False
    w = word.lower()
    if not w or w in _NOT_VERBS:
        return False
    return (w in _SHORT_IMPERATIVES or bool(_INFINITIVE.fullmatch(w))
            or bool(_IMPERATIVE_D.fullmatch(w)) or bool(_ACCENT_NOT_LAST.search(w)))


def _space_trans_changes(raw: str) -> str:
    def left(m: re.Match) -> str:
        word, tag, added = m.group(1), m.group(2), m.group(3)
        glue = "" if is_enclitic_join(word, added) else " "
        return f"{word}</w>{glue}{tag}{added}"

    raw = _JOIN_LEFT.sub(left, raw)
    return _JOIN_RIGHT.sub("</transChange> <w", raw)


def fix_drop_cap(text: str, is_common=None) -> str:
    """Undo the printed drop cap: the first ALL-CAPS word of a chapter's first verse.

    At a sentence start it is title-cased ("EN el principio" -> "En el principio"). After another
    word ("Y HABLÓ Jehová") it is lower-cased when `is_common(lower_word)` says the word is an
    ordinary word ("Y habló Jehová") and title-cased otherwise, which keeps names ("Y Jehová").
    bible.py builds `is_common` from word counts over the whole Spanish text.
    """
    for m in _FIRST_CAPS_WORD.finditer(text):
        word = m.group(1)
        if word.isupper():
            before = text[: m.start(1)].rstrip(" ¡¿(“")
            mid_sentence = bool(before) and before[-1] not in ".!?:;"
            if mid_sentence and is_common is not None and is_common(word.lower()):
                fixed = word.lower()
            else:
                fixed = word[0] + word[1:].lower()
            return text[: m.start(1)] + fixed + text[m.end(1):]
    return text


def clean_verse(raw: str, lang: str, first_of_chapter: bool = False,
                last_of_book: bool = False, is_common=None) -> str:
    """Plain text of one verse slot. `lang` is "es" (RV1909 fixes apply) or anything else.

    `is_common` (word -> bool) refines step 9, see `fix_drop_cap`.
    """
    spanish = lang == "es"
    text = _GLOSSARY.sub("", raw)                                   # 1
    if spanish:
        text = _space_trans_changes(text)                           # 2
    text = _NOTE.sub(" ", text)                                     # 3
    text = _SPEAKER.sub(" ", text)                                  # 4
    text = _TITLE_NONCANON.sub(" ", text)
    text = _STRUCTURAL.sub(" ", text)                               # 5
    text = html.unescape(_ANY_TAG.sub("", text))                    # 6
    text = _SPACE.sub(" ", text).strip()                            # 7
    text = _NO_SPACE_BEFORE.sub(r"\1", text)
    text = _NO_SPACE_AFTER.sub(r"\1", text)
    if spanish and last_of_book:
        text = _AMEN_COLOPHON.sub(r"\1", text)                      # 8
    if spanish and first_of_chapter:
        text = fix_drop_cap(text, is_common)                        # 9
    return text
