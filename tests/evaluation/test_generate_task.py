"""The generate task's pieces (nlpkit/evaluation/answer_filters.py, generation_task.py): lm-evaluation-harness's
regex filter, exact_match and stop strings, and the checks of its options."""

from __future__ import annotations

import pytest

from conftest import FIXTURES

from nlpkit.errors import UsageError
from nlpkit.evaluation.answer_filters import FALLBACK, MatchOptions, RegexFilter, exact_match
from nlpkit.evaluation.generation_task import (GenerationOptions, Generator, corpus_metrics, score_generation,
                                               targets_of)
from nlpkit.lm.transformer.stop_strings import TailStops, cut_at_stops


def test_regex_filter_takes_the_selected_match_and_strips_it():
    f = RegexFilter(r"#### (\-?[0-9\.\,]+)")
    assert f.apply("so #### 42 and #### 7") == "42"
    assert RegexFilter(r"(\d+)", group_select=-1).apply("1 then 2 then 3") == "3"
    assert RegexFilter(r"(\d+)", group_select=1).apply("1 then 2 then 3") == "2"
    assert RegexFilter(r"\s\w+\s").apply("a  word  b") == "word"  # no group: the match, stripped


def test_regex_filter_takes_the_first_non_empty_group_of_a_tuple():
    f = RegexFilter(r"(\d+)|([A-Za-z]+)", group_select=-1)
    assert f.apply("12 apples") == "apples"
    assert f.apply("apples 12") == "12"
    assert RegexFilter(r"(x?)(y?)").apply("zzz") == FALLBACK  # every group empty


def test_no_match_is_invalid():
    assert RegexFilter(r"(\d+)").apply("no digits") == "[invalid]"
    assert RegexFilter(r"(\d+)", group_select=3).apply("1 2") == "[invalid]"  # past the matches found


def test_a_bad_extract_regex_is_a_usage_error_naming_it():
    with pytest.raises(UsageError, match=r"`extract` '\(.*d\+' is not a valid regular expression: missing \)"):
        RegexFilter(r"(\d+")
    with pytest.raises(UsageError, match="`ignore_regex` '\\['"):
        GenerationOptions(match=MatchOptions(regexes_to_ignore=("[",))).validate()


def test_exact_match_as_lm_eval():
    assert exact_match("Paris", "Paris") == 1.0
    assert exact_match("Paris", "paris") == 0.0
    assert exact_match("Paris", "paris", MatchOptions(ignore_case=True)) == 1.0
    assert exact_match("Paris.", "Paris", MatchOptions(ignore_punctuation=True)) == 1.0
    assert exact_match("$1,000", "1000", MatchOptions(regexes_to_ignore=(",", r"\$"))) == 1.0
    # regexes first, then case, then punctuation (so a regex sees the original case)
    assert exact_match("The answer", "answer", MatchOptions(ignore_case=True, regexes_to_ignore=("the ",))) == 0.0
    assert exact_match("the answer", "ANSWER", MatchOptions(ignore_case=True, regexes_to_ignore=("the ",))) == 1.0
    assert exact_match("a\x00", "a") == 1.0  # numpy string arrays drop trailing NULs


def test_a_list_of_targets_is_right_when_any_matches():
    assert exact_match("4", ["four", "4"]) == 1.0
    assert exact_match("5", ["four", "4"]) == 0.0
    rec, m = score_generation_of("4", ["four", "4"])
    assert m == {"exact_match": 1.0} and rec["target"] == ["four", "4"]


def score_generation_of(answer, targets):
    from nlpkit.evaluation.generation_task import Generation

    return score_generation(Generation(answer, answer, 1, "eos"), targets, GenerationOptions())


def test_an_empty_target_matches_an_empty_answer_only():
    assert score_generation_of("", [""])[1]["exact_match"] == 1.0
    assert score_generation_of(" ", [""])[1]["exact_match"] == 0.0


def test_targets_are_strings_or_lists_of_strings():
    assert targets_of("a", "target", "f, line 1") == ["a"]
    assert targets_of(["a", "b"], "target", "f, line 1") == ["a", "b"]
    for bad in ([], [1.5], None, {"a": 1}, True, 2, ["2", 2], [None]):  # strings only, as the message says
        with pytest.raises(Exception, match="f, line 1: field 'target'"):
            targets_of(bad, "target", "f, line 1")


