"""The report's figures: one function per figure, and which of the registry's figures
(rankone.outputs.FIGURES) a study draws.

Reads the analysis tables only.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pandas as pd

from rankone.config import StudyConfig, lora_rank, method_label, method_position
from rankone.outputs import FIGURES, NEEDS_CONFIDENCE, enabled_experiments


# A study figure that only one regime fills (an empty axis without it), by the regime. Kept here, not
# in the registry: rankone.outputs is code every stage runs (rankone.stages.COMMON), and what the
# report draws must not rerun a study's training.
# (An optional experiment's figures follow its own switch: rankone.outputs.enabled_experiments.)
REGIME = {"sharpening.png": "rl", "rl_curves.png": "rl", "rl_bits.png": "rl", "sft_curves.png": "sft"}


def drawn(cfg: StudyConfig) -> list[str]:
    """The figures the report stage draws for this study: every study's that its regimes fill (no RL
    curves, bits by RL or sharpening profile without RL, no SFT curves without SFT), and each enabled
    optional experiment's (the levers' calibration only where the RL task states a confidence)."""

    enabled = enabled_experiments(cfg)

    def wanted(name: str, figure) -> bool:
        if name in REGIME and REGIME[name] not in cfg.regimes:
            return False
        if figure.experiment is None:
            return True
        if figure.experiment not in enabled:
            return False
        return name not in NEEDS_CONFIDENCE or ("rl" in cfg.tasks and bool(cfg.tasks["rl"].confidence))

    return [name for name, figure in FIGURES.items() if wanted(name, figure)]


def caption_rst(figure: str) -> str:
    """Snakemake's `report()` caption file of `figure` (workflow/report/<stem>.rst): the registry's
    caption, wrapped; `rankone captions` writes them all, and a test fails when one is stale."""
    return textwrap.fill(FIGURES[figure].caption, width=92) + "\n"


def write_captions(folder: Path = Path("workflow/report")) -> list[Path]:
    """Every figure's caption file, from the registry (rankone.outputs, the one place a caption is written)."""
    paths = []
    for figure in FIGURES:
        path = folder / f"{Path(figure).stem}.rst"
        path.write_text(caption_rst(figure))
        paths.append(path)
    return paths


VERDICT_COLORS = {
    "parity": "tab:green",
    "small": "tab:olive",
    "better": "tab:blue",
    "worse": "tab:red",
    "inconclusive": "tab:gray",
    "diverged": "black",
    "not judged": "lightgray",
}
SCORE_LABELS = {"rl": "mean reward", "sft": "-NLL (nats/token)"}


def method_order(methods) -> list[str]:
    return sorted(set(methods), key=lambda m: (method_position(m), m))


def by_method(table: pd.DataFrame) -> pd.DataFrame:
    """Rows in capacity order: TinyLoRA sizes, LoRA ranks, FullFT (ties keep their order)."""
    return table.sort_values("method", key=lambda s: s.map(method_position), kind="stable")


def _colors(methods):
    import matplotlib.pyplot as plt

    cmap = plt.get_cmap("viridis")
    ordered = method_order(methods)
    lora = [m for m in ordered if m != "fullft"]
    colors = {m: cmap(0.15 + 0.7 * i / max(1, len(lora) - 1)) for i, m in enumerate(lora)}
    colors["fullft"] = "black"
    return colors


