r"""TSV cells read back as what was written (issue 44 item 11): backslash, tab, newline and carriage return are
escaped (`\\`, `\t`, `\n`, `\r`), so `C:\new\dir` and a text holding a real newline stay different; a list of text
is a JSON array (a comma inside an item stays the item's); every TSV writer goes through `nlpkit.io.escape_tsv`."""

from __future__ import annotations

import io
import json

import pytest

from nlpkit.io import RecordWriter, escape_tsv, format_value, unescape_tsv

TEXTS = ["C:\\new\\dir", "C:\nnew", "tab\there", "cr\rhere", "\\", "\\\\n", "a\\tb", "plain", "", "ends with \\"]


@pytest.mark.parametrize("text", TEXTS)
def test_every_text_reads_back_as_itself(text):
    cell = format_value(text)
    assert "\t" not in cell and "\n" not in cell and "\r" not in cell
    assert unescape_tsv(cell) == text


def test_a_backslash_and_a_real_newline_read_back_differently():
    assert format_value("C:\\new\\dir") == "C:\\\\new\\\\dir"
    assert format_value("C:\nnew") == "C:\\nnew"
    assert len({format_value(t) for t in TEXTS}) == len(TEXTS)


def test_a_list_of_text_is_a_json_array_and_numbers_stay_comma_joined():
    assert format_value(["Paris", "Paris, France"]) == '["Paris","Paris, France"]'
    assert json.loads(unescape_tsv(format_value(["a\tb", "c\\d"]))) == ["a\tb", "c\\d"]
    assert format_value([1, 2.5, -3]) == "1,2.5,-3"       # score's logprobs, tokens: unchanged
    assert format_value([]) == ""


def test_record_writer_escapes_every_cell_and_the_signature():
    buf = io.StringIO()
    with RecordWriter(["a", "targets"], fmt="tsv", signature="nlpkit:x|until:\\n", stream=buf) as out:
        out.write({"a": "x\\y", "targets": ["1", "2,3"]})
    header, row = buf.getvalue().splitlines()
    assert header == "a\ttargets\tsignature"
    assert row.split("\t") == ["x\\\\y", '["1","2,3"]', "nlpkit:x|until:\\\\n"]


def test_a_table_shows_a_backslash_as_itself_and_text_lists_quoted():
    buf = io.StringIO()
    with RecordWriter(["a", "targets"], fmt="table", stream=buf) as out:
        out.write({"a": "C:\\new", "targets": ["Paris", "Paris, France"]})
    assert "C:\\new" in buf.getvalue() and "C:\\\\new" not in buf.getvalue()
    assert '"Paris, France"' in buf.getvalue()


@pytest.mark.parametrize("extra", [[], ["--normalize"]])
def test_edit_distance_pairs_fast_path_escapes_as_record_writer_does(cli, extra):
    """The first chunk (1 MB of pairs) goes through `RecordWriter`, later ones through the joined fast path: the
    same rows either way."""
    pairs = "a\\b\tab\nc:\\new\tc:\\old\n" * 90_000   # 1.6 MB: two chunks
    r = cli("edit-distance", "--pairs", "-", "--format", "tsv", *extra, input=pairs)
    assert r.returncode == 0, r.stderr.decode()
    rows = r.stdout.decode().splitlines()[1:]
    assert len(rows) == 180_000 and set(rows[0::2]) == {rows[0]} and set(rows[1::2]) == {rows[1]}
    assert rows[0].split("\t")[:2] == ["a\\\\b", "ab"] and rows[1].split("\t")[:2] == ["c:\\\\new", "c:\\\\old"]


def test_tfidf_vocabulary_lines_escape_as_tsv_cells():
    from nlpkit.stats.tfidf import escape_term

    assert escape_term("a\\b\tc") == escape_tsv("a\\b\tc") == "a\\\\b\\tc"


def test_the_format_help_states_the_escaping(cli):
    out = cli("pmi", "--help").stdout.decode()
    assert "\\\\" in out and "JSON" in out
