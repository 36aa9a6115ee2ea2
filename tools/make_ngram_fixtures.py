"""Build the n-gram reference fixtures with KenLM itself (lmplz and query, compiled from source).

KenLM is never a runtime or CI dependency: this script runs once on a maintainer's machine and
stores small outputs under tests/fixtures/ngram/; the tests compare nlpkit against them.

Building KenLM (a few minutes; what this script expects in $KENLM_BIN, default
/work/build/kenlm/build/bin):

    apt-get install -y cmake libboost-program-options-dev libboost-system-dev \\
        libboost-thread-dev libboost-test-dev zlib1g-dev
    pip download --no-deps --no-binary :all: kenlm -d /work/build/   # kenlm-0.3.0.tar.gz, or a
    #   checkout of github.com/kpu/kenlm (the fixtures were made from commit 4cb443e)
    mkdir -p /work/build/kenlm && tar -xzf /work/build/kenlm-*.tar.gz -C /work/build/kenlm --strip-components 1
    cd /work/build/kenlm && mkdir build && cd build
    cmake .. -DCMAKE_BUILD_TYPE=Release -DKENLM_MAX_ORDER=6 && make -j2 lmplz query

What it writes (about 250 KB):

- ``train.txt``: the first 300 lines of Pride and Prejudice (``gutenberg/1342-0.txt``) as they are,
  UTF-8 BOM and CRLF line ends included (KenLM keeps the BOM in the first word; CR is a delimiter).
- ``heldout.txt``: 40 lines of Persuasion (``gutenberg/105.txt``, lines 3001-3040), LF line ends.
- ``kenlm-N.arpa.gz``, N = 2..5: ``lmplz -o N --discount_fallback -S 10% -T /tmp < train.txt``
  (--discount_fallback only lets lmplz finish where its counts of counts are degenerate; it
  substitutes 0.5 1 1.5 as nlpkit does, with a warning).
- ``query.json``: ``query -v summary -v sentence -v word`` on heldout.txt with each kenlm-N.arpa.gz (``kenlm-N``) and with
  nlpkit's own ``ngram-train --order N`` ARPA of train.txt (``nlpkit-N``): per word the vocabulary id
  (0 = OOV), the n-gram length and log10 p; per line the total; the two perplexities, OOVs, tokens.
- ``tiny.txt`` / ``tiny-3.arpa``: a hand-made corpus with a BOM, a no-break space, U+3000 and a
  vertical tab inside words, and an empty line, trained with ``lmplz -o 3 --discount_fallback``.
- ``tiny-held.txt``: a held-out text that starts with a BOM and has CRLF line ends (``query`` keeps
  the BOM in the first word, CR is a delimiter), scored by ``query`` with tiny-3.arpa (``tiny-3``).

KenLM's own test model (``lm/test.arpa`` of the KenLM source, $KENLM_SRC, default /work/build/kenlm; it has
"blanks": n-grams such as ``also would consider`` whose suffix ``would consider`` is absent):

- ``kenlm-test.arpa``: that file as it is.
- ``test-arpa.json``: ``query`` with it. ``next``: for each history in `HISTORIES` (with ``<s>`` first,
  as ``query`` starts a line; ``-n`` for those without), KenLM's log10 p and n-gram length of every
  vocabulary word but ``<s>`` (plus an unknown word) after it: the next-word distribution, blanks
  included. ``oov_text``: ``query``'s summary and per-word ids of `OOV_TEXT` (a literal ``<unk>``).

Run: ``python tools/make_ngram_fixtures.py`` (needs ../shared/data/gutenberg and the KenLM binaries), or
``python tools/make_ngram_fixtures.py test-arpa`` for the test.arpa fixtures alone (query only).
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "ngram"
DATA = Path(os.environ.get("NLPKIT_DATA", ROOT.parent / "shared" / "data")) / "gutenberg"
KENLM_BIN = Path(os.environ.get("KENLM_BIN", "/work/build/kenlm/build/bin"))
KENLM_SRC = Path(os.environ.get("KENLM_SRC", "/work/build/kenlm"))
ORDERS = (2, 3, 4, 5)
#: histories of test.arpa's next-word distributions: "<s> ..." as query starts a line, else a null context
#: (query -n). Blanks: "would consider" and "higher looking" are absent, longer n-grams over them are not.
HISTORIES = ["<s>", "<s> also would consider", "<s> also would consider higher", "<s> looking on a little",
             "<s> looking on a", "<s> the", "<s> higher looking", "", "also", "also would", "also would consider",
             "also would consider higher", "higher looking", "would consider", "would consider higher",
             "little more", "<unk> however", "on a little more"]
OOV_TEXT = "the <unk> biarritz\nbiarritz not_found <unk> .\n"
LMPLZ_FLAGS = ["--discount_fallback", "-S", "10%", "-T", tempfile.gettempdir()]
TINY_HELD = "\ufeffthe cat sat\r\nthe dog ran\r\na cat\u00a0ran\r\n"
TINY = ("\ufeffthe cat sat\n"
        "the dog sat\n"
        "\n"
        "the cat\u00a0ran fast\n"
        "a\x0bb c \u3000 d\u3000e\n"
        "the cat sat on the mat\n")


def lmplz(order: int, text_path: Path, out_path: Path) -> None:
    with open(text_path, "rb") as f, open(out_path, "wb") as out:
        subprocess.run([str(KENLM_BIN / "lmplz"), "-o", str(order), *LMPLZ_FLAGS], stdin=f, stdout=out,
                       stderr=subprocess.DEVNULL, check=True)


def query(model: Path, text_path: Path, flags: list[str] = ()) -> dict:
    """Parse `query -v summary -v sentence -v word` output: per word (id, n-gram length, log10 p), per line totals, summary."""
    with open(text_path, "rb") as f:
        res = subprocess.run([str(KENLM_BIN / "query"), *flags, "-v", "summary", "-v", "sentence", "-v", "word",
                              str(model)], stdin=f, capture_output=True, check=True)
    out = {"ids": [], "ngram": [], "log10": [], "line_total": [], "line_oov": []}
    for line in res.stdout.decode("utf-8").split("\n"):
        if line.startswith("Perplexity including OOVs:"):
            out["ppl"] = float(line.split("\t")[1])
        elif line.startswith("Perplexity excluding OOVs:"):
            out["ppl_no_oov"] = float(line.split("\t")[1])
        elif line.startswith("OOVs:"):
            out["oov"] = int(line.split("\t")[1])
        elif line.startswith("Tokens:"):
            out["tokens"] = int(line.split("\t")[1])
        elif line.strip():
            items = line.split("\t")
            for item in items:
                if item.startswith("Total: "):
                    _, total, _, oov = item.split(" ")
                    out["line_total"].append(float(total))
                    out["line_oov"].append(int(oov))
                elif item:
                    word, rest = item.rsplit("=", 1)
                    vid, n, lp = rest.split(" ")
                    out["ids"].append(int(vid))
                    out["ngram"].append(int(n))
                    out["log10"].append(float(lp))
    return out


def arpa_unigrams(path: Path) -> list[str]:
    words, inside = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("\\"):
            inside = line == "\\1-grams:"
        elif inside and line.strip():
            words.append(line.split("\t")[1])
    return words


def next_word_scores(model: Path) -> dict:
    """KenLM's log10 p (and n-gram length) of every word after each of `HISTORIES`: one query line per
    (history, word), the word's score read at its position."""
    words = [w for w in arpa_unigrams(model) if w != "<s>"] + ["not_found"]
    out: dict = {"words": words}
    for bos in (True, False):
        hists = [h for h in HISTORIES if h.startswith("<s>") == bos]
        lines = []
        for h in hists:
            ctx = h.split()[1:] if bos else h.split()
            lines += [" ".join(ctx + [w]) for w in words]
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        try:
            res = query(model, Path(f.name), [] if bos else ["-n"])
        finally:
            os.unlink(f.name)
        at = 0
        for h in hists:
            n_ctx = len(h.split()) - (1 if bos else 0)
            log10, ngram = [], []
            for _ in words:
                k = at + n_ctx                                  # the word's score on its line
                log10.append(res["log10"][k])
                ngram.append(res["ngram"][k])
                at += n_ctx + 1 + (1 if bos else 0)             # the line's words (+ </s> with <s>)
            out[h] = {"log10": log10, "ngram": ngram}
        assert at == len(res["log10"]), (at, len(res["log10"]))
    return out


