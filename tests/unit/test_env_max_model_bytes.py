"""$EXPLORER_MAX_MODEL_BYTES: a value that is not a whole number of bytes is said once on stderr with the
bound used instead (it used to fall back to 2 GiB silently); sizes print in a unit that shows them."""
from __future__ import annotations

import pytest

from explorer.files import settings
from explorer.files.settings import MAX_MODEL_BYTES, MAX_MODEL_BYTES_ENV, max_model_bytes, size_text


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setattr(settings, "_warned_bounds", set())


@pytest.mark.parametrize("bad", ["abc", "0", "-1", "1e3", "nan", "1" + "0" * 30, "\u00b2", "2.5"])
def test_a_value_that_is_no_bound_is_warned_once_naming_it_and_the_bound_used(monkeypatch, capsys, bad):
    monkeypatch.setenv(MAX_MODEL_BYTES_ENV, bad)
    assert max_model_bytes() == MAX_MODEL_BYTES and max_model_bytes() == MAX_MODEL_BYTES
    err = capsys.readouterr().err
    assert err.splitlines() == [f"warning: EXPLORER_MAX_MODEL_BYTES={bad} is not a whole number of bytes (1 or more, "
                                "at most 18 digits); using 2.00 GiB (MAX_MODEL_BYTES in explorer/files/settings.py)"]


def test_a_whole_number_even_a_tiny_one_is_the_bound_without_a_word(monkeypatch, capsys):
    for text, bound in (("100", 100), (" 4096 ", 4096), ("", MAX_MODEL_BYTES)):
        monkeypatch.setenv(MAX_MODEL_BYTES_ENV, text)
        assert max_model_bytes() == bound
    monkeypatch.delenv(MAX_MODEL_BYTES_ENV)
    assert max_model_bytes() == MAX_MODEL_BYTES and capsys.readouterr().err == ""


def test_a_long_or_unprintable_value_is_shown_cut_and_quoted(monkeypatch, capsys):
    monkeypatch.setenv(MAX_MODEL_BYTES_ENV, "9" * 5000)
    assert max_model_bytes() == MAX_MODEL_BYTES
    assert f"EXPLORER_MAX_MODEL_BYTES='{'9' * 40}'... is not" in capsys.readouterr().err


def test_sizes_print_in_a_unit_that_shows_them():
    assert [size_text(n) for n in (100, 1023, 1024, 8_600_000, MAX_MODEL_BYTES, 3 << 40)] == \
        ["100 bytes", "1,023 bytes", "1.0 KiB", "8.2 MiB", "2.00 GiB", "3,072.00 GiB"]


def test_the_refusal_prints_both_sizes_in_a_unit_that_shows_them(monkeypatch):
    """A tiny bound (100 bytes) read "would take 0.00 GiB ... more than the 0.00 GiB"."""
    from explorer.store.errors import CheckpointError
    from explorer.store.weights import check_memory
    monkeypatch.setenv(MAX_MODEL_BYTES_ENV, "100")
    with pytest.raises(CheckpointError, match=r"would take 8\.2 MiB of memory, more than the 100 bytes one model"):
        check_memory("m", 8_600_000)