def test_cut_at_each_stop_in_turn():
    assert cut_at_stops("4\n\nQ: next", ["\n\n", "Q:"]) == "4"
    assert cut_at_stops("Q: x\n\ny", ["\n\n", "Q:"]) == ""
    assert cut_at_stops("abc", []) == "abc"


@pytest.mark.parametrize("kwargs, message", [
    ({"until": ("",)}, "empty stop string"),
    ({"max_gen_toks": 0}, "`max_gen_toks` must be at least 1"),
    ({"metrics": ("rouge",)}, "`metric` rouge"),
    ({"extract": "("}, "`extract` '\\(' is not a valid"),
])
def test_bad_options_are_usage_errors(kwargs, message):
    with pytest.raises(UsageError, match=message):
        GenerationOptions(**kwargs).validate()


@pytest.fixture(scope="module")
def gpt2():
    from nlpkit.lm.transformer.transformer_lm import TransformerLM
    from nlpkit.lm.transformer.loaders import load_model

    return TransformerLM(load_model(FIXTURES / "score" / "models" / "gpt2-bpe"))


def test_max_gen_toks_beyond_the_window_is_an_error(gpt2):
    gen = Generator(gpt2)
    with pytest.raises(UsageError, match="`max_gen_toks` 64 leaves no room for a context in the 64-token window"):
        gen.generate(["a"], GenerationOptions(max_gen_toks=64))


def test_a_stop_string_spanning_tokens_stops_decoding(gpt2):
    tok = gpt2.model.tokenizer
    ids = tok.encode("It is a truth universally")
    stops = TailStops(tok, ["truth un"])  # 5 tokens: 'tru' 'th' ' ' 'u' 'n' here
    hits = [stops.push(i) for i in ids]
    first = hits.index(True)
    assert tok.decode(ids[:first + 1]).endswith("truth un")  # found once its last token is in


def test_a_stop_string_in_the_prompt_is_not_a_stop(gpt2):
    """lm-eval looks at the generated tokens only: a context holding the stop string decodes on."""
    gen = Generator(gpt2)
    free = gen.generate(["a\nb"], GenerationOptions(max_gen_toks=6))[0]
    stopped = gen.generate(["a\nb"], GenerationOptions(until=("\n",), max_gen_toks=6))[0]
    if "\n" not in free.generation:
        assert stopped.generation == free.generation and stopped.tokens == free.tokens


def test_generation_is_cut_before_the_stop_and_says_why_it_ended(gpt2):
    gen = Generator(gpt2)
    free = gen.generate(["The capital of France is"], GenerationOptions(max_gen_toks=12))[0]
    assert free.finish in ("length", "eos")
    stop = free.generation[3:5]
    cut = gen.generate(["The capital of France is"], GenerationOptions(until=(stop,), max_gen_toks=12))[0]
    assert cut.generation == free.generation.split(stop)[0]
    assert cut.finish == "stop" and cut.tokens <= free.tokens


def test_corpus_bleu_and_chrf_are_sacrebleus():
    import sacrebleu

    answers = ["the cat sat on the mat", "a dog", "hello world"]
    targets = [["the cat sat on a mat"], ["a dog", "the dog"], ["hello there world"]]
    got = corpus_metrics(answers, targets, ("exact_match", "bleu", "chrf"))
    refs = [[t[0] for t in targets], [t[1] if len(t) > 1 else t[0] for t in targets]]
    assert got["bleu"]["value"] == pytest.approx(sacrebleu.corpus_bleu(answers, refs).score, abs=1e-9)
    assert got["chrf"]["value"] == pytest.approx(sacrebleu.corpus_chrf(answers, refs).score, abs=1e-9)
    assert got["bleu"]["low"] <= got["bleu"]["value"] <= got["bleu"]["high"] and got["bleu"]["n"] == 3
    assert set(got) == {"bleu", "chrf"}


def test_ngram_models_answer_in_words():
    from nlpkit.lm.load import load_language_model
    from nlpkit.lm.generation.sampling import SamplingConfig

    lm = load_language_model(str(FIXTURES / "ngram" / "tiny-3.arpa"))
    gen = Generator(lm)
    out = gen.generate(["the"], GenerationOptions(max_gen_toks=5, sampling=SamplingConfig(temperature=0)))[0]
    assert out.tokens <= 5 and out.finish in ("length", "eos", "stop")
    assert out.generation == out.answer
