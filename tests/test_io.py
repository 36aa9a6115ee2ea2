"""Shared input reading and record writing (nlpkit/io.py)."""

import io
import json

import pytest

from nlpkit.errors import NlpkitError
from nlpkit.io import RecordWriter, format_value, iter_lines, read_text
from nlpkit.signature import make_signature


def test_iter_lines_strips_newlines_and_bom(tmp_path):
    p = tmp_path / "a.txt"
    p.write_bytes(b"\xef\xbb\xbfone\r\ntwo\nthree")
    assert list(iter_lines(str(p))) == ["one", "two", "three"]


def test_iter_lines_keepends_keeps_newlines(tmp_path):
    p = tmp_path / "a.txt"
    p.write_bytes(b"one\r\ntwo\n")
    assert list(iter_lines(str(p), keepends=True)) == ["one\r\n", "two\n"]


def test_invalid_utf8_names_file_and_line(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_bytes(b"ok\nfine\nbad \xff here\n")
    with pytest.raises(NlpkitError, match=r"bad\.txt, line 3: invalid UTF-8"):
        list(iter_lines(str(p)))
    with pytest.raises(NlpkitError, match=r"bad\.txt, line 3: invalid UTF-8"):
        read_text(str(p))


def test_invalid_utf8_replaced_on_request(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_bytes(b"bad \xff here\n")
    assert list(iter_lines(str(p), errors="replace")) == ["bad \ufffd here"]


def test_missing_file_is_nlpkit_error_naming_it():
    with pytest.raises(NlpkitError, match="nope.txt: no such file"):
        list(iter_lines("nope.txt"))


def test_tsv_has_header_full_precision_and_signature_column():
    buf = io.StringIO()
    with RecordWriter(["a", "score"], fmt="tsv", signature="x|v:1", stream=buf) as w:
        w.write({"a": "cat", "score": 1 / 3})
    assert buf.getvalue() == "a\tscore\tsignature\ncat\t0.3333333333333333\tx|v:1\n"


def test_tsv_of_no_records_is_header_only():
    buf = io.StringIO()
    with RecordWriter(["a", "b"], fmt="tsv", stream=buf):
        pass
    assert buf.getvalue() == "a\tb\n"


def test_jsonl_records_carry_signature():
    buf = io.StringIO()
    with RecordWriter(["a"], fmt="jsonl", signature="s", stream=buf) as w:
        w.write({"a": 1})
        w.write({"a": 2})
    assert [json.loads(l) for l in buf.getvalue().splitlines()] == [
        {"a": 1, "signature": "s"}, {"a": 2, "signature": "s"}]


def test_json_document_has_signature_and_results():
    buf = io.StringIO()
    with RecordWriter(["a"], fmt="json", signature="s", stream=buf) as w:
        w.write({"a": 0.1})
    assert json.loads(buf.getvalue()) == {"signature": "s", "results": [{"a": 0.1}]}


def test_table_footer_is_the_signature():
    buf = io.StringIO()
    with RecordWriter(["word", "score"], fmt="table", signature="demo|v:0", stream=buf) as w:
        w.write({"word": "cat", "score": 0.5})
    out = buf.getvalue()
    assert "cat" in out and "0.5000" in out and out.rstrip().endswith("demo|v:0")


def test_tsv_cells_escape_tabs_and_newlines():
    assert format_value("a\tb\nc") == "a\\tb\\nc"


def test_signature_lists_settings_in_order_with_version():
    from nlpkit import __version__

    assert make_signature("bm25", variant="lucene", k1=1.2, stop=None) == \
        f"bm25|variant:lucene|k1:1.2|stop:none|v:{__version__}"