def test_arpa_fixtures() -> None:
    """kenlm-test.arpa and test-arpa.json (see the module docstring)."""
    src = KENLM_SRC / "lm" / "test.arpa"
    arpa = OUT / "kenlm-test.arpa"
    arpa.write_bytes(src.read_bytes())
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
        f.write(OOV_TEXT)
    try:
        oov = query(arpa, Path(f.name))
    finally:
        os.unlink(f.name)
    result = {"next": next_word_scores(arpa), "oov_text": {"text": OOV_TEXT, **oov}}
    (OUT / "test-arpa.json").write_text(json.dumps(result, separators=(",", ":")) + "\n")
    print(f"wrote {arpa} and {OUT / 'test-arpa.json'}")


def main() -> None:
    if not (KENLM_BIN / "lmplz").exists():
        sys.exit(f"no lmplz in {KENLM_BIN}: build KenLM first (see this script's docstring) or set KENLM_BIN")
    if not DATA.is_dir():
        sys.exit(f"no corpus at {DATA}")
    OUT.mkdir(parents=True, exist_ok=True)
    with open(DATA / "1342-0.txt", "rb") as f:
        train = b"".join(f.readlines()[:300])
    (OUT / "train.txt").write_bytes(train)
    with open(DATA / "105.txt", "rb") as f:
        held = b"".join(line.rstrip(b"\r\n") + b"\n" for line in f.readlines()[3000:3040])
    (OUT / "heldout.txt").write_bytes(held)
    (OUT / "tiny.txt").write_bytes(TINY.encode("utf-8"))
    lmplz(3, OUT / "tiny.txt", OUT / "tiny-3.arpa")
    (OUT / "tiny-held.txt").write_bytes(TINY_HELD.encode("utf-8"))

    sys.path.insert(0, str(ROOT))
    from nlpkit.lm.ngram.train import train_ngram

    results: dict = {"heldout_words": [w for line in held.decode().split("\n")[:-1] for w in line.split() + ["</s>"]],
                     "tiny-3": query(OUT / "tiny-3.arpa", OUT / "tiny-held.txt")}
    with tempfile.TemporaryDirectory() as tmp:
        for n in ORDERS:
            arpa = Path(tmp) / f"kenlm-{n}.arpa"
            lmplz(n, OUT / "train.txt", arpa)
            with open(arpa, "rb") as f, gzip.GzipFile(OUT / f"kenlm-{n}.arpa.gz", "wb", 9, mtime=0) as g:
                g.write(f.read())
            results[f"kenlm-{n}"] = query(arpa, OUT / "heldout.txt")
            mine = Path(tmp) / f"nlpkit-{n}.arpa"
            train_ngram([str(OUT / "train.txt")], str(mine), order=n)
            results[f"nlpkit-{n}"] = query(mine, OUT / "heldout.txt")
    (OUT / "query.json").write_text(json.dumps(results, separators=(",", ":")) + "\n")
    total = sum(p.stat().st_size for p in OUT.iterdir())
    print(f"wrote {OUT} ({total / 1024:.0f} KB)")


if __name__ == "__main__":
    if not (KENLM_BIN / "query").exists():
        sys.exit(f"no query in {KENLM_BIN}: build KenLM first (see this script's docstring) or set KENLM_BIN")
    if sys.argv[1:] == ["test-arpa"]:
        OUT.mkdir(parents=True, exist_ok=True)
        test_arpa_fixtures()
    else:
        main()
        test_arpa_fixtures()
