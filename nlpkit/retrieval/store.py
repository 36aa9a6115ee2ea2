"""Saving and loading BM25 indexes: a directory of `.npy` arrays plus a JSON header.

    INDEX/
      header.json   {"format": "nlpkit-bm25", "format_version": 1, variant, k1, b, delta,
                     n_docs, n_terms, n_postings, doc_bits, tokenizer settings, doc ids,
                     array manifest}
      vocab.json    the terms, in term-id order
      indptr.npy postings.npy scores.npy nonocc.npy [tf_extra.npy]

Document ids that are just 1..N (lines, paragraphs) are stored as ``{"numbered_from": 1}``.

`load_index` memory-maps the arrays (np.load(mmap_mode="r")): loading reads the two JSON
files and maps the rest, so it takes milliseconds and the OS pages postings in on demand.
Every array's dtype and shape are checked against the manifest, so a truncated, corrupt or
foreign directory is refused with a message naming the file, never half-loaded.
"""

from __future__ import annotations

import json
import math
import os

import numpy as np

from nlpkit.errors import NlpkitError
from nlpkit.retrieval.bm25 import NONOCC_VARIANTS, VARIANTS, BM25Index

FORMAT = "nlpkit-bm25"
FORMAT_VERSION = 1
ARRAYS = ("indptr", "postings", "scores", "nonocc", "tf_extra")
HEADER = "header.json"
VOCAB = "vocab.json"


def save_index(index: BM25Index, path: str, files: dict[str, str] | None = None) -> None:
    """Write `index` to directory `path` (created if needed; files of an older index replaced).

    Arrays are written first and the header last, so an interrupted save leaves no valid header
    over mismatched arrays. `files` names arrays already written as ``.npy`` files (on the same
    filesystem, e.g. memory-mapped by `nlpkit.distributed`): they are moved into place, not copied.
    """
    if os.path.exists(path) and not os.path.isdir(path):
        raise NlpkitError(f"{path}: exists and is not a directory (an index is a directory)")
    try:
        _save(index, path, files)
    except OSError as e:
        raise NlpkitError(f"{path}: cannot write the index ({e.strerror or e})") from None


def _save(index: BM25Index, path: str, files: dict[str, str] | None) -> None:
    header_path = os.path.join(path, HEADER)
    if os.path.isdir(path) and os.listdir(path) and not os.path.exists(header_path):
        raise NlpkitError(f"{path}: directory exists and is not an nlpkit BM25 index; "
                          "write the index to a new or empty directory")
    os.makedirs(path, exist_ok=True)
    if os.path.exists(header_path):
        os.remove(header_path)
    manifest = {}
    for name in ARRAYS:
        arr = getattr(index, name)
        if arr is None:
            stale = os.path.join(path, f"{name}.npy")
            if os.path.exists(stale):
                os.remove(stale)
            continue
        if files and name in files:
            os.replace(files[name], os.path.join(path, f"{name}.npy"))
            manifest[name] = {"dtype": arr.dtype.str, "shape": list(arr.shape)}
            continue
        arr = np.ascontiguousarray(arr)
        tmp = os.path.join(path, f".{name}.npy.tmp")
        with open(tmp, "wb") as f:
            np.save(f, arr, allow_pickle=False)
        os.replace(tmp, os.path.join(path, f"{name}.npy"))
        manifest[name] = {"dtype": arr.dtype.str, "shape": list(arr.shape)}
    with open(os.path.join(path, VOCAB), "w", encoding="utf-8") as f:
        json.dump(index.vocab, f, ensure_ascii=False, separators=(",", ":"))
    header = {
        "format": FORMAT, "format_version": FORMAT_VERSION,
        "variant": index.variant, "k1": index.k1, "b": index.b, "delta": index.delta,
        "n_docs": index.n_docs, "n_terms": len(index.vocab), "n_postings": int(len(index.postings)),
        "doc_bits": index.doc_bits, "tokenizer": index.tokenizer, "arrays": manifest,
        "doc_ids": _compact_ids(index.doc_ids),
    }
    tmp = header_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(header, f, ensure_ascii=False, separators=(",", ":"))
    os.replace(tmp, header_path)


def _compact_ids(ids: list[str]):
    """["1", "2", ..., "N"] -> {"numbered_from": 1}; other id lists unchanged."""
    if ids and ids[0] == "1" and ids[-1] == str(len(ids)) and ids == [str(i) for i in range(1, len(ids) + 1)]:
        return {"numbered_from": 1}
    return ids


def _expand_ids(stored, n_docs: int, path: str) -> list[str]:
    if isinstance(stored, dict) and isinstance(stored.get("numbered_from"), int):
        first = stored["numbered_from"]
        return [str(i) for i in range(first, first + n_docs)]
    if isinstance(stored, list) and len(stored) == n_docs:
        return stored
    raise NlpkitError(f"{path}: corrupt index (document ids do not match the header)")


