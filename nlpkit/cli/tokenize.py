"""`nlpkit tokenize`: token ids, pieces or counts of text, per line or per file; ids back to text
(core: nlpkit/bpe/tokenizer.py, nlpkit/bpe/parallel_encoding.py; chat rendering: nlpkit/lm/chat.py)."""

from __future__ import annotations

import click

from nlpkit.cli.options import file_type, jobs_option, model_path_type
from nlpkit.cli.common import common_options, input_paths, open_writer
from nlpkit.cli.decoding import chat_options


def _load(tokenizer_path: str | None, model_path: str | None):
    """The tokenizer of --tokenizer PATH, else of --model PATH, else of the default model."""
    from nlpkit.bpe.tokenizer import Tokenizer
    from nlpkit.lm.transformer.loaders import resolve_model_path

    path = tokenizer_path if tokenizer_path is not None else resolve_model_path(model_path)
    return Tokenizer.load(path), str(path)


def _parse_ids(line: str, where: str, lineno: int, vocab_size: int) -> list[int]:
    """'1 2 3', '1,2,3' or '[1, 2, 3]' -> [1, 2, 3]; an error naming the line otherwise."""
    from nlpkit.errors import NlpkitError

    body = line.strip().strip("[]")
    if any(not f.strip() for f in body.split(",")[1:-1]) or body.startswith(",") or body.rstrip().endswith(","):
        raise NlpkitError(f"{where}, line {lineno}: an empty field between commas (expected integers separated "
                          "by spaces or commas)")
    parts = body.replace(",", " ").split()
    try:
        ids = [int(p) for p in parts]
    except ValueError:
        bad = next(p for p in parts if not p.lstrip("-").isdigit())
        raise NlpkitError(f"{where}, line {lineno}: {bad!r} is not a token id (expected integers "
                          "separated by spaces or commas)") from None
    for i in ids:
        if not 0 <= i < vocab_size:
            raise NlpkitError(f"{where}, line {lineno}: token id {i} is out of range (the vocabulary has ids "
                              f"0..{vocab_size - 1})")
    return ids


def _refuse_combinations(files, tokenizer_path, model_path, show_ids, show_pieces, count_only, per_file, decode, chat,
                         system, messages_file) -> None:
    """The options tokenize cannot take together: usage errors, before any input is read."""
    if tokenizer_path is not None and model_path is not None:
        raise click.UsageError("give --tokenizer or --model, not both")
    if decode and (show_pieces or count_only or per_file or chat):
        raise click.UsageError("--decode prints text: it does not combine with --pieces, --count, --per-file or --chat")
    if count_only and (show_ids or show_pieces):
        raise click.UsageError("--count prints counts only: drop --ids/--pieces")
    if chat and per_file:
        raise click.UsageError("--chat renders each line as a user message: it does not combine with --per-file")
    if (system is not None or messages_file is not None) and not chat:
        raise click.UsageError("--system and --messages need --chat")
    if messages_file is not None and files:
        raise click.UsageError("--messages holds the whole conversation: give no FILES with it")


def _write_decoded(tok, paths: list[str], sig: str, fmt: str, no_signature: bool, encoding_errors: str) -> None:
    """--decode: each input line of ids, as its text."""
    from nlpkit.io import display_name, iter_lines

    with open_writer(["file", "line", "text"], fmt, sig, no_signature, title="tokenize") as out:
        for path in paths:
            where = display_name(path)
            for lineno, line in enumerate(iter_lines(path, errors=encoding_errors), 1):
                out.write({"file": where, "line": lineno,
                           "text": tok.decode(_parse_ids(line, where, lineno, tok.vocab_size))})


@click.command("tokenize")
@click.argument("files", nargs=-1, type=file_type())
@click.option("-t", "--tokenizer", "tokenizer_path", default=None, metavar="PATH", type=model_path_type(),
              help="tokenizer.json, a bpe-train output directory, a model directory or a .gguf file.")
@click.option("-m", "--model", "model_path", default=None, metavar="PATH", type=model_path_type(),
              help="Use this model's tokenizer (directory or .gguf) [$NLPKIT_MODEL, else the shipped model].")
@click.option("--ids", "show_ids", is_flag=True, help="Print token ids (the default).")
@click.option("--pieces", "show_pieces", is_flag=True, help="Print the tokens as the vocabulary spells them.")
@click.option("--count", "count_only", is_flag=True, help="Print token counts only, with a total row.")
@click.option("--per-file", is_flag=True, help="Tokenize each file as one text, not line by line.")
@click.option("--decode", is_flag=True, help="Input lines are ids ('1 2 3', '1,2,3' or a JSON list): print their text.")
@click.option("--add-special/--no-add-special", default=True, show_default=True,
              help="Add the BOS/EOS the tokenizer adds to each text (its post-processor / add_bos_token).")
