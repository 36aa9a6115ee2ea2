"""Train nlpkit's shipped default model (nlpkit/lm/default/) from the shared Gutenberg novels.

A maintainer tool, not part of the package: it needs torch==2.13.0 (CPU), transformers and tokenizers.
Stages (run all with `all`, or one at a time; each reads what the previous one left in --work):

  prepare  clean the novels (tools/gutenberg.py), hold out Persuasion, train the byte-level BPE tokenizer
           with nlpkit's own trainer (nlpkit.bpe.trainer.train_bpe; vocab 4096, gpt2 pattern,
           special token <|endoftext|> = id 0), encode the training text to a uint16 token file
  train    a Llama model (RMSNorm, RoPE, SwiGLU, grouped-query attention) with transformers'
           LlamaForCausalLM, AdamW + cosine schedule, fixed seed; prints step/loss/tok/s/ETA,
           checkpoints every few minutes, `--resume` continues from the last checkpoint
  export   float32 safetensors + config.json + the tokenizer files + README.md into --out
  fixture  transformers' logits for a fixed text -> tests/fixtures/default_model_logits.npz
  eval     held-out bits per byte with torch (the model card also quotes nlpkit's own figure)

    /work/venv/bin/python tools/train_default_model.py all --time-budget 55
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
import gutenberg  # noqa: E402

EOT = gutenberg.EOT
FIXTURE_TEXT = "It was a dark and stormy night; the rain fell in torrents, except at occasional intervals."

MODEL = dict(vocab_size=4096, hidden_size=256, intermediate_size=688, num_hidden_layers=6,
             num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=512,
             rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=True)


def log(args, msg: str) -> None:
    """Print a timestamped progress line to stdout and append it to <work>/train.log."""
    line = time.strftime("%H:%M:%S ") + msg
    print(line, flush=True)
    with open(Path(args.work) / "progress.log", "a", encoding="utf-8") as f:
        f.write(line + "\n")


# ----------------------------------------------------------------------------------------- prepare

def train_tokenizer(text_file: Path, out_dir: Path, vocab_size: int, trainer: str) -> str:
    """Train the byte-level BPE on `text_file` into `out_dir`; returns which trainer ran ("nlpkit"|"hf")."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if trainer in ("nlpkit", "auto"):
        try:
            from nlpkit.bpe.trainer import train_bpe
        except ImportError:
            if trainer == "nlpkit":
                raise
        else:
            tok = train_bpe([str(text_file)], vocab_size=vocab_size, min_frequency=0,
                            special_tokens=(EOT,), pattern="gpt2")
            tok.save(str(out_dir))
            return "nlpkit"
    # Fallback (only while nlpkit's trainer did not exist yet): HF tokenizers with the settings
    # nlpkit's bpe-train reproduces merge for merge.
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tr = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=0, special_tokens=[EOT],
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train([str(text_file)], tr)
    tok.save(str(out_dir / "tokenizer.json"))
    tok.model.save(str(out_dir))
    return "hf"