def _label(ax, title: str, xlabel: str, ylabel: str) -> None:
    """Title, axis labels, a light grid and the legend: how every panel here ends."""
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def _save(fig, path: Path, top: float = 1.0) -> None:
    """Lay out (leaving the top `1 - top` of the figure free, e.g. for a legend) and write."""
    import matplotlib.pyplot as plt

    fig.tight_layout(rect=(0, 0, 1, top))
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
        _label(ax, model, "step", ylabel)
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
            ax.errorbar(
                mean.index,
                mean.values,
                yerr=[mean - low, high - mean],
                marker="o",
                capsize=3,
                color=colors[method],
                label=method,
            )
            bad = d[(d.method == method) & (d.status != "completed")]
            if len(bad):
                ax.scatter(bad.lr, [ax.get_ylim()[0]] * len(bad), marker="x", color=colors[method])
        ax.set_xscale("log")
        _label(ax, f"{regime.upper()} · {model}", "learning rate", labels[regime])
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
            smooth = (
                per_step[["reward_entropy_bits", "advantage_entropy_bits"]].mean().rolling(window, min_periods=1).mean()
            )
            top.plot(smooth.index, smooth.reward_entropy_bits, color=colors[method], label=f"{method}: batch rewards")
            top.plot(
                smooth.index,
                smooth.advantage_entropy_bits,
                color=colors[method],
                ls="--",
                label=f"{method}: group rewards (advantages)",
            )
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
    ax.plot(
        grid, [g * bits_per_param for g in grid], "k--", lw=1, label=f"capacity ≈ {bits_per_param:g} bits/parameter"
    )
    markers = {m: k for m, k in zip(sorted(info.model.unique()), "os^vD")}
    rl, sft = info[info.regime == "rl"], info[info.regime == "sft"]
    for model, marker in markers.items():
        r = rl[rl.model == model]
        ax.scatter(
            r.trainable_parameters,
            r.info_bound_bits,
            marker=marker,
            color="tab:blue",
            label=f"RL info bound (episodes × reward entropy) · {model}",
        )
        s = sft[sft.model == model]
        ax.scatter(
            s.trainable_parameters,
            s.bits_absorbed.clip(lower=1),
            marker=marker,
            color="tab:orange",
            label=f"SFT bits absorbed (NLL drop) · {model}",
        )
        if "bits_stored" in info:  # what the table holds minus what is still unsure; at 1 when none (log axis)
            stored = info[(info.model == model) & info.bits_stored.notna()]
            ax.scatter(
                stored.trainable_parameters,
                stored.bits_stored.clip(lower=1),
                marker=marker,
                facecolors="none",
                edgecolors="tab:green",
                label=f"bits stored (table - final NLL) · {model}",
            )
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
    fig, axes = plt.subplots(1, max(1, len(models)), figsize=(6.5 * max(1, len(models)), 5), squeeze=False)
    sizes = sorted(table.n_facts.unique())
    cmap = plt.get_cmap("plasma")
    size_color = {n: cmap(0.1 + 0.7 * i / max(1, len(sizes) - 1)) for i, n in enumerate(sizes)}
    xs = chart.trainable_parameters
    grid = [xs.min() / 2, xs.max() * 2]
    for ax, model in zip(axes[0], models):
        ax.plot(
            grid, [g * bits_per_param for g in grid], "k--", lw=1, label=f"capacity ≈ {bits_per_param:g} bits/parameter"
        )
        for n in sizes:
            d = table[(table.model == model) & (table.n_facts == n)].sort_values("trainable_parameters")
            color = size_color[n]
            ax.plot(d.trainable_parameters, d.bits_stored.clip(lower=1), "-", color=color, alpha=0.5)
            off = d.falls_off.astype(bool)
            ax.scatter(
                d[~off].trainable_parameters,
                d[~off].bits_stored.clip(lower=1),
                color=color,
                label=f"SFT stored · {n:,} facts",
            )
            ax.scatter(
                d[off].trainable_parameters, d[off].bits_stored.clip(lower=1), facecolors="none", edgecolors=color
            )
            ax.axhline(d.dataset_bits.iloc[0], color=color, ls=":", lw=1)
        ax.scatter([], [], facecolors="white", edgecolors="gray", label="open: LoRA falls off FullFT")
        rl = chart[(chart.model == model) & (chart.regime == "rl")]
        if len(rl):
            ax.scatter(
                rl.trainable_parameters,
                rl.bits,
                marker="x",
                color="tab:blue",
                label="RL information bound (this study's RL runs)",
            )
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

    models = sorted(table.model.unique())  # none in an RL-only capacity study: an empty file, not shown
    fig, axes = plt.subplots(1, max(1, len(models)), figsize=(5.5 * max(1, len(models)), 4), squeeze=False)
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
        _label(ax, model, "facts in the table", "share of the table's bits stored")
    _save(fig, path)


