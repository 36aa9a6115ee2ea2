"""Two documents whose context + continuation are the same text cut at another place are scored each on its own
tokens: lm-eval 0.4.13's HF backend shares one forward between them through its logits cache and reads the shorter
continuation from misaligned rows (lm-eval issue #2984); nlpkit does not copy that (docs/evaluation.md,
"Differences from lm-eval")."""

from __future__ import annotations

import json

from click.testing import CliRunner

from nlpkit.cli.main import cli

TASK = ("task: split_texts\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {data}\n"
        "test_split: test\noutput_type: multiple_choice\ndoc_to_text: text\ndoc_to_choice: choices\n"
        "doc_to_target: 0\nmetric_list:\n  - metric: acc\n")
EARLY = {"text": "It was the best of times, it was the worst of the time",
         "choices": [" of which I am now speaking", " of the river"]}
LATE = {"text": "It was the best of times, it was the worst of the time of",
        "choices": [" which I am now speaking", " the river"]}


def _samples(tmp_path, name: str, docs: list[dict]) -> list[dict]:
    folder = tmp_path / name
    folder.mkdir()
    data = folder / "test.jsonl"
    data.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    (folder / "split_texts.yaml").write_text(TASK.format(data=data), encoding="utf-8")
    out = folder / "out"
    r = CliRunner().invoke(cli, ["score", "--tasks", "split_texts", "--include-path", str(folder), "--output-path",
                                 str(out), "--log-samples", "--format", "jsonl", "-q"])
    assert r.exit_code == 0, r.output
    (samples,) = out.glob("*/samples_split_texts_*.jsonl")
    return [json.loads(line) for line in samples.read_text(encoding="utf-8").splitlines()]


def test_the_same_text_cut_at_another_place_scores_as_it_does_alone(tmp_path):
    together = _samples(tmp_path, "together", [EARLY, LATE])
    early, late = _samples(tmp_path, "early", [EARLY]), _samples(tmp_path, "late", [LATE])
    assert [s["arguments"] for s in together] == [early[0]["arguments"], late[0]["arguments"]]
    assert together[0]["resps"] == early[0]["resps"]  # the same bits, whatever else the run scores
    assert together[1]["resps"] == late[0]["resps"]
    # the two first choices are one text: each continuation's log-likelihood is its own tokens' (the longer one
    # has the later tokens' and one more), never the other's rows read at the wrong offset
    assert float(together[0]["resps"][0][0][0]) < float(together[1]["resps"][0][0][0])