def encode_stream(tokenizer_json: Path, docs: list[str]) -> np.ndarray:
    """[EOT, doc1 ..., EOT, doc2 ..., ...] as uint16 ids (HF tokenizers' encode_batch: fast, same ids)."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(tokenizer_json))
    eot = tok.token_to_id(EOT)
    out = []
    for enc in tok.encode_batch(docs, add_special_tokens=False):
        out.append(np.array([eot] + enc.ids, dtype=np.uint16))
    return np.concatenate(out)


def cmd_prepare(args) -> None:
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    docs = gutenberg.training_docs(args.data)
    text_file = work / "bpe_train.txt"
    text_file.write_text(gutenberg.bpe_training_text(docs), encoding="utf-8")
    which = train_tokenizer(text_file, work / "tokenizer", args.vocab_size, args.tokenizer_trainer)
    log(args, f"tokenizer trained by {which} in {time.time() - t0:.0f}s")
    (work / "tokenizer" / "TRAINED_BY").write_text(which + "\n")
    train = encode_stream(work / "tokenizer" / "tokenizer.json", docs)
    held = encode_stream(work / "tokenizer" / "tokenizer.json", [gutenberg.held_out_text(args.data)])
    np.save(work / "train_tokens.npy", train)
    np.save(work / "heldout_tokens.npy", held)
    nbytes = sum(len(d.encode("utf-8")) for d in docs)
    log(args, f"prepared: {len(docs)} training novels, {nbytes} bytes, {len(train)} tokens "
              f"({nbytes / len(train):.2f} bytes/token); held out {gutenberg.HELD_OUT_FILE}: {len(held)} tokens")


# ------------------------------------------------------------------------------------------- train

def build_model(seed: int):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(seed)
    cfg = LlamaConfig(**MODEL, bos_token_id=0, eos_token_id=0, attention_bias=False, mlp_bias=False)
    model = LlamaForCausalLM(cfg)
    model.config._attn_implementation = "sdpa"
    return model


def lr_at(progress: float, args) -> float:
    """Linear warmup over the first `warmup` fraction, then cosine from lr to lr*min_lr_frac."""
    if progress < args.warmup:
        return args.lr * progress / args.warmup
    p = min(1.0, (progress - args.warmup) / (1 - args.warmup))
    return args.lr * (args.min_lr_frac + (1 - args.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * p)))


def get_batch(tokens: np.ndarray, step: int, batch: int, seq: int, seed: int):
    """Random windows of seq+1 tokens; the rng is seeded by (seed, step) so a resumed run sees the same data."""
    import torch
    rng = np.random.default_rng([seed, step])
    starts = rng.integers(0, len(tokens) - seq - 1, size=batch)
    x = np.stack([tokens[s: s + seq + 1] for s in starts]).astype(np.int64)  # [b, seq+1]
    x = torch.from_numpy(x)
    return x[:, :-1], x[:, 1:]


def heldout_loss(model, held: np.ndarray, seq: int = 512, max_windows: int = 8) -> float:
    """Mean next-token NLL (nats) over the first `max_windows` disjoint windows of the held-out tokens."""
    import torch
    model.eval()
    tot, n = 0.0, 0
    with torch.no_grad():
        for w in range(min(max_windows, (len(held) - 1) // seq)):
            x = torch.from_numpy(held[w * seq: w * seq + seq + 1].astype(np.int64))[None]
            logits = model(x[:, :-1]).logits
            tot += torch.nn.functional.cross_entropy(logits[0], x[0, 1:], reduction="sum").item()
            n += seq
    model.train()
    return tot / n


def cmd_train(args) -> None:
    import torch
    torch.set_num_threads(args.threads)
    work = Path(args.work)
    tokens = np.load(work / "train_tokens.npy")
    held = np.load(work / "heldout_tokens.npy")
    model = build_model(args.seed)
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    ckpt_path = work / "ckpt.pt"
    state = {"step": 0, "elapsed": 0.0, "max_steps": args.steps, "tokens_seen": 0}
    if args.resume and ckpt_path.exists():
        ck = torch.load(ckpt_path, weights_only=False)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        state = ck["state"]
        log(args, f"resumed at step {state['step']} ({state['elapsed']:.0f}s trained)")
    log(args, f"model: {n_params} parameters; {len(tokens)} training tokens; batch {args.batch_tokens} tokens")
    budget = args.time_budget * 60.0

    def save():
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "state": state}, ckpt_path)

    model.train()
    t_last_ckpt = time.time()
    t_run = time.time() - state["elapsed"]
    window_t, window_tok = time.time(), 0
    while True:
        step = state["step"]
        elapsed = time.time() - t_run
        max_steps = state["max_steps"]
        progress = max(step / max_steps if max_steps else 0.0, elapsed / budget)
        if progress >= 1.0:
            break
        seq = args.seq_len if progress < args.long_from else args.max_seq_len
        batch = max(1, args.batch_tokens // seq)
        lr = lr_at(progress, args)
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = get_batch(tokens, step, batch, seq, args.seed)
        logits = model(x).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        opt.step()
        state["step"] = step + 1
        state["tokens_seen"] += batch * seq
        state["elapsed"] = time.time() - t_run
        window_tok += batch * seq
        if state["max_steps"] == 0 and state["step"] == args.calibrate_steps:
            # Fix the step count from the measured speed, so the cosine ends inside the time budget.
            per_step = state["elapsed"] / state["step"]
            state["max_steps"] = int(budget / per_step / 1.08)  # 8% slack: the 512 phase is slower
            log(args, f"calibrated: {per_step:.2f}s/step -> max_steps {state['max_steps']}")
        if state["step"] % args.log_every == 0:
            dt = time.time() - window_t
            tps = window_tok / dt
            ms = state["max_steps"] or 1
            eta = min(budget - state["elapsed"], (ms - state["step"]) * dt / args.log_every)
            log(args, f"step {state['step']}/{state['max_steps']} seq {seq} loss {loss.item():.4f} "
                      f"lr {lr:.2e} {tps:.0f} tok/s elapsed {state['elapsed'] / 60:.1f}m ETA {eta / 60:.1f}m")
            window_t, window_tok = time.time(), 0
        if state["step"] % args.eval_every == 0:
            hl = heldout_loss(model, held, max_windows=4)
            log(args, f"step {state['step']} held-out loss {hl:.4f}")
        if time.time() - t_last_ckpt > args.ckpt_minutes * 60:
            save()
            t_last_ckpt = time.time()
    save()
    hl = heldout_loss(model, held, max_windows=16)
    log(args, f"done: {state['step']} steps, {state['tokens_seen']} tokens, {state['elapsed'] / 60:.1f} min; "
              f"held-out loss (16x512) {hl:.4f}")


# ------------------------------------------------------------------------------------------ export

def cmd_export(args) -> None:
    import torch
    work, out = Path(args.work), Path(args.out)
    model = build_model(args.seed)
    ck = torch.load(work / "ckpt.pt", weights_only=False)
    model.load_state_dict(ck["model"])
    out.mkdir(parents=True, exist_ok=True)
    model.generation_config.bos_token_id = 0
    model.generation_config.eos_token_id = 0
    model.save_pretrained(str(out), safe_serialization=True)
    gen = out / "generation_config.json"
    if gen.exists():
        gen.unlink()  # config.json says all nlpkit needs; keep the directory minimal
    cfg = json.loads((out / "config.json").read_text())
    cfg["rope_theta"] = MODEL["rope_theta"]  # also at top level, for loaders that predate rope_parameters
    cfg["architectures"] = ["LlamaForCausalLM"]
    cfg["bos_token_id"], cfg["eos_token_id"] = 0, 0
    (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    for name in ("tokenizer.json", "vocab.json", "merges.txt"):
        (out / name).write_bytes((work / "tokenizer" / name).read_bytes())
    (out / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": EOT, "eos_token": EOT,
         "unk_token": None, "add_bos_token": False, "model_max_length": 512}, indent=2) + "\n")
    (out / "training_state.json").write_text(json.dumps(ck["state"], indent=2) + "\n")
    print(f"exported to {out}")


def cmd_fixture(args) -> None:
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM
    out = Path(args.out)
    model = LlamaForCausalLM.from_pretrained(str(out), dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(str(out))
    ids = tok(FIXTURE_TEXT, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].numpy().astype(np.float32)  # [t, vocab]
    path = REPO / "tests" / "fixtures" / "default_model_logits.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, text=np.array(FIXTURE_TEXT), ids=np.array(ids, dtype=np.int64), logits=logits)
    print(f"wrote {path}: {len(ids)} tokens, logits {logits.shape}")


def cmd_eval(args) -> None:
    """Held-out bits per byte with torch: disjoint 512-token windows, each starting after <|endoftext|>."""
    import torch
    torch.set_num_threads(args.threads)
    from tokenizers import Tokenizer
    from transformers import LlamaForCausalLM
    out = Path(args.out)
    model = LlamaForCausalLM.from_pretrained(str(out), dtype=torch.float32).eval()
    text = gutenberg.held_out_text(args.data)
    if args.eval_bytes:
        text = text.encode("utf-8")[: args.eval_bytes].decode("utf-8", errors="ignore")
    ids = Tokenizer.from_file(str(out / "tokenizer.json")).encode(text, add_special_tokens=False).ids
    nll, n = 0.0, 0
    with torch.no_grad():
        for s in range(0, len(ids), 511):
            chunk = [0] + ids[s: s + 511]
            x = torch.tensor([chunk])
            logits = model(x[:, :-1]).logits[0]
            nll += torch.nn.functional.cross_entropy(logits, x[0, 1:], reduction="sum").item()
            n += len(chunk) - 1
    nbytes = len(text.encode("utf-8"))
    print(json.dumps({"tokens": n, "bytes": nbytes, "nll_per_token": nll / n, "token_ppl": math.exp(nll / n),
                      "bits_per_byte": nll / math.log(2) / nbytes}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("stage", choices=["prepare", "train", "export", "fixture", "eval", "all"])
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data"), help="shared data folder")
    ap.add_argument("--work", default=os.environ.get("NLPKIT_TRAIN_WORK", "/tmp/nlpkit-default-model"),
                    help="scratch folder for text, tokens, checkpoints (not the repo)")
    ap.add_argument("--out", default=str(REPO / "nlpkit" / "lm" / "default"))
    ap.add_argument("--vocab-size", type=int, default=4096)
    ap.add_argument("--tokenizer-trainer", choices=["nlpkit", "hf", "auto"], default="nlpkit")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--time-budget", type=float, default=55.0, help="minutes of training")
    ap.add_argument("--steps", type=int, default=0, help="optimizer steps (0: calibrate from the time budget)")
    ap.add_argument("--calibrate-steps", type=int, default=20)
    ap.add_argument("--batch-tokens", type=int, default=4096)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--max-seq-len", type=int, default=512)
    ap.add_argument("--long-from", type=float, default=0.85, help="train at --max-seq-len after this fraction")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup", type=float, default=0.03, help="fraction of training")
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", type=float, default=1.0)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--ckpt-minutes", type=float, default=4.0)
    ap.add_argument("--eval-bytes", type=int, default=0, help="eval: score only the first N bytes (0: all)")
    ap.add_argument("--resume", action="store_true")
    args = ap.parse_args()
    Path(args.work).mkdir(parents=True, exist_ok=True)
    stages = ["prepare", "train", "export", "fixture", "eval"] if args.stage == "all" else [args.stage]
    for s in stages:
        globals()[f"cmd_{s}"](args)


if __name__ == "__main__":
    main()