def plot_crossover(cross: pd.DataFrame, path: Path) -> None:
    """Bits recalled against table bits per method, RL beside SFT (one row per model; a table of several
    bits a key, `bits_a_key`, in a panel of its own), each rank-1 adapter's most bits recalled by SFT at
    any size marked in every panel (its SFT capacity where it held the smaller tables whole: the crossover
    sentence says which, rankone.report.never_filled)."""
    import matplotlib.pyplot as plt

    per_key = cross.bits_a_key if "bits_a_key" in cross else pd.Series(1.0, index=cross.index)
    cross = cross.assign(
        panel=[f"{g.upper()}" + (f", {b:g} bits a key" if b != 1 else "") for g, b in zip(cross.regime, per_key)]
    )
    panels = sorted(cross.panel.unique(), key=lambda p: (not p.startswith("RL"), len(p), p))
    models = sorted(cross.model.unique())
    fig, axes = plt.subplots(
        len(models), len(panels), figsize=(5.5 * len(panels), 4.2 * len(models)), squeeze=False, sharey=True
    )
    colors = _colors(cross.method)
    for row, model in zip(axes, models):
        d = cross[cross.model == model]
        sft_rank1 = d[(d.panel == "SFT") & (d.method.map(lora_rank) == 1)]
        capacities = sft_rank1.groupby("method").bits_recalled.max()  # each rank-1 adapter's most bits by SFT
        top = (
            max(d.table_bits.max(), d.bits_recalled_high.max(skipna=True) if d.bits_recalled_high.notna().any() else 1)
            * 1.5
        )
        low = d.table_bits.min() / 2
        for ax, panel in zip(row, panels):
            ax.plot([low, top], [low, top], "k:", lw=1, label="the whole table")
            for method, capacity in capacities.items():
                ax.axhline(
                    max(capacity, 1),
                    color=colors[method],
                    ls="--",
                    lw=1,
                    label=f"{method_label(method)}: most bits by SFT",
                )
            for method in method_order(d.method):
                m = d[(d.panel == panel) & (d.method == method)].sort_values("table_bits")
                if not len(m):
                    continue
                y = m.bits_recalled.clip(lower=1)
                err = [
                    (y - m.bits_recalled_low.clip(lower=1)).fillna(0).clip(lower=0),
                    (m.bits_recalled_high.clip(lower=1) - y).fillna(0).clip(lower=0),
                ]
                ax.errorbar(m.table_bits, y, yerr=err, fmt="-", color=colors[method], capsize=3, alpha=0.8)
                judged = m.fullft_plateau.astype(bool)
                ax.scatter(m[judged].table_bits, y[judged], color=colors[method], label=method, zorder=3)
                ax.scatter(m[~judged].table_bits, y[~judged], facecolors="white", edgecolors=colors[method], zorder=3)
            ax.scatter([], [], facecolors="white", edgecolors="gray", label="open: FullFT not at a plateau")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log", base=2)
            _label(ax, f"{model} · {panel}", "table bits", "bits recalled (greedy recall, Fano)")
    _save(fig, path)


