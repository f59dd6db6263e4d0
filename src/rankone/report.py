"""The report stage: figures, `report.md` and a self-contained `index.html`.

Reads the analysis tables only. Every number in the report is computed from this
study's outputs; the verdict sentences are generated from the verdict table.
"""

from __future__ import annotations

import html
import math
import time
from pathlib import Path

import pandas as pd

from rankone.config import StudyConfig, lora_rank
from rankone.io import atomic_path, git_state, package_versions, read_json
from rankone.paths import Layout

FIGURES = {
    "rl_curves.png": "RL reward per step, each method at its best learning rate (mean over seeds, band = min..max).",
    "lr_sweep.png": "Validation score against learning rate per method (mean over seeds, bars = min..max).",
    "sft_curves.png": "SFT training loss per step, each rank at its best learning rate (mean over seeds).",
    "rl_bits.png": "RL information per step, each method at its best lr (mean over seeds): entropy of the batch's "
                   "rewards and of a group's rewards (what its advantages carry), and the cumulative bound.",
    "information.png": "Information in bits against trainable parameters, with the capacity reference line.",
    "lr_vs_rank.png": "Best learning rate per LoRA rank (chosen on val); dashed: FullFT's best, dotted: 10x FullFT's.",
    "updates.png": "FullFT updates: share of parameters changed three ways, and per-matrix update rank / full rank.",
    "capacity.png": "Capacity chart: bits stored by SFT on facts tables of each size (filled: at parity with FullFT, "
                    "open: falls off) and RL information bounds, against trainable parameters; dashed: capacity line.",
    "capacity_falloff.png": "Share of the facts table stored against table size, per method at its best lr; "
                            "open markers: LoRA falls off FullFT (test gap beyond the SFT parity threshold).",
}


def method_order(methods) -> list[str]:
    return sorted(set(methods), key=lambda m: (lora_rank(m) is None, lora_rank(m) or 0, m))


def _colors(methods):
    import matplotlib.pyplot as plt

    cmap = plt.get_cmap("viridis")
    ordered = method_order(methods)
    lora = [m for m in ordered if m != "fullft"]
    colors = {m: cmap(0.15 + 0.7 * i / max(1, len(lora) - 1)) for i, m in enumerate(lora)}
    colors["fullft"] = "black"
    return colors


