"""A study's result file read back (atomic.read_json_object, Study.read) takes bounded memory: json.loads
takes up to ~80 bytes per value, so a file of `{},{},...` within the byte bound alone took 27 times its size
(100 MB: 2.7 GB), and a MemoryError under a memory cap escaped as a traceback. Now a file of more values than
limits.RESULT_VALUES is not read, and a MemoryError is a file that cannot be read: None, computed again."""
from __future__ import annotations

import json

import pytest

from explorer.files import limits
from explorer.files.atomic import ResultTooLarge, read_json_object, write_json_atomic
from explorer.studies.common.result import Study

STUDY = Study("s", lambda: {}, ("settings", "graphs"), lambda r: "")


def _empty_objects(path, n: int) -> None:
    path.write_text('{"settings": {}, "graphs": [' + "{}," * (n - 1) + "{}]}")


def test_a_file_of_more_values_than_the_bound_is_not_read(tmp_path):
    path = tmp_path / "result.json"
    _empty_objects(path, limits.RESULT_VALUES // 2 + 10)                # about 9 MB, far below the byte bound
    assert path.stat().st_size < limits.RESULT_BYTES
    assert read_json_object(path, ("settings", "graphs")) is None
    assert STUDY.read(path) is None


def test_a_file_within_the_bounds_is_read_whole(tmp_path):
    path = tmp_path / "result.json"
    link = {"source": "a", "target": "b", "weight": 0.5}
    result = {"settings": {"thresholds": [0.5]}, "graphs": [{"links": [link] * 1000}]}
    write_json_atomic(path, result)
    assert STUDY.read(path) == result
    _empty_objects(path, limits.RESULT_VALUES // 4)
    assert len(STUDY.read(path)["graphs"]) == limits.RESULT_VALUES // 4


def test_a_memory_error_while_parsing_is_a_file_that_cannot_be_read(tmp_path, monkeypatch):
    path = tmp_path / "result.json"
    write_json_atomic(path, {"settings": {}, "graphs": []})

    def out_of_memory(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(json, "loads", out_of_memory)
    assert read_json_object(path, ("settings", "graphs")) is None
    assert STUDY.read(path) is None


def test_a_result_the_read_would_refuse_is_not_written_and_says_why(tmp_path, monkeypatch):
    """Written, a result over the read's bounds was read back as missing: the app drew the same graph again
    each time it was asked for. Study.to_file now refuses it with the numbers, and writes nothing."""
    path = tmp_path / "result.json"
    big = Study("s", lambda n, context: {"settings": {}, "graphs": [{}] * n}, ("settings", "graphs"), lambda r: "")
    monkeypatch.setattr(limits, "RESULT_VALUES", 1_000)
    with pytest.raises(ResultTooLarge, match=r"2,0\d\d JSON values .* \(1,000 values, 128 MiB\); it was not written"):
        big.to_file(path, 1_000)
    assert list(tmp_path.iterdir()) == []
    big.to_file(path, 490)                 # a `{` and a `,` each: 980 + the lists and keys, within 1,000
    assert len(STUDY.read(path)["graphs"]) == 490
    monkeypatch.setattr(limits, "RESULT_VALUES", 6_000_000)
    monkeypatch.setattr(limits, "RESULT_BYTES", 4_000)
    with pytest.raises(ResultTooLarge, match="more than a result may hold"):
        big.to_file(path, 2_000)                              # 2,000 lines of "  {}," : over 4,000 bytes
    assert len(STUDY.read(path)["graphs"]) == 490              # the last whole result is kept