def _read_json(path: str, what: str):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise NlpkitError(f"{path}: missing; not an nlpkit BM25 index ({what} not found)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise NlpkitError(f"{path}: corrupt {what} ({e}); rebuild the index with `nlpkit bm25 index`") from None


def read_header(path: str) -> dict:
    """The validated header of the index directory `path`."""
    if not os.path.isdir(path):
        if os.path.exists(path):
            raise NlpkitError(f"{path}: not an nlpkit BM25 index (an index is a directory with {HEADER})")
        raise NlpkitError(f"{path}: no such index directory")
    header = _read_json(os.path.join(path, HEADER), "header")
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise NlpkitError(f"{path}: not an nlpkit BM25 index (header format is "
                          f"{header.get('format') if isinstance(header, dict) else None!r})")
    version = header.get("format_version")
    if version != FORMAT_VERSION:
        raise NlpkitError(f"{path}: index format version {version} is not supported by this nlpkit "
                          f"(reads version {FORMAT_VERSION}); rebuild it with `nlpkit bm25 index`")
    need = ("variant", "k1", "b", "delta", "n_docs", "n_terms", "n_postings", "doc_bits", "arrays",
            "doc_ids")
    bad = [k for k in need if k not in header]
    if not bad:
        ints = ("n_docs", "n_terms", "n_postings", "doc_bits")
        bad = [k for k in ints if not isinstance(header[k], int) or header[k] < 0]
        bad += [k for k in ("k1", "b", "delta") if not isinstance(header[k], (int, float))
                or not math.isfinite(header[k])]
        bad += ["variant"] if header["variant"] not in VARIANTS else []
        bad += ["arrays"] if not isinstance(header["arrays"], dict) else []
    if bad:
        raise NlpkitError(f"{path}: corrupt index header (missing or bad: {', '.join(bad)}); "
                          "rebuild the index")
    return header


def _load_array(path: str, name: str, spec: dict, mmap: bool) -> np.ndarray:
    file = os.path.join(path, f"{name}.npy")
    try:
        arr = np.load(file, mmap_mode="r" if mmap else None, allow_pickle=False)
    except FileNotFoundError:
        raise NlpkitError(f"{file}: missing; the index is incomplete, rebuild it") from None
    except (ValueError, OSError, EOFError) as e:
        raise NlpkitError(f"{file}: corrupt or truncated array ({e}); rebuild the index") from None
    if arr.dtype.str != spec.get("dtype") or list(arr.shape) != spec.get("shape"):
        raise NlpkitError(f"{file}: holds {arr.dtype.str}{list(arr.shape)}, header says "
                          f"{spec.get('dtype')}{spec.get('shape')}; the index is corrupt, rebuild it")
    return arr


def load_index(path: str, mmap: bool = True) -> BM25Index:
    """Open a saved index; arrays are memory-mapped read-only unless ``mmap=False``."""
    header = read_header(path)
    vocab = _read_json(os.path.join(path, VOCAB), "vocabulary")
    n_docs, n_terms, n_post = header["n_docs"], header["n_terms"], header["n_postings"]
    doc_bits = header["doc_bits"]
    doc_ids = _expand_ids(header["doc_ids"], n_docs, path)
    if not isinstance(vocab, list) or len(vocab) != n_terms:
        raise NlpkitError(f"{path}: corrupt index (the vocabulary does not match the header)")
    expected = {"indptr": [n_terms + 1], "postings": [n_post], "scores": [n_post],
                "nonocc": [n_terms if header["variant"] in NONOCC_VARIANTS else 0],
                "tf_extra": [n_post] if doc_bits >= 32 else None}
    arrays = {}
    for name in ARRAYS:
        spec = header["arrays"].get(name)
        if expected[name] is None:
            arrays[name] = None
            continue
        if not spec or spec.get("shape") != expected[name]:
            raise NlpkitError(f"{path}: corrupt index header (array {name} has shape "
                              f"{(spec or {}).get('shape')}, expected {expected[name]})")
        # a plain ndarray view of the map: slicing a np.memmap costs a Python call per slice
        arrays[name] = np.asarray(_load_array(path, name, spec, mmap))
    indptr = arrays["indptr"]
    if int(indptr[0]) != 0 or int(indptr[-1]) != n_post or bool(np.any(indptr[1:] < indptr[:-1])):
        raise NlpkitError(f"{os.path.join(path, 'indptr.npy')}: corrupt postings pointers; rebuild the index")
    return BM25Index(variant=header["variant"], k1=header["k1"], b=header["b"], delta=header["delta"],
                     vocab=vocab, doc_ids=doc_ids, doc_bits=doc_bits,
                     tokenizer=header.get("tokenizer") or {}, source=path, **arrays)


def index_size(path: str) -> int:
    """Bytes on disk of the index directory's files."""
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