def plot_truncation(summary: pd.DataFrame, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    models = sorted(summary.model.unique())
    cmap = plt.get_cmap("tab10")
    for i, model in enumerate(models):
        for metric, style in (("mean_reward", "o-"), ("greedy_accuracy", "s:")):
            d = summary[(summary.model == model) & (summary.metric == metric)].sort_values("k")
            ax.plot(d.k, d.kept, style, color=cmap(i), label=f"{model} · {metric.replace('_', ' ')}")
            ax.fill_between(d.k, d.low, d.high, color=cmap(i), alpha=0.12)
        e = summary[(summary.model == model) & (summary.metric == "mean_reward")].sort_values("k")
        ax.plot(e.k, e.energy_kept, "--", color=cmap(i), alpha=0.6, label=f"{model} · update norm kept")
    ax.axhline(1.0, color="gray", lw=0.8)
    ax.axhline(0.0, color="gray", lw=0.8)
    ax.set_xscale("log", base=2)
    ks = sorted(summary.k.unique())
    ax.set_xticks(ks, [str(k) for k in ks])
    _label(
        ax,
        "How much rank the FullFT RL update uses",
        "rank k kept per weight matrix",
        "share of FullFT's gain over base",
    )
    _save(fig, path)


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
            ["share_changed_exact", "share_changed_atol", "share_changed_bf16"]
        ].mean()
        mean.columns = ["exact (fp32)", "|delta| > 1e-5 (fp32)", "after bf16 cast"]
        (100 * mean).plot.bar(ax=left, rot=0)
        left.set_xticklabels([f"{r.upper()}\n{m}" for r, m in mean.index], fontsize=8)
        left.set_ylabel("parameters changed (%)")
        left.set_xlabel("")
        left.legend(fontsize=8)
    if len(matrices):
        m = matrices.assign(
            rank_ratio=matrices["rank"] / matrices.full_rank, eff_ratio=matrices.effective_rank / matrices.full_rank
        )
        groups = sorted(m.groupby(["regime", "model"]).groups)
        for i, key in enumerate(groups):
            g = m[(m.regime == key[0]) & (m.model == key[1])]
            right.scatter(
                [i - 0.1] * len(g),
                g.rank_ratio,
                marker="o",
                color="tab:blue",
                label="matrix_rank / full rank" if i == 0 else None,
                alpha=0.6,
            )
            right.scatter(
                [i + 0.1] * len(g),
                g.eff_ratio,
                marker="x",
                color="tab:orange",
                label="effective rank / full rank" if i == 0 else None,
                alpha=0.6,
            )
        right.set_xticks(range(len(groups)), [f"{r.upper()}\n{mo}" for r, mo in groups], fontsize=8)
        right.set_ylim(0, 1.05)
        right.set_ylabel("fraction of full rank (per matrix)")
        right.legend(fontsize=8)
    for ax in (left, right):
        ax.grid(alpha=0.3)
    _save(fig, path)


def _forest(ax, d: pd.DataFrame, labels: list[str], xlabel: str, title: str) -> None:
    """Gap and interval per row of `d` (top to bottom), the +-margin band shaded, colour = verdict."""
    import math

    margin = float(d.margin.iloc[0])
    ax.axvspan(-margin, margin, color="tab:green", alpha=0.15)
    ax.axvline(0, color="black", lw=0.8)
    ys = list(range(len(d)))[::-1]
    for y, r in zip(ys, d.itertuples()):
        color = VERDICT_COLORS.get(r.verdict, "black")
        if math.isfinite(r.ci_low):
            ax.errorbar(r.gap, y, xerr=[[r.gap - r.ci_low], [r.ci_high - r.gap]], fmt="o", color=color, capsize=3)
        else:
            ax.plot(r.gap, y, "o", color=color)
    ax.set_yticks(ys, labels, fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, axis="x")


