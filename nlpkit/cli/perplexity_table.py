"""How `nlpkit perplexity`'s records read in a table (machine formats print them as they are).

- A figure with its uncertainty beside it (`token_ppl` and `token_ppl_unc`, ...) is one cell, `34.88 ± 0.52`:
  the uncertainty to 2 significant digits, the figure to the same place.
- `--compare` records (nlpkit.lm.perplexity.comparison) turn into one line per statistic and a column per file, with
  llama.cpp's labels, digits and percentages (Δp and same top), so the summary reads at 80 columns.
"""

from __future__ import annotations

import math
import os

from nlpkit.lm.perplexity.divergence import DP_PERCENTILES, KLD_PERCENTILES

UNCERTAINTY = {"mean_nll": "mean_nll_se", "token_ppl": "token_ppl_unc", "ppl": "ppl_unc"}


def plus_minus(value: float, unc: float | None) -> str:
    """`value ± unc`: the uncertainty to 2 significant digits, the value to the same place
    (`34.8812, 0.5196 -> '34.88 ± 0.52'`); the value alone (4 decimals) without a positive uncertainty."""
    if unc is None or not (math.isfinite(unc) and unc > 0) or not math.isfinite(value):
        return f"{value:.4f}"
    places = max(0, 1 - math.floor(math.log10(unc)))
    return f"{value:.{places}f} ± {unc:.{places}f}"


def merged_columns(columns: list[str]) -> list[str]:
    """The table's columns: those of the records without the uncertainties shown beside their figures."""
    merged = {UNCERTAINTY[c] for c in columns if c in UNCERTAINTY and UNCERTAINTY[c] in columns}
    return [c for c in columns if c not in merged]


def merged_record(rec: dict) -> dict:
    """A record with each figure that has its uncertainty shown as `value ± uncertainty`."""
    out = dict(rec)
    for col, unc in UNCERTAINTY.items():
        if unc in rec and isinstance(rec.get(col), float):
            out[col] = plus_minus(rec[col], rec[unc])
    return out


def _pm(v: float, u: float, digits: int = 6, pct: bool = False) -> str:
    scale, unit = (100.0, " %") if pct else (1.0, "")
    return f"{v * scale:.{digits}f} ± {u * scale:.{digits}f}{unit}"


# (label, cell) per statistic of a --compare record: llama.cpp's labels and digits
COMPARE_ROWS = ([("tokens", lambda r: str(r["tokens"])),
                 ("PPL", lambda r: _pm(r["ppl"], r["ppl_unc"], 4)),
                 ("PPL(base)", lambda r: _pm(r["base_ppl"], r["base_ppl_unc"], 4)),
                 ("Cor(ln PPL)", lambda r: f"{100 * r['ln_ppl_cor']:.2f} %"),
                 ("ln(PPL/PPL(base))", lambda r: _pm(r["ln_ppl_ratio"], r["ln_ppl_ratio_unc"])),
                 ("PPL/PPL(base)", lambda r: _pm(r["ppl_ratio"], r["ppl_ratio_unc"])),
                 ("PPL-PPL(base)", lambda r: _pm(r["ppl_diff"], r["ppl_diff_unc"], 4)),
                 ("Mean KLD", lambda r: _pm(r["kld"], r["kld_unc"])),
                 ("Maximum KLD", lambda r: f"{r['kld_max']:.6f}")]
                + [(f"{q:g}% KLD", lambda r, q=q: f"{r[f'kld_p{q:g}']:.6f}") for q in KLD_PERCENTILES]
                + [("Minimum KLD", lambda r: f"{r['kld_min']:.6f}"),
                   ("Mean Δp", lambda r: _pm(r["dp"], r["dp_unc"], 3, True)),
                   ("Maximum Δp", lambda r: f"{100 * r['dp_max']:.3f} %")]
                + [(f"{q:g}% Δp", lambda r, q=q: f"{100 * r[f'dp_p{q:g}']:.3f} %") for q in DP_PERCENTILES]
                + [("Minimum Δp", lambda r: f"{100 * r['dp_min']:.3f} %"),
                   ("RMS Δp", lambda r: _pm(r["rms_dp"], r["rms_dp_unc"], 3, True)),
                   ("Same top p", lambda r: _pm(r["same_top"], r["same_top_unc"], 3, True))])


def compare_table(records: list[dict]) -> tuple[list[str], list[str], list[dict]]:
    """(columns, labels, rows) of the --compare table: a row per statistic, a column per file (basenames)."""
    columns = ["statistic"] + [f"c{k}" for k in range(len(records))]
    labels = [""] + [os.path.basename(str(r["file"]).rstrip("/")) or str(r["file"]) for r in records]
    rows = [{"statistic": label, **{f"c{k}": cell(r) for k, r in enumerate(records)}} for label, cell in COMPARE_ROWS]
    return columns, labels, rows
