"""`json_rows`: a task's plain local JSON Lines read without `datasets` give exactly the rows `datasets` gives (checked
against datasets itself), and every shape whose rows Arrow would change falls back to datasets."""

from __future__ import annotations

import json
import random

import pytest

from nlpkit.evaluation.harness.json_rows import JsonRows, plain_json_splits, read_rows

datasets = pytest.importorskip("datasets")


def _write(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _datasets_rows(path):
    datasets.utils.logging.disable_progress_bar()
    return list(datasets.load_dataset("json", data_files={"test": str(path)})["test"])


def _random_rows(seed: int, n: int = 60) -> list[dict]:
    rnd = random.Random(seed)
    words = ["ab", "ünï", "日本", "x\ty", "\u2028", "q\"uote", "back\\slash", "", " lead", "1999", "12:00", "NaN"]

    def text():
        return " ".join(rnd.choice(words) for _ in range(rnd.randint(0, 4)))

    def number():
        return rnd.choice([rnd.uniform(-1e6, 1e6), rnd.random() * 10 ** rnd.randint(-300, 300), 0.1, -0.0, 5e-324])

    return [{"question": text(), "choices": [text() for _ in range(4)], "answer": rnd.randrange(4),
             "score": number(), "ok": rnd.random() < 0.5, "big": rnd.choice([-(1 << 63), (1 << 63) - 1, 7]),
             "meta": {"id": text(), "nums": [rnd.randint(-5, 5) for _ in range(3)], "grid": [[1.5], [number()]]}}
            for _ in range(n)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_plain_rows_equal_what_datasets_reads(tmp_path, seed):
    rows = _random_rows(seed)
    path = _write(tmp_path / "data.jsonl", rows)
    ours = read_rows(path)
    assert ours is not None
    theirs = _datasets_rows(path)
    assert ours == theirs
    assert json.dumps(ours) == json.dumps(theirs)  # key order and float bits too
    assert [list(r) for r in ours] == [list(r) for r in theirs]


def test_splits_follow_the_data_files_mapping(tmp_path):
    dev = _write(tmp_path / "dev.jsonl", [{"a": "x", "b": 1}])
    test = _write(tmp_path / "test.json", [{"a": "y", "b": 2}, {"a": "z", "b": 3}])
    kwargs = {"data_files": {"test": str(test), "dev": [str(dev)]}}
    ours = plain_json_splits("json", None, kwargs)
    theirs = datasets.load_dataset("json", **kwargs)
    assert list(ours) == list(theirs)
    for split in theirs:
        assert list(ours[split]) == list(theirs[split]) and len(ours[split]) == len(theirs[split])
    single = plain_json_splits("json", None, {"data_files": str(test)})
    assert list(single) == ["train"] and list(single["train"]) == list(datasets.load_dataset("json", data_files=str(
        test))["train"])


def test_each_access_is_a_fresh_copy_as_a_dataset_row_is(tmp_path):
    rows = JsonRows([{"a": [1, 2], "b": {"c": "x"}}])
    first = rows[0]
    first["a"].append(3)
    first["b"]["c"] = "changed"
    assert rows[0] == {"a": [1, 2], "b": {"c": "x"}} and list(rows)[0] == rows[0]
    with pytest.raises(TypeError):
        rows[0:1]


@pytest.mark.parametrize("lines", [
    ['{"a": 1}', '{"a": 2.5}'],                     # ints and floats: Arrow makes both floats
    ['{"a": "x"}', '{"b": "y"}'],                   # different keys: missing ones become None
    ['{"a": "x", "b": 1}', '{"b": 1, "a": "x"}'],   # another key order
    ['{"a": null}'],                                # null
    ['{"a": "2020-01-01 10:00"}'],                  # an ISO-8601 string: a timestamp
    ['{"a": {"t": "2021-02-03T11:00:00"}}'],        # ... nested too
    ['{"a": [1, 2.5]}'],                            # a list of mixed numbers
    ['{"a": []}'],                                  # an empty list
    ['{"a": {}}'],                                  # an empty object
    ['{"a": [{"b": 1}]}'],                          # a list of objects
    ['{"a": {"b": 1}}', '{"a": {"b": "x"}}'],       # mixed struct types: datasets stores JSON strings
    ['{"a": true}', '{"a": 1}'],                    # bool and int
    ['{"a": 9223372036854775808}'],                 # beyond int64
    ['{"a": NaN}'],                                 # NaN / Infinity literals
    ['{"a": 1e400}'],                               # an infinite float
    ['{"a": 1, "a": 2}'],                           # a duplicate key
    ['{"a": "\\ud800"}'],                           # a lone surrogate
    ['{"a": 1}', '', '{"a": 2}'],                   # a blank line
    ['[{"a": 1}]'],                                 # a JSON array
    ['"text"'],                                     # not an object
    ['{"a": 1} {"a": 2}'],                          # two objects on a line
])
def test_shapes_arrow_would_change_fall_back_to_datasets(tmp_path, lines):
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert read_rows(path) is None
    assert plain_json_splits("json", None, {"data_files": {"test": str(path)}}) is None


def test_a_bom_or_invalid_utf8_falls_back(tmp_path):
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + b'{"a": 1}\n')
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"a": "\xff"}\n')
    assert read_rows(bom) is None and read_rows(bad) is None


def test_anything_but_plain_local_json_files_goes_to_datasets(tmp_path):
    f = str(_write(tmp_path / "d.jsonl", [{"a": "x"}]))
    gz = tmp_path / "d.jsonl.gz"
    gz.write_bytes(b"")
    hidden = tmp_path / ".hidden"
    hidden.mkdir()
    h = str(_write(hidden / "d.jsonl", [{"a": "x"}]))
    assert plain_json_splits("json", None, {"data_files": {"test": f}}) is not None
    for path, name, kwargs in [
        ("csv", None, {"data_files": {"test": f}}),                        # another builder
        ("json", "cfg", {"data_files": {"test": f}}),                      # a config name
        ("json", None, {"data_files": {"test": f}, "field": "data"}),      # other kwargs
        ("json", None, None),
        ("json", None, {"data_files": {"test": [f, f]}}),                  # several files a split
        ("json", None, {"data_files": {"test": str(tmp_path / "*.jsonl")}}),  # a glob
        ("json", None, {"data_files": {"test": str(gz)}}),                 # compressed
        ("json", None, {"data_files": {"test": str(tmp_path / "none.jsonl")}}),  # missing: datasets' error
        ("json", None, {"data_files": {"test": h}}),                       # a hidden folder
        ("json", None, {"data_files": {"bad split!": f}}),                 # a split name datasets refuses
        ("json", None, {"data_files": {"test": "hf://datasets/x/d.jsonl"}}),
    ]:
        assert plain_json_splits(path, name, kwargs) is None, (path, name, kwargs)