def _forest_figure(panels: list[tuple], verdicts: pd.DataFrame, path: Path, width: float, height: float) -> None:
    """One forest panel per (rows, labels, xlabel, title), side by side, under one verdict legend."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(width * max(1, len(panels)), height), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        _forest(ax, *panel)
    handles = [
        Line2D([], [], marker="o", ls="", color=c, label=k)
        for k, c in VERDICT_COLORS.items()
        if len(verdicts) and k in set(verdicts.verdict)
    ]
    if handles:
        fig.legend(handles=handles, fontsize=8, loc="upper center", ncol=len(handles), frameon=False)
    _save(fig, path, top=1 - 0.35 / fig.get_figheight())


def plot_forest(verdicts: pd.DataFrame, path: Path) -> None:
    """Per regime: gap and interval per (model, method), the +-margin band shaded, colour = verdict."""
    v = verdicts[verdicts.metric == "score"] if len(verdicts) else verdicts
    panels = []
    for regime in [r for r in ("rl", "sft") if len(v) and r in set(v.regime)]:
        d = by_method(v[v.regime == regime]).sort_values("model", kind="stable")
        panels.append(
            (
                d,
                [f"{r.model} · {r.method.removeprefix('lora-')}" for r in d.itertuples()],
                f"test gap to FullFT ({SCORE_LABELS[regime]})",
                f"{regime.upper()}: LoRA minus FullFT, band = ±{float(d.margin.iloc[0]):g}",
            )
        )
    rows = max([len(p[0]) for p in panels] or [1])
    _forest_figure(panels, v, path, 5.6, 1.3 + 0.42 * rows)


def plot_trajectory(steps: pd.DataFrame, path: Path) -> None:
    """Small multiples: a row per (regime, model), a panel per method, the score's gap to FullFT
    and its interval against the checkpoint's step, colour = that step's verdict."""
    import math

    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    d = steps[steps.metric == "score"] if len(steps) else steps
    rows = sorted({(r.regime, r.model) for r in d.itertuples()}) or [("", "")]
    methods = method_order(d.method) if len(d) else [""]
    fig, axes = plt.subplots(
        len(rows), len(methods), figsize=(2.6 * len(methods), 2.1 * len(rows)), squeeze=False, sharex="row"
    )
    for i, (regime, model) in enumerate(rows):
        for j, method in enumerate(methods):
            ax, g = axes[i][j], d[(d.regime == regime) & (d.model == model) & (d.method == method)]
            if not len(g):
                ax.set_axis_off()
                continue
            margin = float(g.margin.iloc[0])
            ax.axhspan(-margin, margin, color="tab:green", alpha=0.15)
            ax.axhline(0, color="black", lw=0.8)
            for r in g.itertuples():
                color = VERDICT_COLORS.get(r.verdict, "black")
                low, high = (r.ci_low, r.ci_high) if math.isfinite(r.ci_low) else (r.gap, r.gap)
                ax.errorbar(r.step, r.gap, yerr=[[r.gap - low], [high - r.gap]], fmt="o", color=color, capsize=2)
            ax.set_title(f"{regime.upper()} · {model} · {method.removeprefix('lora-')}", fontsize=8)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
            if j == 0:
                ax.set_ylabel(f"gap ({SCORE_LABELS.get(regime, '')})", fontsize=7)
            if i == len(rows) - 1:
                ax.set_xlabel("step", fontsize=7)
    handles = [
        Line2D([], [], marker="o", ls="", color=c, label=k)
        for k, c in VERDICT_COLORS.items()
        if len(d) and k in set(d.verdict)
    ]
    if handles:
        fig.legend(handles=handles, fontsize=8, loc="upper center", ncol=len(handles), frameon=False)
    _save(fig, path, top=1 - 0.35 / fig.get_figheight())


def plot_levers(table: pd.DataFrame, path: Path) -> None:
    """Per metric: each (lever, model, method)'s gap to plain RL and its interval."""
    panels = []
    for metric in dict.fromkeys(table.metric):
        d = table[table.metric == metric]
        name = "mean reward" if metric == "score" else metric.replace("_at_", "@")
        panels.append(
            (
                d,
                [f"{r.lever} · {r.model} · {r.method}" for r in d.itertuples()],
                f"test gap to plain RL ({name})",
                f"{name}, band = ±{float(d.margin.iloc[0]):g}",
            )
        )
    rows = max([len(p[0]) for p in panels] or [1])
    _forest_figure(panels, table, path, 4.6, 1.4 + 0.3 * rows)