@chat_options(chat_help="Each input line is a user message: render the chat template (with the generation prompt) "
                        "and show its tokens.",
              messages_help="--chat conversation: a JSON list of {\"role\": ..., \"content\": ...} ('-' = stdin), "
                            "shown as one record instead of FILES' lines.")
@jobs_option("Processes for large inputs [the CPUs available].", old_names=("--workers",))
@common_options
def command(files, tokenizer_path, model_path, show_ids, show_pieces, count_only, per_file, decode, add_special,
            chat, system, messages_file, jobs, fmt, no_signature, quiet, encoding_errors):
    """Tokenize FILES ('-' or a pipe for stdin): ids, pieces or counts per line (or --per-file).

    No FILES with empty stdin is an error; an empty FILE gives no rows (--per-file: one row, 0
    tokens).

    Special tokens written in the text (<|im_start|>, <s>...) are recognised. Counts end with a
    total row. --decode turns lines of ids back into text. In TSV, ids and pieces are separated
    by spaces; in json/jsonl they are lists.

    \b
      nlpkit tokenize notes.txt --count
      echo 'Hello' | nlpkit tokenize -m SmolLM2-135M-Instruct.Q4_1.gguf --pieces
      nlpkit tokenize --per-file --count --tokenizer tok/ *.txt
      echo '19556 905' | nlpkit tokenize -m model.gguf --decode
      echo 'What is 2+2?' | nlpkit tokenize -m model.gguf --chat --pieces
      nlpkit tokenize -m model.gguf --chat --messages conversation.json --count
    """
    from nlpkit.bpe.parallel_encoding import encode_file, encode_stream
    from nlpkit.io import display_name, iter_lines
    from nlpkit.signature import make_signature

    _refuse_combinations(files, tokenizer_path, model_path, show_ids, show_pieces, count_only, per_file, decode, chat,
                         system, messages_file)
    paths = [messages_file] if messages_file is not None else input_paths(files)
    if paths.count("-") > 1:
        raise click.UsageError("stdin ('-') can be given only once")
    tok, source = _load(tokenizer_path, model_path)
    from pathlib import Path
    name = Path(source).name or source
    if not (show_ids or show_pieces or count_only):
        show_ids = True
    sig = make_signature("tokenize", tokenizer=name, special=add_special and not chat,
                         unit="file" if per_file else "line", **({"chat": True} if chat else {}))

    if decode:
        _write_decoded(tok, paths, sig, fmt, no_signature, encoding_errors)
        return

    renderer = None
    if chat:
        from nlpkit.lm.chat import ChatTemplate
        renderer = ChatTemplate.for_tokenizer(tok, source)

    plain = fmt in ("json", "jsonl")
    columns = ["file"] + ([] if per_file else ["line"]) + ["tokens"]
    columns += (["ids"] if show_ids else []) + (["pieces"] if show_pieces else [])

    def record(where: str, lineno: int | None, ids: list[int]) -> dict:
        rec = {"file": where}
        if lineno is not None:
            rec["line"] = lineno
        rec["tokens"] = len(ids)
        if show_ids:
            rec["ids"] = ids if plain else " ".join(map(str, ids))
        if show_pieces:
            pieces = [tok.id_to_token(i) for i in ids]
            rec["pieces"] = pieces if plain else " ".join(pieces)
        return rec

    total = 0
    encode_kw = {"add_special": add_special}
    with open_writer(columns, fmt, sig, no_signature, title="tokenize") as out:
        for path in paths:
            where = display_name(path)
            if per_file:
                ids, n = [], 0
                for part in encode_file(tok, iter_lines(path, errors=encoding_errors, keepends=True, strip_bom=False),
                                        workers=jobs, **encode_kw):
                    n += len(part)
                    if not count_only:
                        ids += part
                total += n
                out.write(record(where, None, ids) | {"tokens": n})
                continue
            if messages_file is not None:
                from nlpkit.lm.chat import conversation
                ids = renderer.encode(conversation(None, system, messages_file), tok)
                total += len(ids)
                out.write(record(where, 1, ids))
                continue
            # a BOM is text to a tokenizer: kept, as HF encodes a file read as UTF-8 (and bpe-train learns it)
            lines = iter_lines(path, errors=encoding_errors, strip_bom=renderer is not None)
            if renderer is not None:
                stream = (renderer.encode([*renderer.system(system), {"role": "user", "content": line}], tok)
                          for line in lines)
            else:
                stream = encode_stream(tok, lines, workers=jobs, **encode_kw)
            for lineno, ids in enumerate(stream, 1):
                total += len(ids)
                out.write(record(where, lineno, ids))
        if count_only:
            out.write({"file": "total", "tokens": total})