def _save(fig, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_curves(curves: pd.DataFrame, best: pd.DataFrame, regime: str, ylabel: str, path: Path) -> None:
    import matplotlib.pyplot as plt

    data = curves[curves.regime == regime].merge(best, on=["regime", "model", "method", "lr"])
    models = sorted(data.model.unique())
    fig, axes = plt.subplots(1, max(1, len(models)), figsize=(5.5 * max(1, len(models)), 4), squeeze=False)
    colors = _colors(data.method)
    for ax, model in zip(axes[0], models):
        for method in method_order(data[data.model == model].method):
            d = data[(data.model == model) & (data.method == method)]
            per_step = d.groupby("step")["value"]
            window = max(1, len(per_step) // 15)
            mean = per_step.mean().rolling(window, min_periods=1).mean()
            low = per_step.min().rolling(window, min_periods=1).mean()
            high = per_step.max().rolling(window, min_periods=1).mean()
            lr = d.lr.iloc[0]
            ax.plot(mean.index, mean.values, color=colors[method], label=f"{method} (lr {lr:g})")
            ax.fill_between(mean.index, low.values, high.values, color=colors[method], alpha=0.12)
        ax.set_title(model)
        ax.set_xlabel("step")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    _save(fig, path)


def plot_lr_sweep(runs: pd.DataFrame, path: Path) -> None:
    import matplotlib.pyplot as plt

    panels = sorted(runs.groupby(["regime", "model"]).groups)
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
    colors = _colors(runs.method)
    labels = {"rl": "val mean reward", "sft": "val score = -NLL (nats/token)"}
    for ax, (regime, model) in zip(axes[0], panels):
        d = runs[(runs.regime == regime) & (runs.model == model)]
        for method in method_order(d.method):
            g = d[d.method == method].groupby("lr")["val_score"]
            mean, low, high = g.mean(), g.min(), g.max()
            ax.errorbar(mean.index, mean.values, yerr=[mean - low, high - mean], marker="o", capsize=3,
                        color=colors[method], label=method)
            bad = d[(d.method == method) & (d.status != "completed")]
            if len(bad):
                ax.scatter(bad.lr, [ax.get_ylim()[0]] * len(bad), marker="x", color=colors[method])
        ax.set_xscale("log")
        ax.set_title(f"{regime.upper()} · {model}")
        ax.set_xlabel("learning rate")
        ax.set_ylabel(labels[regime])
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    _save(fig, path)


def plot_rl_bits(curves: pd.DataFrame, best: pd.DataFrame, path: Path) -> None:
    """Per model: per-step reward / advantage entropy (bits) and the cumulative information bound."""
    import matplotlib.pyplot as plt

    data = curves[curves.regime == "rl"].merge(best, on=["regime", "model", "method", "lr"])
    models = sorted(data.model.unique())
    fig, axes = plt.subplots(2, max(1, len(models)), figsize=(5.5 * max(1, len(models)), 7), squeeze=False)
    colors = _colors(data.method)
    for col, model in enumerate(models):
        top, bottom = axes[0][col], axes[1][col]
        for method in method_order(data[data.model == model].method):
            per_step = data[(data.model == model) & (data.method == method)].groupby("step")
            window = max(1, len(per_step) // 15)
            smooth = per_step[["reward_entropy_bits", "advantage_entropy_bits"]].mean().rolling(
                window, min_periods=1).mean()
            top.plot(smooth.index, smooth.reward_entropy_bits, color=colors[method], label=f"{method}: batch rewards")
            top.plot(smooth.index, smooth.advantage_entropy_bits, color=colors[method], ls="--",
                     label=f"{method}: group rewards (advantages)")
            bound = per_step.info_bound_bits.mean()
            bottom.plot(bound.index, bound.values, color=colors[method], label=method)
        top.set_title(model)
        top.set_ylabel("entropy per episode (bits)")
        bottom.set_ylabel("cumulative information bound (bits)")
        for ax in (top, bottom):
            ax.set_xlabel("step")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=6)
    _save(fig, path)


def plot_information(info: pd.DataFrame, bits_per_param: float, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 5))
    xs = info.trainable_parameters
    grid = [xs.min() / 2, xs.max() * 2]
    ax.plot(grid, [g * bits_per_param for g in grid], "k--", lw=1, label=f"capacity ≈ {bits_per_param:g} bits/parameter")
    markers = {m: k for m, k in zip(sorted(info.model.unique()), "os^vD")}
    rl, sft = info[info.regime == "rl"], info[info.regime == "sft"]
    for model, marker in markers.items():
        r = rl[rl.model == model]
        ax.scatter(r.trainable_parameters, r.info_bound_bits, marker=marker, color="tab:blue",
                   label=f"RL info bound (episodes × reward entropy) · {model}")
        s = sft[sft.model == model]
        ax.scatter(s.trainable_parameters, s.bits_absorbed.clip(lower=1), marker=marker, color="tab:orange",
                   label=f"SFT bits absorbed (NLL drop) · {model}")
    if "sft_dataset_bits" in info and info.sft_dataset_bits.notna().any():
        ax.axhline(info.sft_dataset_bits.dropna().iloc[0], color="tab:red", lw=1, label="SFT dataset bits")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("trainable parameters")
    ax.set_ylabel("bits")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    _save(fig, path)


def plot_capacity(chart: pd.DataFrame, table: pd.DataFrame, bits_per_param: float, path: Path) -> None:
    """One panel per model: SFT bits stored per table size and RL bounds on one log-log chart."""
    import matplotlib.pyplot as plt

    models = sorted(chart.model.unique())
    fig, axes = plt.subplots(1, len(models), figsize=(6.5 * len(models), 5), squeeze=False)
    sizes = sorted(table.n_facts.unique())
    cmap = plt.get_cmap("plasma")
    size_color = {n: cmap(0.1 + 0.7 * i / max(1, len(sizes) - 1)) for i, n in enumerate(sizes)}
    xs = chart.trainable_parameters
    grid = [xs.min() / 2, xs.max() * 2]
    for ax, model in zip(axes[0], models):
        ax.plot(grid, [g * bits_per_param for g in grid], "k--", lw=1,
                label=f"capacity ≈ {bits_per_param:g} bits/parameter")
        for n in sizes:
            d = table[(table.model == model) & (table.n_facts == n)].sort_values("trainable_parameters")
            color = size_color[n]
            ax.plot(d.trainable_parameters, d.bits_stored.clip(lower=1), "-", color=color, alpha=0.5)
            off = d.falls_off.astype(bool)
            ax.scatter(d[~off].trainable_parameters, d[~off].bits_stored.clip(lower=1), color=color,
                       label=f"SFT stored · {n:,} facts")
            ax.scatter(d[off].trainable_parameters, d[off].bits_stored.clip(lower=1), facecolors="none",
                       edgecolors=color)
            ax.axhline(d.dataset_bits.iloc[0], color=color, ls=":", lw=1)
        ax.scatter([], [], facecolors="white", edgecolors="gray", label="open: LoRA falls off FullFT")
        rl = chart[(chart.model == model) & (chart.regime == "rl")]
        if len(rl):
            ax.scatter(rl.trainable_parameters, rl.bits, marker="x", color="tab:blue",
                       label="RL information bound (this study's RL runs)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("trainable parameters")
        ax.set_ylabel("bits (dotted: table size in bits)")
        ax.set_title(model)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    _save(fig, path)


def plot_capacity_falloff(table: pd.DataFrame, path: Path) -> None:
    import matplotlib.pyplot as plt

    models = sorted(table.model.unique())
    fig, axes = plt.subplots(1, len(models), figsize=(5.5 * len(models), 4), squeeze=False)
    colors = _colors(table.method)
    for ax, model in zip(axes[0], models):
        d = table[table.model == model]
        for method in method_order(d.method):
            m = d[d.method == method].sort_values("n_facts")
            off = m.falls_off.astype(bool)
            ax.plot(m.n_facts, m.share_stored, "-", color=colors[method], label=method)
            ax.scatter(m[~off].n_facts, m[~off].share_stored, color=colors[method])
            ax.scatter(m[off].n_facts, m[off].share_stored, facecolors="white", edgecolors=colors[method], zorder=3)
        ax.scatter([], [], facecolors="white", edgecolors="gray", label="open: falls off FullFT")
        ax.set_xscale("log", base=2)
        sizes = sorted(d.n_facts.unique())
        ax.set_xticks(sizes, [f"{n:,}" for n in sizes])
        ax.set_ylim(min(0.0, d.share_stored.min()) - 0.02, 1.05)  # 1 = the whole table stored
        ax.set_xlabel("facts in the table")
        ax.set_ylabel("share of the table's bits stored")
        ax.set_title(model)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    _save(fig, path)


def capacity_findings(falloff: pd.DataFrame) -> list[str]:
    """One generated sentence per model: where LoRA ranks fall off FullFT as the table grows."""
    out = []
    for model, g in falloff.groupby("model"):
        parts = []
        for r in g.sort_values("n_facts").itertuples():
            keeps = "none" if pd.isna(r.smallest_rank_keeping_up) else f"r{int(r.smallest_rank_keeping_up)}"
            parts.append(f"{r.n_facts:,} facts ({r.dataset_bits:,.0f} bits, FullFT stored "
                         f"{r.fullft_bits_stored:,.0f}): ranks falling off: {r.ranks_falling_off}; smallest rank "
                         f"keeping up: {keeps}")
        out.append(f"**{model}** — " + "; ".join(parts) + ".")
    return out


def capacity_section(cfg: StudyConfig, a: Path, out: Path) -> list[tuple[str, list]]:
    """The capacity experiment's section and figures (none without a capacity section)."""
    if cfg.capacity is None:
        return []
    table, falloff, chart = (pd.read_csv(a / f"{n}.csv") for n in ("capacity", "capacity_falloff", "capacity_chart"))
    plot_capacity(chart, table, cfg.analysis.bits_per_param, out / "capacity.png")
    plot_capacity_falloff(table, out / "capacity_falloff.png")
    per_param = table.groupby("method").bits_per_parameter.max()
    per_param = per_param[method_order(per_param.index)]
    show = ["model", "n_facts", "method", "lr", "at_grid_edge", "trainable_parameters", "dataset_bits",
            "bits_stored", "bits_absorbed", "share_stored", "bits_per_parameter", "gap", "verdict", "falls_off"]
    return [("Capacity", [
        f"SFT on random facts tables of {', '.join(f'{n:,}' for n in cfg.capacity.n_facts)} keys "
        f"({cfg.capacity.probes} facts probed per split, {len(cfg.capacity.seeds)} seed(s)), every method at its "
        "best lr on val. Bits stored = the table's bits minus the final total train NLL in bits (at least 0); bits "
        "absorbed = the drop in train NLL from the base model (it also counts format the base unlearns). "
        "A LoRA rank falls off when its test gap "
        f"to FullFT is at or below -{cfg.analysis.parity_threshold['sft']:g} nats/token (the SFT parity threshold).",
        *capacity_findings(falloff),
        "Most bits stored per trainable parameter at any size: "
        + ", ".join(f"{m}: {v:.3f}" for m, v in per_param.items())
        + f" (reference {cfg.analysis.bits_per_param:g}).",
        ("figure", "capacity.png"), ("figure", "capacity_falloff.png"), falloff.round(1), table[show].round(4),
    ])]


def plot_lr_vs_rank(table: pd.DataFrame, path: Path) -> None:
    import matplotlib.pyplot as plt

    panels = sorted(table.groupby(["regime", "model"]).groups) if len(table) else []
    fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(4.5 * max(1, len(panels)), 3.8), squeeze=False)
    for ax, (regime, model) in zip(axes[0], panels):
        d = table[(table.regime == regime) & (table.model == model)].copy()
        d["rank"] = d.method.map(lora_rank)
        d = d.sort_values("rank")
        ax.plot(d["rank"], d.best_lr, "o-", label="LoRA best lr")
        full = d.fullft_best_lr.iloc[0]
        ax.axhline(full, color="black", ls="--", lw=1, label=f"FullFT best lr ({full:g})")
        ax.axhline(10 * full, color="gray", ls=":", lw=1, label="10 x FullFT")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("LoRA rank")
        ax.set_ylabel("best learning rate")
        ax.set_title(f"{regime.upper()} · {model}")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    _save(fig, path)


def plot_updates(shares: pd.DataFrame, matrices: pd.DataFrame, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    if len(shares):
        mean = shares.groupby(["regime", "model"])[
            ["share_changed_exact", "share_changed_atol", "share_changed_bf16"]].mean()
        mean.columns = ["exact (fp32)", "|delta| > 1e-5 (fp32)", "after bf16 cast"]
        (100 * mean).plot.bar(ax=left, rot=0)
        left.set_xticklabels([f"{r.upper()}\n{m}" for r, m in mean.index], fontsize=8)
        left.set_ylabel("parameters changed (%)")
        left.set_xlabel("")
        left.legend(fontsize=8)
    if len(matrices):
        m = matrices.assign(rank_ratio=matrices["rank"] / matrices.full_rank,
                            eff_ratio=matrices.effective_rank / matrices.full_rank)
        groups = sorted(m.groupby(["regime", "model"]).groups)
        for i, key in enumerate(groups):
            g = m[(m.regime == key[0]) & (m.model == key[1])]
            right.scatter([i - 0.1] * len(g), g.rank_ratio, marker="o", color="tab:blue",
                          label="matrix_rank / full rank" if i == 0 else None, alpha=0.6)
            right.scatter([i + 0.1] * len(g), g.eff_ratio, marker="x", color="tab:orange",
                          label="effective rank / full rank" if i == 0 else None, alpha=0.6)
        right.set_xticks(range(len(groups)), [f"{r.upper()}\n{mo}" for r, mo in groups], fontsize=8)
        right.set_ylim(0, 1.05)
        right.set_ylabel("fraction of full rank (per matrix)")
        right.legend(fontsize=8)
    for ax in (left, right):
        ax.grid(alpha=0.3)
    _save(fig, path)


def layer_findings(table: pd.DataFrame) -> list[str]:
    """Generated comparison with the original finding: attention-only underperforms, MLP-only ~ all."""
    out = []
    for r in table.sort_values(["regime", "model", "rank", "scope"]).itertuples():
        expected = "worse" if r.scope == "attention" else "parity"
        finding = "attention-only underperforms" if expected == "worse" else "MLP-only matches all layers"
        if r.verdict == expected:
            relation = f"this agrees with the original finding ({finding})"
        elif r.verdict == "inconclusive":
            side = "below" if r.gap_to_all_linear < 0 else "above"
            relation = (f"this neither confirms nor contradicts the original finding ({finding}): the point estimate "
                        f"is {side} all-linear, but the interval covers 0")
        else:
            relation = f"this differs from the original finding ({finding})"
        out.append(f"{r.regime.upper()} · {r.model} · rank {r.rank}: {r.scope}-only vs all-linear: {r.verdict} "
                   f"(gap {r.gap_to_all_linear:+.3f}, CI [{r.ci_low:+.3f}, {r.ci_high:+.3f}]); {relation}.")
    return out


def findings(verdicts: pd.DataFrame) -> list[str]:
    """One generated sentence per (regime, model)."""
    out = []
    names = {"rl": "RL", "sft": "SFT"}
    for (regime, model), g in verdicts.groupby(["regime", "model"]):
        parts = [f"{row.method}: {row.verdict} (gap {row.gap:+.3f}, CI [{row.ci_low:+.3f}, {row.ci_high:+.3f}])"
                 for row in g.sort_values("rank").itertuples()]
        out.append(f"**{names[regime]} · {model}** — " + "; ".join(parts) + ".")
    return out


def run(cfg: StudyConfig, at: Layout) -> None:
    import matplotlib

    matplotlib.use("Agg")
    a = at.analysis
    runs = pd.read_csv(a / "runs.csv")
    curves = pd.read_csv(a / "curves.csv")
    best = pd.read_csv(a / "best_lr.csv")
    verdicts = pd.read_csv(a / "verdicts.csv")
    info = pd.read_csv(a / "information.csv")
    out = at.report
    out.mkdir(parents=True, exist_ok=True)
    keys = ["regime", "model", "method", "lr"]
    plot_curves(curves, best[keys], "rl", "mean reward per step", out / "rl_curves.png")
    plot_curves(curves, best[keys], "sft", "training loss (nats/token)", out / "sft_curves.png")
    plot_lr_sweep(runs, out / "lr_sweep.png")
    plot_information(info, cfg.analysis.bits_per_param, out / "information.png")
    plot_rl_bits(curves, best[keys], out / "rl_bits.png")
    lr_rank = _read(a / "lr_vs_rank.csv")
    plot_lr_vs_rank(lr_rank, out / "lr_vs_rank.png")
    updates = {name: _read(a / f"update_{name}.csv") for name in ("shares", "matrices", "overlap")}
    plot_updates(updates["shares"], updates["matrices"], out / "updates.png")

    early, layer_table = _read(a / "early_curves.csv"), _read(a / "layers.csv")
    sections = build_sections(cfg, at, runs, best, verdicts, info, lr_rank, early, updates, layer_table)
    with atomic_path(out / "report.md") as tmp:
        tmp.write_text(to_markdown(cfg, sections))
    with atomic_path(out / "index.html") as tmp:
        tmp.write_text(to_html(cfg, sections))


def build_sections(cfg, at, runs, best, verdicts, info, lr_rank, early, updates, layer_table) -> list[tuple[str, list]]:
    """(heading, blocks); a block is a str paragraph, a DataFrame, or ("figure", file)."""
    rollouts = []
    for model in cfg.models:
        s = read_json(at.rollouts(model) / "summary.json")
        base = read_json(at.model(model) / "rankone.json")
        rollouts.append({"model": model, "parameters": base["parameters"],
                         "base pass@1 (pretrain check)": base.get("base_pass_at_1"),
                         "train pass@1": s["train"]["pass_at_1"], "val pass@1": s["val"]["pass_at_1"],
                         f"val pass@{s['samples_per_prompt']}": s["val"][f"pass_at_{s['samples_per_prompt']}"],
                         "val zero-variance share": s["val"]["zero_variance_share"]})
    show = ["regime", "model", "method", "lr", "gap", "ci_low", "ci_high", "seeds", "threshold", "verdict"]
    diverged = runs[runs.status != "completed"][["regime", "model", "method", "lr", "seed", "status"]]
    git = git_state()
    prov = pd.DataFrame([
        {"item": "config digest", "value": cfg.digest()},
        {"item": "git commit", "value": f"{git['commit']}{' (dirty)' if git['dirty'] else ''}"},
        {"item": "generated", "value": time.strftime("%Y-%m-%d %H:%M:%S %Z")},
        *({"item": k, "value": v} for k, v in package_versions().items()),
    ])
    sft_bits = info.sft_dataset_bits.dropna().iloc[0] if "sft_dataset_bits" in info and info.sft_dataset_bits.notna().any() else math.nan
    return [
        ("Verdicts", [
            "Gap = method's test score minus FullFT's, each at its own best learning rate chosen on val, paired "
            f"by seed; interval at {cfg.analysis.confidence:.0%}. Parity threshold fixed in the config. "
            "RL score: mean reward; SFT score: -NLL per answer token (nats).",
            *findings(verdicts), verdicts[show].round(4) if len(verdicts) else "No LoRA-vs-FullFT pairs.",
        ]),
        ("RL learning curves", [("figure", "rl_curves.png")]),
        ("Learning-rate sweeps", [("figure", "lr_sweep.png"), best.round(4)]),
        ("Learning rate vs rank", [
            "Best lr per rank (on val), its ratio to FullFT's best (the original fits found ~10x), and the spread "
            "of LoRA's best lrs across ranks in decades. Early curves: the largest gap between the ranks' mean "
            f"curves over the first {cfg.analysis.early_steps} steps at each lr all ranks ran.",
            ("figure", "lr_vs_rank.png"), lr_rank.round(5), early.round(4),
        ]),
        ("Update structure (FullFT)", [
            "delta = after - before for every weight, FullFT at its best lr. Shares changed: exactly, beyond "
            "atol 1e-5 in fp32, and after a bf16 cast. Rank per matrix by torch.linalg.matrix_rank (fp32); "
            "effective rank = exp(entropy of normalised singular values). Overlap: Jaccard of the changed sets "
            "(atol) across seeds against independent sets of the same densities.",
            ("figure", "updates.png"), updates["shares"].round(4), updates["overlap"].round(4),
            _matrix_summary(updates["matrices"]),
        ]),
        *([("Which layers", [*layer_findings(layer_table), layer_table.round(4)])] if len(layer_table) else []),
        ("SFT loss curves", [("figure", "sft_curves.png")]),
        ("Information vs capacity", [
            f"SFT dataset: {sft_bits:,.0f} bits. Capacity line: {cfg.analysis.bits_per_param:g} bits per trainable "
            "parameter (Allen-Zhu & Li). RL bound: cumulative sum over groups of group size × reward entropy.",
            ("figure", "information.png"), ("figure", "rl_bits.png"), info.round(1),
        ]),
        *capacity_section(cfg, at.analysis, at.report),
        ("Base policy", [pd.DataFrame(rollouts).round(3)]),
        ("Runs", [f"{len(runs)} runs, {len(diverged)} not completed.",
                  *( [diverged] if len(diverged) else [] )]),
        ("Provenance", [prov]),
    ]


def _read(path: Path) -> pd.DataFrame:
    """A CSV that may hold no rows (e.g. a study without FullFT runs)."""
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


def _matrix_summary(matrices: pd.DataFrame) -> pd.DataFrame:
    if not len(matrices):
        return matrices
    m = matrices.assign(rank_over_full=matrices["rank"] / matrices.full_rank,
                        effective_over_full=matrices.effective_rank / matrices.full_rank)
    return m.groupby(["regime", "model"], as_index=False)[
        ["rank_over_full", "effective_over_full", "share_atol"]].mean().round(4)


def to_markdown(cfg: StudyConfig, sections) -> str:
    lines = [f"# rankone report: {cfg.experiment}", ""]
    for heading, blocks in sections:
        lines += [f"## {heading}", ""]
        for b in blocks:
            if isinstance(b, pd.DataFrame):
                lines += [b.to_markdown(index=False), ""]
            elif isinstance(b, tuple):
                lines += [f"![{FIGURES[b[1]]}]({b[1]})", "", f"*{FIGURES[b[1]]}*", ""]
            else:
                lines += [b, ""]
    return "\n".join(lines)


def to_html(cfg: StudyConfig, sections) -> str:
    import base64

    body = [f"<h1>rankone report: {html.escape(cfg.experiment)}</h1>"]
    for heading, blocks in sections:
        body.append(f"<h2>{html.escape(heading)}</h2>")
        for b in blocks:
            if isinstance(b, pd.DataFrame):
                body.append(b.to_html(index=False, border=0, classes="t"))
            elif isinstance(b, tuple):
                data = base64.b64encode((Path(cfg.reports_dir) / cfg.experiment / b[1]).read_bytes()).decode()
                body.append(f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(FIGURES[b[1]])}">'
                            f"<figcaption>{html.escape(FIGURES[b[1]])}</figcaption></figure>")
            else:
                text = html.escape(b).replace("**", "")
                body.append(f"<p>{text}</p>")
    style = ("body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em}"
             "table.t{border-collapse:collapse;font-size:13px}table.t td,table.t th{padding:3px 8px;"
             "border-bottom:1px solid #ddd;text-align:right}img{max-width:100%}figcaption{color:#555}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>rankone: {html.escape(cfg.experiment)}"
            f"</title><style>{style}</style></head><body>{''.join(body)}</body></html>\n")