def plot_levers_calibration(curves: pd.DataFrame, window: int, path: Path) -> None:
    """Brier score and calibration error per step per (model, method), one line per side, each the
    mean over seeds smoothed over `window` steps."""
    import matplotlib.pyplot as plt

    panels = sorted(curves.groupby(["model", "method"]).groups) if len(curves) else []
    fig, axes = plt.subplots(
        2, max(1, len(panels)), figsize=(4.2 * max(1, len(panels)), 6.4), squeeze=False, sharey="row"
    )
    mean = curves.groupby(["lever", "model", "method", "step"], as_index=False)[["brier", "ece"]].mean()
    for col, (model, method) in enumerate(panels):
        for lever, d in mean[(mean.model == model) & (mean.method == method)].groupby("lever", sort=False):
            style = {"color": "black"} if lever == "plain" else {}
            for row, metric in enumerate(("brier", "ece")):
                axes[row, col].plot(d.step, d[metric].rolling(window, min_periods=1).mean(), label=lever, **style)
        _label(axes[0, col], f"{model} · {method}", "step", "Brier score (batch)")
        _label(axes[1, col], f"{model} · {method}", "step", "calibration error (batch)")
    _save(fig, path)


def plot_levers_pass_at_k(table: pd.DataFrame, path: Path) -> None:
    """Pass@k against k per (model, method), one line per side (plain and each lever)."""
    import matplotlib.pyplot as plt

    panels = sorted(table.groupby(["model", "method"]).groups) if len(table) else []
    fig, axes = plt.subplots(
        1, max(1, len(panels)), figsize=(4.2 * max(1, len(panels)), 3.6), squeeze=False, sharey=True
    )
    mean = table.groupby(["lever", "model", "method", "k"], as_index=False).pass_at_k.mean() if len(table) else table
    for ax, (model, method) in zip(axes[0], panels):
        for lever, d in mean[(mean.model == model) & (mean.method == method)].groupby("lever", sort=False):
            ax.plot(
                d.k,
                d.pass_at_k,
                "o-" if lever == "plain" else ".--",
                color="black" if lever == "plain" else None,
                label=lever,
            )
        _label(ax, f"{model} · {method}", "k", "test pass@k")
    _save(fig, path)


def plot_sharpening(table: pd.DataFrame, path: Path) -> None:
    """Test pass@k against k (log scale) per RL model: the base, the temperature control and each
    method; greedy accuracy drawn at k = 0.5, left of the curve."""
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(table.model)) if len(table) else []
    fig, axes = plt.subplots(1, max(1, len(models)), figsize=(4.6 * max(1, len(models)), 3.8), squeeze=False)
    ks = sorted(int(c.removeprefix("pass_at_")) for c in table.columns if c.startswith("pass_at_"))
    for ax, model in zip(axes[0], models):
        for r in table[table.model == model].itertuples():
            base = r.method == "base"
            control = r.method.startswith("control")
            style = dict(color="black", ls="-") if base else dict(color="gray", ls="--") if control else {}
            label = f"{r.method} (T={r.temperature:g})" if control else method_label(r.method) if not base else "base"
            ax.plot(ks, [getattr(r, f"pass_at_{k}") for k in ks], marker="o", label=label, **style)
            ax.plot([0.5], [r.greedy_accuracy], marker="s", color=ax.lines[-1].get_color())
        ax.set_xscale("log", base=2)
        ax.set_xticks([0.5, *ks], ["greedy", *map(str, ks)])
        _label(ax, f"{model}: greedy (square) and pass@k", "k", "test")
        ax.set_ylim(0, 1.02)
    _save(fig, path)
