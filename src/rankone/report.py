"""The report stage: figures, `report.md` and a self-contained `report.html`. The published
site's experiment page (rankone.publish) is built from the same sections.

Reads the analysis tables only. Every number in the report is computed from this
study's outputs; the verdict sentences are generated from the verdict table.
"""

from __future__ import annotations

import html
import math
import time
from pathlib import Path

import pandas as pd

from rankone.config import CONTROL_METHODS, StudyConfig, lora_rank, method_label
from rankone.figures import (
    SCORE_LABELS,
    by_method,
    drawn,
    method_order,
    plot_capacity,
    plot_capacity_falloff,
    plot_crossover,
    plot_trajectory,
    plot_curves,
    plot_forest,
    plot_information,
    plot_levers,
    plot_levers_calibration,
    plot_levers_pass_at_k,
    plot_lr_sweep,
    plot_lr_vs_rank,
    plot_rl_bits,
    plot_sharpening,
    plot_truncation,
    plot_updates,
)
from rankone import render
from rankone.analysis import BOOTSTRAP
from rankone.capacity import LEARNED_RECALL, examples_per_step, recalled_bits
from rankone.io import atomic_path, git_state, package_versions, read_json, read_jsonl, read_table
from rankone.outputs import FIGURES, SECTIONS
from rankone.paths import Layout
from rankone.tasks import params_of, task_of

NAMES = {"rl": "RL", "sft": "SFT"}
BITS_A_KEY = "bits_a_key"  # a crossover table's bits per key (rankone.crossover): 1, or several in the mechanism's arm


# A crossover's columns on its page and in crossover.md (rankone.crossover, rankone.publish).
CROSSOVER_SHOWN = [
    "study",
    "regime",
    "bits_a_key",
    "model",
    "n_facts",
    "method",
    "lr",
    "lr_at_grid_edge",
    "judged_on",
    "seeds",
    "episodes",
    "table_recall",
    "bits_recalled",
    "bits_recalled_low",
    "bits_recalled_high",
    "bits_per_episode",
    "bits_per_example",
    "info_bound_bits",
    "wrong",
    "locked_wrong",
    "locked_low",
    "locked_high",
    "fullft_plateau",
    "fullft_learned",
    "rl_bar_bits",
    "gap",
    "ci_low",
    "ci_high",
    "verdict",
    "about",
]


def one_bit(table: pd.DataFrame) -> pd.DataFrame:
    """A crossover's tables of one bit a key, those the crossover is stated on; a table of several
    bits a key (SFT on multi-bit values, the mechanism's arm) is read by mechanism_sentence."""
    return table[table[BITS_A_KEY] == 1] if BITS_A_KEY in table else table


def capacity_findings(falloff: pd.DataFrame) -> list[str]:
    """One generated sentence per (regime, model): where LoRA ranks fall off FullFT as the table grows."""
    out = []
    for (regime, model), g in falloff.groupby(["regime", "model"]):
        parts = []
        for r in g.sort_values("n_facts").itertuples():
            keeps = "none" if pd.isna(r.smallest_rank_keeping_up) else f"r{int(r.smallest_rank_keeping_up)}"
            parts.append(
                f"{r.n_facts:,} facts ({r.dataset_bits:,.0f} bits, FullFT stored "
                f"{r.fullft_bits_stored:,.0f}): ranks falling off: {r.ranks_falling_off}; smallest rank "
                f"keeping up: {keeps}; inconclusive: {r.ranks_inconclusive}"
            )
        out.append(f"**{model}, {NAMES[regime]}** — " + "; ".join(parts) + ".")
    return out


def rank1_methods(table: pd.DataFrame) -> list[str]:
    """The rank-1 LoRA adapters in a crossover table: all-linear `lora-r1` first, then any with a layer
    scope (`lora-r1-o_proj`: fewer parameters, a capacity RL can reach)."""
    return sorted({m for m in table.method.unique() if lora_rank(m) == 1}, key=lambda m: (m != "lora-r1", m))


def rank1_capacity(table: pd.DataFrame, regime: str, method: str) -> tuple[float, float, float, int] | None:
    """A rank-1 adapter's most bits recalled at any size in `regime` (mean, interval, that size), or None."""
    r1 = table[(table.regime == regime) & (table.method == method)]
    if not len(r1):
        return None
    top = r1.loc[r1.bits_recalled.idxmax()]
    return float(top.bits_recalled), float(top.bits_recalled_low), float(top.bits_recalled_high), int(top.n_facts)


def crossed(table: pd.DataFrame) -> list[str]:
    """The rank-1 adapters that ran on the tables in both regimes: those with a crossover to state."""
    table = one_bit(table)
    return [m for m in rank1_methods(table) if all(rank1_capacity(table, g, m) is not None for g in ("rl", "sft"))]


def has_crossover(table: pd.DataFrame) -> bool:
    """Some rank-1 adapter ran on the tables in both regimes, so there is a crossover to state."""
    return bool(crossed(table))


def never_filled(table: pd.DataFrame, method: str) -> dict[str, tuple[float, int]]:
    """Per regime, where a rank-1 adapter recalled under LEARNED_RECALL of every table, the smallest
    included: its best recall and that table's keys. Such an adapter never held a whole table, so
    the most bits it recalled mark no capacity it filled (a share of the keys limits it, not bits)."""
    if "table_recall" not in table:
        return {}
    out = {}
    for g in ("rl", "sft"):
        r1 = table[(table.regime == g) & (table.method == method) & table.table_recall.notna()]
        if len(r1) and r1.table_recall.max() < LEARNED_RECALL:
            top = r1.loc[r1.table_recall.idxmax()]
            out[g] = (float(top.table_recall), int(top.n_facts))
    return out


def held_whole(table: pd.DataFrame, regime: str, method: str) -> tuple[int, float] | None:
    """The largest table a rank-1 adapter recalled at least LEARNED_RECALL of in `regime` (keys,
    recall), or None where it held none whole."""
    if "table_recall" not in table:
        return None
    r1 = table[(table.regime == regime) & (table.method == method) & (table.table_recall >= LEARNED_RECALL)]
    if not len(r1):
        return None
    top = r1.loc[r1.n_facts.idxmax()]
    return int(top.n_facts), float(top.table_recall)


def _bits_ci(low: float, high: float) -> str:
    """An interval of bits, or what stands for one where a single seed gives none (never "nan")."""
    return f"[{low:,.0f}, {high:,.0f}]" if math.isfinite(low) and math.isfinite(high) else "(one seed, no interval)"


def crossover_sentence(table: pd.DataFrame) -> str:
    """Whether rank 1 saturates at the same bits under RL as under SFT, from the runs, whatever the
    answer: one statement per rank-1 adapter that ran in both regimes (all-linear, then scoped)."""
    methods = crossed(table)
    if not methods:
        return "Rank 1 did not run in both regimes: no crossover to state."
    return " ".join(_crossover_of(one_bit(table), m) for m in methods)


def _crossover_of(table: pd.DataFrame, method: str) -> str:
    name = method_label(method)
    caps = {g: rank1_capacity(table, g, method) for g in ("rl", "sft")}
    (rl, rl_lo, rl_hi, rl_n), (sft, sft_lo, sft_hi, sft_n) = caps["rl"], caps["sft"]
    falls = {
        g: sorted(table[(table.regime == g) & (table.method == method) & (table.verdict == "worse")].n_facts)
        for g in ("rl", "sft")
    }
    where = "; ".join(
        f"under {NAMES[g]} it falls off FullFT from {falls[g][0]:,} keys"
        if falls[g]
        else f"under {NAMES[g]} it is not shown worse than FullFT at any judged size"
        for g in falls
    )
    short = never_filled(table, method)  # regimes where it held no table whole: bits there are no capacity
    saturates = "stores" if ("rl" if rl < sft else "sft") in short else "saturates at"
    intervals = all(math.isfinite(x) for x in (rl_lo, rl_hi, sft_lo, sft_hi))
    overlap = intervals and rl_lo <= sft_hi and sft_lo <= rl_hi
    fewer = "fewer" if rl < sft else "more"
    if not intervals:
        same = "one seed gives no interval, so these runs cannot tell its RL and SFT capacities apart"
    elif overlap:
        same = "the intervals overlap, so these runs cannot tell its RL and SFT capacities apart"
    elif falls["rl"] if rl < sft else falls["sft"]:  # the regime where it holds fewer bits is where it fell off
        same = f"the intervals do not overlap: {name} {saturates} {fewer} bits under RL than under SFT"
    else:  # fewer bits, but not fewer than FullFT in that regime: the regime's limit, not rank 1's
        same = (
            f"the intervals do not overlap, but {name} recalls {fewer} bits under RL without falling off FullFT "
            f"there: a limit of {'RL' if rl < sft else 'SFT'} at these sizes, not yet of {name}"
        )
    out = (
        f"{name[0].upper()}{name[1:]} recalls at most {rl:,.0f} bits {_bits_ci(rl_lo, rl_hi)} under RL "
        f"({rl_n:,}-key table) and {sft:,.0f} {_bits_ci(sft_lo, sft_hi)} under SFT ({sft_n:,} keys); {same}. "
        f"{where[0].upper()}{where[1:]}."
    )
    out += _still_rising(table, method, {"rl": rl_n, "sft": sft_n})
    out += _locked(table, method, {"rl": rl_n, "sft": sft_n})
    # Whole in one regime only, and behind FullFT in the other: a shortfall of the adapter there (not
    # behind FullFT, what stops it short of the bar is the regime's own limit: the sentence below).
    g = next(iter(short)) if len(short) == 1 else None
    other = {"rl": "sft", "sft": "rl"}.get(g)
    held = held_whole(table, other, method) if g and falls[g] else None
    if held:
        recall, n = short[g]
        held_n, held_recall = held
        out += (
            f" Under {NAMES[g]} it never recalled {LEARNED_RECALL:.0%} of a table (at best {recall:.2f} of {n:,} "
            f"keys), though under {NAMES[other]} it held tables whole up to {held_n:,} keys ({held_recall:.2f}): "
            f"it falls short under {NAMES[g]} from the smallest table on, so its most bits there are a "
            "shortfall at every size, not a capacity it filled."
        )
    elif short:  # no table held whole: "at most N bits" is no capacity
        smallest = int(table[table.method == method].n_facts.min())
        out += (
            f" At no size, {smallest:,} keys the smallest, did {name} recall {LEARNED_RECALL:.0%} of a table under "
            + " or ".join(NAMES[g] for g in short)
            + " (at best "
            + ", ".join(f"{recall:.2f} of {n:,} keys under {NAMES[g]}" for g, (recall, n) in short.items())
            + "): it holds a share of the keys at every size, not a whole table up to some number of bits, "
            "so its most bits there are no capacity it filled."
        )
    largest = int(table[(table.regime == "sft") & (table.method == method)].n_facts.max())
    if not falls["sft"] and sft_n == largest:  # still rising at the largest table: a lower bound
        out += (
            f" Under SFT it has not fallen off FullFT at the largest table ({largest:,} keys), where it recalls most: "
            f"its SFT capacity is at least {sft:,.0f} bits, not yet measured."
        )
    full = table[(table.regime == "rl") & (table.method == "fullft")]
    if "fullft_learned" in table:  # the precondition (rankone.capacity.rl_precondition), per RL size
        passed = sorted(int(n) for n in full[full.fullft_learned.eq(True)].n_facts)
        out += (
            f" Under RL FullFT learned {len(passed)} of {len(full)} table sizes "
            f"({', '.join(f'{n:,}' for n in passed) + ' keys' if passed else 'none'}: 90% of the keys recalled, or "
            "twice rank 1's SFT capacity in bits); only those sizes are judged."
        )
    if len(full):  # can RL test rank 1's capacity at all? Only if FullFT learns more than rank 1 holds by SFT
        top = full.loc[full.bits_recalled.idxmax()]
        reach = top.bits_recalled_high if math.isfinite(top.bits_recalled_high) else top.bits_recalled
        if reach < sft:  # RL never carried what rank 1 holds by SFT
            out += (
                f" Under RL FullFT itself recalls at most {top.bits_recalled:,.0f} bits "
                f"{_bits_ci(top.bits_recalled_low, top.bits_recalled_high)} ({int(top.n_facts):,} keys), "
                + (
                    f"below {name}'s SFT capacity, and {name} still falls off it there: under RL {name} "
                    f"{'falls short' if 'rl' in short else 'saturates'} before it holds what it holds by SFT."
                    if falls["rl"]
                    else f"below {name}'s SFT capacity: these RL runs never carried as many bits as {name} stores "
                    f"by SFT, so they cannot show where {name} saturates under RL."
                )
            )
        else:  # RL carried more than rank 1 holds by SFT: the runs can place its RL capacity
            out += (
                f" Under RL FullFT recalls up to {top.bits_recalled:,.0f} bits "
                f"{_bits_ci(top.bits_recalled_low, top.bits_recalled_high)} ({int(top.n_facts):,} keys), "
                + (
                    f"more than {name} holds by SFT at any size: RL's own limit does not explain what {name} "
                    "holds by RL."
                    if short
                    else f"more than {name} holds by SFT: RL carried enough for {name} to reach its SFT capacity."
                )
            )
    return out


def _still_rising(table: pd.DataFrame, method: str, most: dict[str, int]) -> str:
    """Per regime, where a rank-1 adapter recalls most (`most`: regime -> keys): was its curve still
    rising at the last step (the late slope's interval above 0)? Then its bits there are what the
    budget delivered, not a ceiling; nothing to say where it had stopped, or no slope was measured."""
    if "rise_ci_low" not in table:
        return ""
    rising = []
    for regime, n_facts in most.items():
        at = table[(table.regime == regime) & (table.method == method) & (table.n_facts == n_facts)]
        if len(at) and at.rise_ci_low.iloc[0] > 0:
            r = at.iloc[0]
            score = "reward gained" if regime == "rl" else "loss shed"
            rising.append(
                f"under {NAMES[regime]} at {n_facts:,} keys ({score} {r.rise:+.3f} [{r.rise_ci_low:+.3f}, "
                f"{r.rise_ci_high:+.3f}] over another {int(r.rise_window):,} steps)"
            )
    if not rising:
        return ""
    return (
        f" Its curve was still rising at the last step {' and '.join(rising)}: a longer run would store more "
        f"there, so those bits are what this budget delivered, not a ceiling."
    )


def _locked(table: pd.DataFrame, method: str, most: dict[str, int]) -> str:
    """Per regime, where a rank-1 adapter recalls most: how many test keys its final weights answered
    wrong, and how many wrong in every sample (locked), beside FullFT's at that size (nothing where the
    table has no `locked_wrong`)."""
    if "locked_wrong" not in table:
        return ""
    parts = []
    for regime, n_facts in most.items():
        at = table[(table.regime == regime) & (table.n_facts == n_facts)].set_index("method")
        if method not in at.index or not math.isfinite(at.loc[method, "locked_wrong"]):
            continue
        r = at.loc[method]
        full = at.loc["fullft"] if "fullft" in at.index else None
        parts.append(
            f"under {NAMES[regime]} at {n_facts:,} keys it answered {r.wrong:.0%} of them wrong, {r.locked_wrong:.0%} "
            + (f"[{r.locked_low:.0%}, {r.locked_high:.0%}] " if math.isfinite(r.locked_low) else "")
            + f"wrong in all {int(r.locked_samples)} samples"
            + (f" (FullFT: {full.wrong:.0%}, {full.locked_wrong:.0%})" if full is not None else "")
        )
    if not parts:
        return ""
    return (
        " On the test keys at the last step: "
        + "; ".join(parts)
        + ". A key answered wrong in every sample gets no policy gradient from its own samples; SFT's loss still"
        " reaches it."
    )


def _per_unit(row) -> str:
    """Bits stored per RL episode or SFT example, with its interval over seeds."""
    lo, hi = row.bits_recalled_low / row.episodes, row.bits_recalled_high / row.episodes
    ci = f" [{lo:.4f}, {hi:.4f}]" if math.isfinite(lo) and math.isfinite(hi) else " (one seed, no interval)"
    return f"{row.bits_recalled / row.episodes:.4f}{ci}"


def mechanism_sentence(table: pd.DataFrame) -> str | None:
    """The information argument, measured on FullFT (the method whose capacity never binds): the most
    bits it stored per RL episode, per SFT example of one bit and per SFT example of several bits
    (each at the size where it stored most per unit, with intervals), and whether RL stores at most
    about one bit an episode while an SFT example of more bits stores more, whatever the answer.
    None when the table has no RL or no multi-bit SFT row."""
    if BITS_A_KEY not in table:
        return None
    full = table[(table.method == "fullft") & (table.episodes > 0)].assign(
        per=lambda t: t.bits_recalled / t.episodes, per_high=lambda t: t.bits_recalled_high / t.episodes
    )
    rl = full[full.regime == "rl"]
    if "fullft_learned" in rl:  # the sizes RL learned (rankone.capacity.rl_precondition)
        rl = rl[rl.fullft_learned.eq(True)]
    sft1 = full[(full.regime == "sft") & (full[BITS_A_KEY] == 1)]
    many = full[(full.regime == "sft") & (full[BITS_A_KEY] > 1)]
    if not (len(rl) and len(sft1) and len(many)):
        return None
    r, s, m = (t.loc[t.per.idxmax()] for t in (rl, sft1, many))
    at_most_one = (r.per_high if math.isfinite(r.per_high) else r.per) <= 1
    more = m.bits_recalled_low / m.episodes > s.per_high if math.isfinite(m.bits_recalled_low) else m.per > s.per
    ceiling = [t[BITS_A_KEY] * t.n_facts / t.episodes for t in (s, m)]  # the table's bits over its examples
    bound = (
        f", {r.bits_recalled / r.info_bound_bits:.1%} of the {r.info_bound_bits:,.0f}-bit information bound its "
        "rewards gave"
        if "info_bound_bits" in r and r.info_bound_bits > 0
        else ""
    )
    return (
        f"The mechanism, on FullFT: it stored at most {_per_unit(r)} bits per RL episode ({int(r.n_facts):,} keys"
        f"{bound}), {_per_unit(s)} per SFT example of 1 bit ({int(s.n_facts):,} keys) and {_per_unit(m)} per SFT "
        f"example of {m[BITS_A_KEY]:.0f} bits ({int(m.n_facts):,} keys; an SFT example can store at most its bits "
        f"over the passes, {ceiling[0]:.4f} and {ceiling[1]:.4f}"
        f" here): an example of {m[BITS_A_KEY]:.0f} bits stored {m.per / s.per:.1f}x an example of 1 bit and "
        f"{m.per / r.per:.0f}x an RL episode. "
        + ("RL stored at most about one bit an episode" if at_most_one else "RL stored more than one bit an episode")
        + (
            " and an SFT example of more bits stored more, as the information argument says."
            if more and at_most_one
            else (
                ", and an SFT example of more bits stored more."
                if more
                else " but an SFT example of more bits did not store more (intervals overlap or reversed): "
                "the information argument is not borne out on SFT here."
            )
        )
    )


def crossover_part(cfg: StudyConfig, cross: pd.DataFrame) -> list:
    """The RL crossover (capacity.regimes with rl): the sentence, the figure and its table."""
    if "rl" not in cfg.capacity.regimes:
        return []
    lrs = (
        "each method at the one lr the select stage chose on the study's own runs (the lr pilot), flagged `lr_from`"
        if cfg.capacity.learning_rates == "chosen"
        else "each method at its best lr on val at that size"
    )
    show = [
        "regime",
        "model",
        "n_facts",
        "method",
        "lr",
        "lr_from",
        "seeds",
        "episodes",
        "table_recall",
        "bits_recalled",
        "bits_recalled_low",
        "bits_recalled_high",
        "bits_stored",
        "info_bound_bits",
        "episodes_to_50",
        "episodes_to_90",
        "fullft_plateau",
        "gap",
        "ci_low",
        "ci_high",
        "verdict",
    ]
    return [
        f"**The crossover.** RL and SFT on the same facts tables, {lrs}. Bits recalled = greedy recall of every key "
        "of the table as bits (Fano), the same measure in both regimes; each rank is judged against FullFT on "
        f"that recall by the equivalence rule (margin ±{cfg.analysis.greedy_margin:g}), only at sizes where "
        "FullFT's curve reached its plateau. Episodes to 50% / 90% = RL episodes or SFT examples until the "
        "method's smoothed curve covers that share of FullFT's gain from its first step to its plateau.",
        crossover_sentence(cross),
        ("figure", "crossover.png"),
        _round(cross[[c for c in show if c in cross]]),
    ]


def capacity_section(cfg: StudyConfig, at: Layout) -> list[tuple[str, list]]:
    """The capacity experiment's section and figures (none without a capacity section)."""
    if cfg.capacity is None:
        return []
    out = at.report
    table, falloff, chart, cross = (
        read_table(at.table(f"{n}.csv")) for n in ("capacity", "capacity_falloff", "capacity_chart", "crossover")
    )
    sft = table[table.regime == "sft"]
    plot_capacity(chart, sft, cfg.analysis.bits_per_param, out / "capacity.png")
    plot_capacity_falloff(sft, out / "capacity_falloff.png")
    plot_crossover(cross, out / "crossover.png")
    per_param = sft.groupby("method").bits_per_parameter.max()
    per_param = per_param[method_order(per_param.index)]
    show = [
        "regime",
        "model",
        "n_facts",
        "method",
        "lr",
        "at_grid_edge",
        "trainable_parameters",
        "dataset_bits",
        "bits_stored",
        "bits_absorbed",
        "share_stored",
        "bits_per_parameter",
        "gap",
        "ci_low",
        "ci_high",
        "verdict",
        "reason",
        "falls_off",
    ]
    return [
        (
            SECTIONS["capacity"],
            [
                f"SFT on random facts tables of {', '.join(f'{n:,}' for n in cfg.capacity.n_facts)} keys "
                f"({cfg.capacity.probes} facts probed per split, {len(cfg.capacity.seeds)} seed(s)), every method at "
                "its "
                "best lr on val. Bits stored = the table's bits minus the final total train NLL in bits (at least 0); "
                "bits "
                "absorbed = the drop in train NLL from the base model (it also counts format the base unlearns). "
                "A LoRA rank falls off when the equivalence rule calls it worse than FullFT: the interval of its test "
                "gap "
                f"over seeds lies below 0 and not inside ±{cfg.analysis.parity_threshold['sft']:g} nats/token.",
                *capacity_findings(falloff),
                "Most bits stored per trainable parameter at any size: "
                + ", ".join(f"{m}: {v:.3f}" for m, v in per_param.items())
                + f" (reference {cfg.analysis.bits_per_param:g}).",
                ("figure", "capacity.png"),
                *([("figure", "capacity_falloff.png")] if len(sft) else []),
                falloff.round(1),
                _round(table[show]),
                *crossover_part(cfg, cross),
            ],
        )
    ]


def format_collapse_note(cfg: StudyConfig, runs: pd.DataFrame) -> list:
    """How many RL runs' completions stopped parsing (rl.format_collapse_share), and which."""
    if "format_collapse" not in runs or not (runs.regime == "rl").any():
        return []
    flagged = runs[(runs.regime == "rl") & (runs.format_collapse == True)]  # noqa: E712 (NaN for SFT rows)
    rl = cfg.rl
    text = (
        f"Format collapse: {len(flagged)} of {int((runs.regime == 'rl').sum())} RL runs had more than "
        f"{rl.format_collapse_share:.0%} of their completions unparseable by the answer checker, averaged over "
        f"{rl.format_collapse_window} steps (the per-step share is in curves.csv)."
    )
    return [text, *([flagged[["model", "method", "lr", "seed", "test_score"]]] if len(flagged) else [])]


def truncation_findings(summary: pd.DataFrame) -> list[str]:
    """One generated sentence per model: what share of FullFT's RL gain rank 1 keeps, and the smallest k
    whose interval reaches 90%."""
    out = []
    for model, g in summary[summary.metric == "mean_reward"].groupby("model"):
        g = g.sort_values("k")
        first = g.iloc[0]
        enough = g[g.low >= 0.9]
        reach = (
            f"the smallest k whose interval lies at or above 90% is {int(enough.k.iloc[0])}"
            if len(enough)
            else "no k has its interval at or above 90%"
        )
        head = f"**{model}** (FullFT's gain over the base: {first.gain:+.3f} reward, {int(first.seeds)} seeds): "
        if pd.isna(first.kept):  # no gain over the base: no share of it to keep
            out.append(head + "FullFT gained nothing over the base, so no share of a gain can be kept.")
            continue
        interval = f" [{first.low:.0%}, {first.high:.0%}]" if pd.notna(first.low) else " (no interval)"
        out.append(
            head + f"keeping the top {_directions(int(first.k))} of every weight update keeps {first.kept:.0%}"
            f"{interval} of the gain and {first.energy_kept:.0%} of the update's squared norm; {reach}."
        )
    return out


def _directions(k: int) -> str:
    return "direction" if k == 1 else f"{k} directions"


def truncation_section(cfg: StudyConfig, at: Layout) -> list[tuple[str, list]]:
    """The truncation experiment's section and figure (none without a truncation section)."""
    if cfg.truncation is None:
        return []
    table, summary = read_table(at.table("truncation.csv")), read_table(at.table("truncation_summary.csv"))
    plot_truncation(summary, at.report / "truncation.png")
    per_lr = (
        table[~table.full]
        .groupby(["model", "lr", "k"], as_index=False)[["kept_mean_reward", "kept_greedy_accuracy", "energy_kept"]]
        .mean()
    )
    return [
        (
            SECTIONS["truncation"],
            [
                "Every FullFT RL run's weight update (delta = trained - base, each 2-D tensor) cut to its top k "
                "singular "
                "directions and scored again on test with the evaluate stage's scorer (same prompts, sampling seed and "
                "answer checker); full rank is the trained model itself. Kept = (score_k - base) / (score_full - "
                "base), "
                "paired by seed. At 1-8B scale the top direction is reported to keep over 99% (arXiv 2510.00553).",
                *truncation_findings(summary),
                ("figure", "truncation.png"),
                _round(summary),
                _round(per_lr),
            ],
        )
    ]


def lever_findings(cfg: StudyConfig, table: pd.DataFrame, eff: pd.DataFrame) -> list[str]:
    """One generated sentence per lever: its verdicts against plain RL per (model, method), and
    the episodes it took to the target reward against plain's."""
    out = []
    eff = eff.set_index(["lever", "model", "method"])
    for lever, g in table.groupby("lever", sort=False):
        changes = ", ".join(f"{k}: {v}" for k, v in cfg.levers.variants[lever].items())
        parts = []
        for (model, method), h in g.groupby(["model", "method"], sort=False):
            metrics = "; ".join(
                f"{r.metric.replace('_at_', '@').replace('score', 'mean reward')} {r.gap:+.3f} "
                f"[{r.ci_low:+.3f}, {r.ci_high:+.3f}] {r.verdict}"
                for r in h.itertuples()
            )
            mine, plain = eff.loc[(lever, model, method)], eff.loc[("plain", model, method)]
            parts.append(
                f"{model} {method}: {metrics}; episodes to a training reward of "
                f"{cfg.levers.target_reward:g}: {_episodes(mine)} against plain's {_episodes(plain)}; "
                f"groups wasted {mine.wasted_group_share:.0%} against {plain.wasted_group_share:.0%}"
            )
        out.append(f"**{lever}** ({changes}) — " + ". ".join(parts) + ".")
    return out


def _episodes(r) -> str:
    if r.reached_target == 0:
        return "not reached"
    seeds = "" if r.reached_target == r.seeds else f", {int(r.reached_target)} of {int(r.seeds)} seeds"
    return f"{r.episodes_to_target:,.0f} ({r.seconds_to_target:.1f} s{seeds})"


def levers_section(cfg: StudyConfig, at: Layout) -> list[tuple[str, list]]:
    """The levers experiment's section and figures (none without a levers section)."""
    if cfg.levers is None:
        return []
    out = at.report
    table = read_table(at.table("levers.csv"))
    eff, passes = read_table(at.table("levers_efficiency.csv")), read_table(at.table("levers_pass_at_k.csv"))
    plot_levers(table, out / "levers.png")
    plot_levers_pass_at_k(passes, out / "levers_pass_at_k.png")
    calibration = []
    if cfg.tasks["rl"].confidence:
        plot_levers_calibration(
            read_table(at.table("levers_calibration.csv")),
            cfg.rl.format_collapse_window,
            out / "levers_calibration.png",
        )
        calibration = [
            "The RL task states a confidence after each answer (`answer:d`, p = d/9); the base model was warm-started "
            "with confidences drawn independently of the answer. Brier score = mean (p - y)^2 over sampled test "
            "completions (1 where none is stated), calibration error (ECE) = sum over confidence levels of share x "
            "|accuracy - p|; for both, lower is better and the gap is plain minus lever.",
            ("figure", "levers_calibration.png"),
        ]
    show = [
        "lever",
        "model",
        "method",
        "metric",
        "lr",
        "lr_edge",
        "plain_lr",
        "plain_lr_edge",
        "test_value",
        "plain_test_value",
        "gap",
        "ci_low",
        "ci_high",
        "seeds",
        "verdict",
        "reason",
    ]
    return [
        (
            SECTIONS["levers"],
            [
                f"The study's RL runs ({', '.join(cfg.levers.methods)}; seeds {cfg.levers.seeds}) with one lever "
                "switched "
                f"on, each with its own lr sweep, against plain RL at its best lr, at equal episodes "
                f"({cfg.rl.episode_budget:,} per run; the variance filter stops there). Gap = lever minus plain on "
                "test, "
                f"paired by seed, judged by the equivalence rule (±{cfg.analysis.parity_threshold['rl']:g}). Pass@k is "
                f"scored by this stage with {cfg.rl.group_size} samples per test prompt. For the controls (a "
                "fair-coin or "
                "format-only reward), plain RL's lead over them is its gain beyond format and sharpening.",
                *lever_findings(cfg, table, eff),
                ("figure", "levers.png"),
                ("figure", "levers_pass_at_k.png"),
                *calibration,
                _round(table[show]),
                _round(eff),
            ],
        )
    ]


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
            relation = (
                f"this neither confirms nor contradicts the original finding ({finding}): the point estimate "
                f"is {side} all-linear, but the interval covers 0"
            )
        else:
            relation = f"this differs from the original finding ({finding})"
        out.append(
            f"{r.regime.upper()} · {r.model} · rank {r.rank}: {r.scope}-only vs all-linear: {r.verdict} "
            f"(gap {r.gap_to_all_linear:+.3f}, CI [{r.ci_low:+.3f}, {r.ci_high:+.3f}]); {relation}."
        )
    return out


def _ci(r) -> str:
    if pd.isna(r.ci_low) or pd.isna(r.ci_high):  # one seed: no interval to print
        return f"{r.gap:+.3f}, no interval"
    return f"{r.gap:+.3f}, CI [{r.ci_low:+.3f}, {r.ci_high:+.3f}]"


RULE_WORDS = (
    "The rule, with margins fixed in the config before the run (docs/protocol.md): TOST (two one-sided t "
    "tests, alpha/2 a side) for equivalence and a t test for a difference, on the paired gaps. parity: "
    "equivalent (the interval inside ±margin) and covering 0; small: a gap that excludes 0 but whose "
    "estimate lies inside the margin; worse or better: a gap that excludes 0 with its estimate beyond the "
    "margin; otherwise inconclusive, with the reason and, when underpowered, the seeds that would decide. "
    "Multiplicity: Holm's correction within the pre-registered primary family (rank 1 against FullFT on the "
    "score, per regime and model), Benjamini-Hochberg's (false discovery rate) within the rest; the verdicts are "
    "the corrected ones, and p-values before and after are in the table. Per-checkpoint verdicts are corrected "
    "the same way within their step."
)


def pooled_blocks(pooled: pd.DataFrame, confidence: float) -> list:
    """The verdicts pooled over each model's base-model replicas (analysis.pooled), in words and as a table."""
    words = [
        f"**{NAMES[r.regime]} · {r.model}**, {r.base_models} base models ({r.runs} paired runs; about "
        f"{getattr(r, 'about', '') or 'not measured'}): "
        f"{verdict_phrase(r)}; two-level bootstrap [{r.two_level_low:+.3f}, {r.two_level_high:+.3f}]; "
        + (
            f"{r.base_share:.0%} of the gaps' variance comes from the base model."
            if isinstance(r.base_share, float) and math.isfinite(r.base_share)
            else "the base model's share of the variance could not be fitted."
        )
        for r in pooled[pooled.family == "primary"].itertuples()
    ]
    return [
        *words,
        "Each replica warm-starts the same preset with another pretrain seed (a replica listed in `models` has "
        "its own lr sweep; one that confirmation.base_models adds runs the confirmation seeds at the lr its "
        f"model's sweep chose). The verdict is taken on the "
        f"replicas' mean gaps ({confidence:.0%} t interval, one degree of freedom per base model but one): what a "
        "rerun on another base model would see. The two-level bootstrap resamples base models, then their seeds; "
        "the base model's share of the variance is a random-intercept model's (statsmodels MixedLM, REML).",
        _round(pooled),
    ]


def verdict_phrase(r) -> str:
    """One method's verdict in words, with how sure it is."""
    if r.verdict == "parity":
        extra = "" if r.reason == "inside the margin" else f"; {r.reason}"
        return f"{method_label(r.method)} is at parity with FullFT ({_ci(r)}, inside ±{r.margin:g}{extra})"
    if r.verdict in ("worse", "better"):
        where = (
            f"beyond ±{r.margin:g}"
            if abs(r.gap) >= r.margin
            else f"significant but inside ±{r.margin:g}: the rule this study was published under had no `small`"
        )
        return f"{method_label(r.method)} is {r.verdict} than FullFT ({_ci(r)}, {where})"
    if r.verdict == "small":
        side = "above" if r.gap > 0 else "below"
        return (
            f"{method_label(r.method)} is a small gap {side} FullFT ({_ci(r)}): significant, but inside "
            f"±{r.margin:g}{'; ' + r.reason.split('; ', 1)[1] if '; ' in r.reason else ''}"
        )
    if r.verdict == "diverged":
        return f"{method_label(r.method)}: a run diverged, no verdict"
    if r.verdict == "not judged":
        return f"{method_label(r.method)} is not judged ({_ci(r)}): FullFT gained nothing over the base"
    if r.reason == "underpowered":
        need = "more than 1,000" if r.seeds_to_decide == math.inf else f"about {r.seeds_to_decide:.0f}"
        return (
            f"{method_label(r.method)} is inconclusive ({_ci(r)}): underpowered, the interval is wider than "
            f"±{r.margin:g}; {need} seeds would decide at the observed spread"
        )
    return f"{method_label(r.method)} is inconclusive ({_ci(r)}): {r.reason}"


def stability_note(g: pd.DataFrame) -> str:
    """Which verdicts a single checkpoint of the tail would have turned, with the steps."""
    moved = [r for r in g.itertuples() if "stable" in g and not r.stable and r.by_step]
    if not moved:
        return ""
    return (
        " Not stable over the late checkpoints, so these verdicts move with the stop step: "
        + "; ".join(f"{method_label(r.method)} ({r.by_step}{seeds_phrase(r)})" for r in moved)
        + "."
    )


def seeds_phrase(r) -> str:
    """How many seeds would decide an unstable verdict's inconclusive checkpoints, if any."""
    need = getattr(r, "seeds_to_stable", math.nan)
    if math.isnan(need):  # no checkpoint was inconclusive
        return ""
    count = "more than 1,000" if need == math.inf else f"about {need:.0f}"
    return f"; {count} seeds would decide each inconclusive checkpoint at the observed spread"


def edge_note(g: pd.DataFrame) -> str:
    """Which best learning rates sit on the edge of their grid (the optimum may lie outside), and how
    many lrs the edge extension had added there (the cap was hit: analysis.lr_extension)."""

    def where(edge: str, added) -> str:
        return f"{edge}, after {int(added)} lr{'s' * (int(added) != 1)} added past the grid: the cap" if added else edge

    first = g.iloc[0]  # "" inside the grid (run() fills the CSV's empty cells)
    edges = [f"FullFT ({where(first.fullft_lr_edge, getattr(first, 'fullft_lr_extended', 0))})"] * bool(
        first.fullft_lr_edge
    ) + [
        f"{method_label(r.method)} ({where(r.lr_edge, getattr(r, 'lr_extended', 0))})"
        for r in g.itertuples()
        if r.lr_edge
    ]
    return (
        (" Best lr on the edge of its grid, which qualifies these verdicts: " + ", ".join(edges) + ".") if edges else ""
    )


def plateau_note(plateau: pd.DataFrame, model: str) -> str:
    """Whether each method's curve had stopped improving at its best lr (analysis.plateau): FullFT's
    always, and every other method that had not."""
    p = plateau[plateau.model == model] if len(plateau) else plateau
    if not len(p):
        return ""
    if "rise" not in p:  # a study published before the slope test
        return legacy_plateau_note(p[p.method == "fullft"])
    notes = []
    for r in p.sort_values("method", key=lambda m: m != "fullft").itertuples():
        window = f"another {r.window} steps (fitted over the last {2 * r.window} of {r.steps})"
        rise = f"{r.rise:+.3f}, CI [{r.rise_ci_low:+.3f}, {r.rise_ci_high:+.3f}]"
        if math.isnan(r.rise_ci_high):
            if r.method == "fullft":
                notes.append("FullFT's curve: one seed, no interval to test a plateau with")
        elif r.plateau and r.method == "fullft":
            notes.append(f"FullFT had reached its plateau (slope gives {rise} over {window}, below ±{r.margin:g})")
        elif not r.plateau:
            notes.append(
                f"{method_label(r.method)} had not reached its plateau (slope gives {rise} over {window}, "
                f"reaching past {r.margin:g}): longer runs could change its verdict"
            )
    return (" " + "; ".join(notes) + ".") if notes else ""


def extension_notes(best: pd.DataFrame, cap: int) -> list[str]:
    """What the edge extension (analysis.lr_extension) did: per method whose grid it extended, how far
    and where the best lr ended, and which best lrs are still on an edge with the cap reached."""
    if not cap or "extended" not in best:
        return []
    grown = best[best.extended > 0]
    capped = best[(best.edge.fillna("") != "") & (best.extended >= cap)]
    notes = [
        f"Edge extension (up to {cap} lr{'s' * (cap != 1)} past an edge): "
        + (
            "; ".join(
                f"{r.regime.upper()} · {r.model} · {method_label(r.method)}: {r.extended} added, best {r.lr:g}"
                + (f" (still on the {r.edge} edge)" if isinstance(r.edge, str) and r.edge else "")
                for r in grown.itertuples()
            )
            if len(grown)
            else "no best lr was on an edge; no grid was extended"
        )
        + "."
    ]
    if len(capped):
        notes.append(
            "The cap was hit for "
            + ", ".join(f"{r.regime.upper()} · {r.model} · {method_label(r.method)}" for r in capped.itertuples())
            + ": the best lr is still on an edge, so the optimum may lie further out."
        )
    return notes


def optimum_notes(optimum: pd.DataFrame) -> list[str]:
    """Which methods' grids do not resolve their optimum (analysis.lr_optimum)."""
    if not len(optimum):
        return []
    short = optimum.grid.astype(str).str.split().str.len() < 3
    open_ = optimum[~optimum.interior.astype(bool) & ~short]
    notes = []
    if short.any():
        notes.append(f"{int(short.sum())} method(s) swept fewer than three learning rates: no optimum to fit.")
    if len(open_):
        notes.append(
            "Not resolved by the grid (fitted optimum outside it, or no maximum): "
            + ", ".join(f"{r.regime.upper()} · {r.model} · {method_label(r.method)}" for r in open_.itertuples())
            + "."
        )
    return notes or ["Every method's fitted optimum lies inside its grid."]


def sharpening_table(sharp: pd.DataFrame) -> pd.DataFrame:
    """sharpening.csv to read: the profile columns to three decimals, each gain as "+x [low, high]",
    and blanks, not NaN, where a row has no value (the base and the control are not trained)."""

    def gain(r, name: str) -> str:
        mean, low, high = (getattr(r, f"{name}{s}", math.nan) for s in ("", "_ci_low", "_ci_high"))
        if not isinstance(mean, float) or math.isnan(mean):
            return ""
        return f"{mean:+.3f}" + ("" if math.isnan(low) else f" [{low:+.3f}, {high:+.3f}]")

    ks = [c for c in sharp.columns if c.startswith("pass_at_")]
    rows = []
    for r in sharp.itertuples():
        trained = not (r.method == "base" or r.method.startswith("control"))
        rows.append(
            {
                "model": r.model,
                "method": r.method if not trained else method_label(r.method),
                "T": f"{r.temperature:g}",
                "lr": f"{r.lr:g}" if trained else "",
                "seeds": int(r.seeds) if trained else "",
                "greedy": round(r.greedy_accuracy, 3),
                "mean reward": round(r.mean_reward, 3),
                **{k.replace("pass_at_", "pass@"): round(getattr(r, k), 3) for k in ks},
                "greedy beyond control": gain(r, "greedy_accuracy_beyond_control") if trained else "",
                "reward over base": gain(r, "mean_reward_over_base") if trained else "",
                "reward beyond control": gain(r, "mean_reward_beyond_control") if trained else "",
                "reads": r.reads if trained else "",
            }
        )
    return pd.DataFrame(rows)


# How the report says what each trained sharpening control trains (config.CONTROL_METHODS).
CONTROL_HOW = {"temperature": "RL of one logit scale", "majority": "FullFT RL of agreement with the group's majority"}


def sharpening_findings(sharp: pd.DataFrame) -> list[str]:
    """Per RL model: what the base can already do, what the temperature control adds, and whether the
    strongest arm (FullFT, else the best method) learned beyond sharpening: the regime its verdicts
    are about (analysis.sharpening)."""
    out = []
    for model, g in sharp.groupby("model", sort=False) if len(sharp) else []:
        base = g[g.method == "base"].iloc[0]
        control = g[g.method.str.startswith("control")].iloc[0]
        trained_controls = g[g.method.isin(list(CONTROL_METHODS))]
        controls = g.method.str.startswith("control") | g.method.isin(list(CONTROL_METHODS))
        trained = g[~g.method.isin(["base"]) & ~controls]
        big = max(c for c in g.columns if c.startswith("pass_at_"))
        k = big.removeprefix("pass_at_")
        sentence = (
            f"**{model}**: the base model answers {base.greedy_accuracy:.3f} of the test problems greedily "
            f"(pass@{k} {getattr(base, big):.3f}, mean reward {base.mean_reward:.3f} at T={base.temperature:g}); "
            f"the sharpening control (T={control.temperature:g}) reaches mean reward {control.mean_reward:.3f}"
            + "".join(
                f", the {CONTROL_METHODS[r.method]} ({CONTROL_HOW[r.method]}) {r.mean_reward:.3f} "
                f"(greedy {r.greedy_accuracy:.3f})"
                for r in trained_controls.itertuples()
            )
            + "."
        )
        if len(trained):
            arm = (
                trained[trained.method == "fullft"].iloc[0]
                if (trained.method == "fullft").any()
                else (trained.sort_values("greedy_accuracy").iloc[-1])
            )
            sentence += (
                f" {method_label(arm.method)}: greedy {arm.greedy_accuracy:.3f}, "
                f"{arm.greedy_accuracy_beyond_control:+.3f} beyond the control "
                f"[{arm.greedy_accuracy_beyond_control_ci_low:+.3f}, "
                f"{arm.greedy_accuracy_beyond_control_ci_high:+.3f}]; mean reward {arm.mean_reward:.3f}, "
                f"{arm.mean_reward_beyond_control:+.3f} beyond the control; pass@{k} {getattr(arm, big):.3f} "
                f"against the base's {getattr(base, big):.3f}. "
                + (
                    "It learned beyond sharpening: this model's verdicts are about learning."
                    if arm.reads == "learning"
                    else "It did not learn beyond sharpening: this model's RL verdicts are about sharpening, not "
                    "learning."
                    if arm.reads == "sharpening"
                    else "One seed: no interval to tell learning from sharpening."
                    if arm.reads == "one seed"
                    else "It gained nothing over the base: this model's RL verdicts are not judged (no learning "
                    "to match)."
                )
            )
        out.append(sentence)
    return out


def legacy_plateau_note(p: pd.DataFrame) -> str:
    """FullFT's plateau as a study published before the slope test judged it (the late window's
    mean within one seed sd of the window before it)."""
    if not len(p):
        return ""
    p = p.iloc[0]
    if math.isnan(p.seed_spread):
        return f" FullFT's reward moved {p.change:+.3f} over its last {p.window} steps (one seed; no plateau test)."
    reached = "had" if p.plateau else "had not"
    return (
        f" FullFT's reward {reached} reached a plateau by the rule this study was published under ({p.change:+.3f} "
        f"over the last {p.window} of {p.steps} steps against a seed spread of {p.seed_spread:.3f})."
    )


def collapse_note(judged: pd.DataFrame | None, regime: str, model: str) -> str:
    """Which of the runs a verdict was judged on stopped giving parseable answers (format
    collapse): one such seed can decide the interval's width on its own."""
    if judged is None or "format_collapse" not in judged:
        return ""
    g = judged[(judged.regime == regime) & (judged.model == model) & (judged.format_collapse == True)]  # noqa: E712
    if not len(g):
        return ""
    runs = ", ".join(
        f"{method_label(r.method)} seed {r.seed} (lr {r.lr:g}, test score {r.test_score:.3f})"
        for r in g.sort_values(["method", "seed"]).itertuples()
    )
    return (
        f" Format collapse in {len(g)} of the {int(((judged.regime == regime) & (judged.model == model)).sum())} "
        f"judged runs: {runs}, whose completions stopped parsing, so reward and gradients went to 0; such a run "
        "widens the interval on its own."
    )


EXPLORATORY = "*Exploratory*: the seeds that chose each learning rate also judge it (no confirmation seeds). "


def findings(verdicts: pd.DataFrame, plateau: pd.DataFrame, judged: pd.DataFrame | None = None) -> list[str]:
    """The answer: one plain sentence per (regime, model), with how sure it is; a regime judged on
    its sweep's seeds (`judged_on`, from the analysis) is labelled exploratory."""
    out = []
    if "metric" not in verdicts or verdicts.empty:
        return ["No verdict: the study trains no method beside FullFT to judge against it."]
    score = verdicts[verdicts.metric == "score"]
    for (regime, model), g in score.groupby(["regime", "model"]):
        g = by_method(g)
        first = g.iloc[0]
        bases = getattr(first, "base_models", math.nan)
        runs = (
            f"{first.seeds} paired runs over {bases:.0f} base models, the interval over their means"
            if bases == bases and bases > 1  # a verdict pooled over base models (analysis.over_base_models)
            else f"{first.seeds} seed{'' if first.seeds == 1 else 's'}"
        )
        sentence = (
            f"**{NAMES[regime]} · {model}** ({SCORE_LABELS[regime]} on test, {runs}, "
            f"margin ±{first.margin:g}): " + (EXPLORATORY if getattr(first, "judged_on", "") == "sweep seeds" else "")
        )
        if (g.verdict == "not judged").all():  # the precondition failed: one clause for the model, no greedy line
            out.append(
                sentence + "not judged: FullFT gained nothing over the base on test (sharpening.csv), so there is no "
                "learning to match ("
                + ", ".join(f"{method_label(r.method)} {r.gap:+.3f}" for r in g.itertuples())
                + ")."
            )
            continue
        sentence += "; ".join(verdict_phrase(r) for r in g.itertuples()) + "."
        greedy = by_method(
            verdicts[(verdicts.regime == regime) & (verdicts.model == model) & (verdicts.metric == "greedy_accuracy")]
        )
        if len(greedy):
            sentence += (
                f" Greedy accuracy (margin ±{greedy.margin.iloc[0]:g}): "
                + ", ".join(f"{method_label(r.method)} {r.verdict} ({r.gap:+.3f})" for r in greedy.itertuples())
                + "."
            )
        sentence += (
            stability_note(g)
            + edge_note(g)
            + collapse_note(judged, regime, model)
            + (plateau_note(plateau, model) if regime == "rl" else "")
        )
        out.append(sentence)
    return out


def sft_arm_note(info: pd.DataFrame) -> str:
    """Whether the SFT arm can show a shortfall: FullFT stores most of the table, rank 1 far less
    (nothing for an SFT task with no table of known bits, such as the 2x2's problems)."""
    sft = info[info.regime == "sft"] if len(info) else info
    if not len(sft) or "bits_stored" not in sft or not sft.sft_dataset_bits.notna().any():
        return ""
    table_bits = float(sft.sft_dataset_bits.iloc[0])
    parts = []
    for model, g in sft.groupby("model"):
        full, r1 = g[g.method == "fullft"], g[g.method == "lora-r1"]
        if not len(full):
            continue
        stored = full.bits_stored.iloc[0]
        text = f"{model}: FullFT stored {stored:,.0f} bits ({stored / table_bits:.0%})"
        if len(r1):
            stored = r1.bits_stored.iloc[0]
            text += (
                f", rank 1 {stored:,.0f} bits (the table is {table_bits / stored:.1f}x that)"
                if stored > 0
                else ", rank 1 none of it"
            )
        parts.append(text)
    return (
        f"SFT arm: the table holds {table_bits:,.0f} bits. Each method at its best lr, mean over seeds; bits "
        "stored = table bits minus the final total train NLL in bits. " + "; ".join(parts) + ". The arm can "
        "show a shortfall only where FullFT stores most of the table."
    )


def score_words(cfg: StudyConfig) -> str:
    """How a run's score is made, as the config fixed it before the run."""
    if cfg.analysis.score == "final":
        return "its final weights' (analysis.score: final)"
    return (
        "the mean over its late checkpoints at "
        + ", ".join(f"{f:g}" for f in cfg.evaluate.at)
        + " of its steps (analysis.score: tail); the verdict at each checkpoint is in the figure above and in "
        "`stable` / `by_step` below"
    )


def seed_words(cfg: StudyConfig) -> str:
    """Which seeds chose the learning rates and which judged the verdicts."""
    sweep = f"The learning rates were chosen on val over the sweep's seeds {cfg.seeds}"
    confirmed = cfg.confirmed_regimes()
    judged = "; ".join(
        f"{NAMES[g]} verdicts are judged on the fresh confirmation seeds {cfg.confirmation.seeds[g]}" for g in confirmed
    )
    rest = [NAMES[g] for g in cfg.regimes if g not in confirmed]
    if rest:
        judged += ("; " if judged else "") + (
            f"{' and '.join(rest)} verdicts on those same seeds (no confirmation "
            "runs: the seeds that chose the lr also judge it)"
        )
    return f"{sweep}; {judged}."


def verdict_table(a: Path) -> pd.DataFrame:
    """The verdicts in analysis folder `a` (empty when the study has no LoRA-vs-FullFT pair)."""
    return read_table(a / "verdicts.csv")


def judged_runs(a: Path) -> pd.DataFrame:
    """The runs the verdicts in analysis folder `a` were judged on: a confirmed regime's
    confirmation runs (confirm_runs.csv, absent in a study without confirmation runs), every other
    regime's sweep runs at their best lr."""
    runs = read_table(a / "runs.csv")
    confirmed = a / "confirm_runs.csv"
    confirm = read_table(confirmed) if confirmed.is_file() else pd.DataFrame()
    best = read_table(a / "best_lr.csv")
    keys = ["regime", "model", "method", "lr"]
    sweep = runs.merge(best[keys], on=keys)
    if len(confirm):
        sweep = sweep[~sweep.regime.isin(set(confirm.regime))]
    return pd.concat([sweep, confirm], ignore_index=True)


def headline(a: Path) -> list[str]:
    """The report's answer in plain sentences, from the tables in analysis folder `a` (a study's
    analysis/, or a published report's data/)."""
    return findings(judged_on(verdict_table(a), a), read_table(a / "plateau.csv"), judged_runs(a))


def judged_on(verdicts: pd.DataFrame, a: Path) -> pd.DataFrame:
    """`verdicts` with `judged_on` (confirmation or sweep seeds per regime); for a study published
    before the analysis wrote it, from whether analysis folder `a` holds its regime's confirmation runs."""
    if "judged_on" in verdicts or not len(verdicts):
        return verdicts
    confirmed = a / "confirm_runs.csv"
    regimes = set(read_table(confirmed).regime) if confirmed.is_file() else set()
    return verdicts.assign(
        judged_on=verdicts.regime.map(lambda g: "confirmation seeds" if g in regimes else "sweep seeds")
    )


def tables(at: Layout) -> dict:
    """The analysis tables the report reads, by name (build_sections' arguments)."""

    def t(name: str) -> pd.DataFrame:
        return read_table(at.table(name))

    return {
        "runs": t("runs.csv"),
        "best": t("best_lr.csv"),
        "verdicts": verdict_table(at.analysis),
        "plateau": t("plateau.csv"),
        "info": t("information.csv"),
        "lr_rank": t("lr_vs_rank.csv"),
        "optimum": t("lr_optimum.csv"),
        "early": t("early_curves.csv"),
        "updates": {name: t(f"update_{name}.csv") for name in ("shares", "matrices", "overlap")},
        "layer_table": t("layers.csv"),
        "judged": judged_runs(at.analysis),
        "sharp": t("sharpening.csv"),
        "pooled": t("pooled.csv") if at.table("pooled.csv").is_file() else pd.DataFrame(),
        "checkpoints": t("checkpoints.csv"),
    }


def run(cfg: StudyConfig, at: Layout) -> None:
    import matplotlib

    matplotlib.use("Agg")
    t = tables(at)
    out = at.report
    out.mkdir(parents=True, exist_ok=True)
    keys = ["regime", "model", "method", "lr"]
    curves = read_table(at.table("curves.csv"))
    best, runs, updates = t["best"], t["runs"], t["updates"]
    draw = {  # each study figure of the registry (rankone.outputs.FIGURES) by its drawing function
        "forest.png": lambda path: plot_forest(t["verdicts"], path),
        "trajectory.png": lambda path: plot_trajectory(read_table(at.table("trajectory.csv")), path),
        "rl_curves.png": lambda path: plot_curves(curves, best[keys], "rl", "mean reward per step", path),
        "sft_curves.png": lambda path: plot_curves(curves, best[keys], "sft", "training loss (nats/token)", path),
        "lr_sweep.png": lambda path: plot_lr_sweep(runs, path),
        "information.png": lambda path: plot_information(t["info"], cfg.analysis.bits_per_param, path),
        "rl_bits.png": lambda path: plot_rl_bits(curves, best[keys], path),
        "lr_vs_rank.png": lambda path: plot_lr_vs_rank(t["lr_rank"], path),
        "updates.png": lambda path: plot_updates(updates["shares"], updates["matrices"], path),
        "sharpening.png": lambda path: plot_sharpening(t["sharp"], path),
    }
    for name in drawn(cfg):  # an optional experiment's figures are drawn with its section
        if name in draw:
            draw[name](out / name)

    sections = build_sections(cfg, at, **t)
    with atomic_path(out / "report.md") as tmp:
        tmp.write_text(to_markdown(cfg, sections))
    with atomic_path(out / "report.html") as tmp:
        tmp.write_text(to_html(cfg, sections))


def recall_by_checkpoint(cfg: StudyConfig, checkpoints: pd.DataFrame) -> pd.DataFrame:
    """On a table of known bits: per (regime, model, method, lr) and evaluated checkpoint, the judged
    runs' greedy recall of the whole table and the bits it tells (Fano), mean over seeds with a t
    interval, beside how often each key had been seen by then (SFT examples or RL episodes a key).
    Bits that stop growing with the budget are a capacity; bits still growing are the budget's. Empty
    where no run scored a table."""
    if "table_greedy" not in checkpoints or checkpoints.table_greedy.isna().all():
        return pd.DataFrame()
    rows = []
    keys = ["regime", "model", "method", "lr", "step"]
    for (regime, model, method, lr, step), g in checkpoints.dropna(subset=["table_greedy"]).groupby(keys):
        if not task_of(cfg.tasks[regime]).stores_table:
            continue
        p = params_of(cfg.tasks[regime])
        symbols = p.alphabet**p.digits
        mean, low, high = recalled_bits(p.n_facts, symbols, g.table_greedy, cfg.analysis.confidence)
        rows.append(
            {
                "regime": regime,
                "model": model,
                "method": method,
                "lr": lr,
                "step": int(step),
                "seen_a_key": int(step) * examples_per_step(cfg, regime) / p.n_facts,
                "seeds": len(g),
                "table_recall": float(g.table_greedy.mean()),
                "bits_recalled": mean,
                "bits_low": max(low, 0.0),  # the t interval, clipped to what a table can hold
                "bits_high": min(high, p.n_facts * math.log2(symbols)),
            }
        )
    return pd.DataFrame(rows)


def recall_blocks(cfg: StudyConfig, checkpoints: pd.DataFrame) -> list:
    """The information section's table of recall by checkpoint, with what it says (none without a table)."""
    table = recall_by_checkpoint(cfg, checkpoints)
    if not len(table):
        return []
    return [
        "Recall by checkpoint: greedy recall of the whole table at every evaluated checkpoint of the judged runs, "
        f"the bits it tells (Fano) with a {cfg.analysis.confidence:.0%} t interval over seeds (clipped to 0 and the "
        "table's bits), and how often each key had been seen by then (`seen_a_key`: SFT examples or RL episodes "
        "a key). With no lr schedule each checkpoint is what a shorter run would have stored: bits that stop "
        "growing with the budget are a capacity, bits still growing are the budget's.",
        _round(table).round({"seen_a_key": 1, "bits_recalled": 0, "bits_low": 0, "bits_high": 0}),
    ]


def sharpening_section(cfg, sharp: pd.DataFrame) -> list[tuple[str, list]]:
    """The sharpening section, for a study with an RL regime (an SFT-only study has nothing to sharpen:
    no section, no empty figure)."""
    if "rl" not in cfg.regimes:
        return []
    return [
        (
            SECTIONS["sharpening"],
            [
                ("figure", "sharpening.png"),
                *sharpening_findings(sharp),
                "Profiles on the whole test split: greedy accuracy, mean reward and unbiased pass@k from "
                f"{cfg.sharpening.samples} samples a prompt at the evaluation temperature; each method's final weights "
                "at its best lr, mean over the judged seeds with t intervals. The controls: the base model at the "
                "temperature with the best val mean reward, no training, and, where the grid has it, the learned "
                "temperature (RL of one scalar that scales the logits, at its own best lr). A temperature moves no "
                "argmax, so both controls' greedy accuracy is the base's. Beyond control = the method's value minus "
                "the stronger control's (Welch's interval against the learned temperature's seeds): the part of "
                "its gain that sharpening does not give. Where FullFT gained nothing over the base, the model's RL "
                "verdicts are `not judged`.",
                sharpening_table(sharp) if len(sharp) else "No sharpening profile in this study's tables.",
            ],
        ),
    ]


def base_band(row: dict) -> str:
    """A base model's pass@1 on RL train prompts against the protocol's 5-60%: the warm-start's check,
    or, for a checkpoint that is not warm-started, the rollouts stage's train samples."""
    checked = row["base pass@1 (pretrain check)"]
    value = row["train pass@1"] if checked is None else checked
    where = "" if checked is not None else " (rollouts stage)"
    return f"{value:.0%}{where}" + ("" if 0.05 <= value <= 0.6 else " (outside 5-60%)")


def build_sections(
    cfg,
    at,
    runs,
    best,
    verdicts,
    plateau,
    info,
    lr_rank,
    early,
    updates,
    layer_table,
    judged,
    sharp,
    optimum,
    pooled,
    checkpoints,
) -> list[tuple[str, list]]:
    """(heading, blocks); a block is a str paragraph, a DataFrame, or ("figure", file)."""
    shown = set(drawn(cfg))  # a study figure is placed where the report stage drew it, nowhere else
    rollouts = []
    for model in cfg.confirm_models():
        s = read_json(at.rollouts(model) / "summary.json")
        base = read_json(at.model(model) / "rankone.json")
        rollouts.append(
            {
                "model": model,
                "parameters": base["parameters"],
                **({"warm-start steps": base["pretrain_steps"]} if "pretrain_steps" in base else {}),
                "base pass@1 (pretrain check)": base.get("base_pass_at_1"),
                "train pass@1": s["train"]["pass_at_1"],
                "val pass@1": s["val"]["pass_at_1"],
                f"val pass@{s['samples_per_prompt']}": s["val"][f"pass_at_{s['samples_per_prompt']}"],
                "val zero-variance share": s["val"]["zero_variance_share"],
            }
        )
    show = [
        "regime",
        "model",
        "method",
        "metric",
        "lr",
        "lr_edge",
        "fullft_lr",
        "fullft_lr_edge",
        "gap",
        "ci_low",
        "ci_high",
        "seeds",
        "margin",
        "family",
        "p_equivalence",
        "p_difference",
        "correction",
        "p_equivalence_adjusted",
        "p_difference_adjusted",
        "verdict_uncorrected",
        "verdict",
        "about",
        "reason",
        "seeds_to_decide",
        "stable",
        "by_step",
        "seeds_to_stable",
    ]
    show = [c for c in show if c in verdicts]  # `about` came with the sharpening precondition
    diverged = runs[runs.status != "completed"][["regime", "model", "method", "lr", "seed", "status"]]
    git = git_state()
    prov = pd.DataFrame(
        [
            {"item": "config digest", "value": cfg.digest()},
            {"item": "git commit", "value": f"{git['commit']}{' (dirty)' if git['dirty'] else ''}"},
            {"item": "generated", "value": time.strftime("%Y-%m-%d %H:%M:%S %Z")},
            *({"item": k, "value": v} for k, v in package_versions().items()),
        ]
    )
    has_sft_bits = "sft_dataset_bits" in info and info.sft_dataset_bits.notna().any()
    sft_bits = info.sft_dataset_bits.dropna().iloc[0] if has_sft_bits else math.nan
    return [
        (
            SECTIONS["answer"],
            [
                ("figure", "forest.png"),
                *findings(verdicts, plateau, judged),
                ("figure", "trajectory.png"),
                "Gap = method's test score minus FullFT's, each at its own best learning rate chosen on val, paired "
                "by "
                f"seed; {cfg.analysis.confidence:.0%} t interval over seeds. A run's score: {score_words(cfg)}. "
                f"{seed_words(cfg)} {RULE_WORDS}",
            ],
        ),
        *sharpening_section(cfg, sharp),
        (
            "Verdicts",
            [
                _round(verdicts[show]) if len(verdicts) else "No LoRA-vs-FullFT pairs.",
                *([_round(plateau)] if len(plateau) else []),
            ],
        ),
        *([("Across base models", pooled_blocks(pooled, cfg.analysis.confidence))] if len(pooled) else []),
        *([(SECTIONS["rl_curves"], [("figure", "rl_curves.png")])] if "rl_curves.png" in shown else []),
        (
            SECTIONS["lr_sweep"],
            [
                ("figure", "lr_sweep.png"),
                _round(best),
                *extension_notes(best, cfg.analysis.lr_extension),
                "Fitted optimum: a quadratic in log10(lr) fitted to every sweep run's val score, its vertex, and a "
                f"{cfg.analysis.confidence:.0%} interval from {BOOTSTRAP:,} resamples of the seeds (paired across "
                "methods, for LoRA's optimum over FullFT's). Not interior: the vertex lies outside the grid (or "
                "the fit has no maximum), so the grid does not resolve that method's optimum.",
                *optimum_notes(optimum),
                _round(optimum) if len(optimum) else "No sweep with three or more learning rates.",
            ],
        ),
        (
            SECTIONS["lr_rank"],
            [
                "Best lr per rank (on val), its ratio to FullFT's best (the original fits found ~10x), and the spread "
                "of LoRA's best lrs across ranks in decades. Early curves: the largest gap between the ranks' mean "
                f"curves over the first {cfg.analysis.early_steps} steps at each lr all ranks ran.",
                ("figure", "lr_vs_rank.png"),
                _round(lr_rank),
                _round(early),
            ],
        ),
        (
            SECTIONS["updates"],
            [
                "delta = after - before for every weight, FullFT at its best lr. Shares changed: exactly, beyond "
                "atol 1e-5 in fp32, and after a bf16 cast. Rank per matrix by torch.linalg.matrix_rank (fp32); "
                "effective rank = exp(entropy of normalised singular values). Overlap: Jaccard of the changed sets "
                "(atol) across seeds against independent sets of the same densities.",
                ("figure", "updates.png"),
                updates["shares"].round(4),
                updates["overlap"].round(4),
                _matrix_summary(updates["matrices"]),
            ],
        ),
        *([("Which layers", [*layer_findings(layer_table), _round(layer_table)])] if len(layer_table) else []),
        *([(SECTIONS["sft_curves"], [("figure", "sft_curves.png")])] if "sft_curves.png" in shown else []),
        (
            SECTIONS["information"],
            [
                (f"SFT dataset: {sft_bits:,.0f} bits. " if has_sft_bits else "")
                + f"Capacity line: {cfg.analysis.bits_per_param:g} bits per trainable "
                "parameter (Allen-Zhu & Li). RL bound: cumulative sum over groups of group size × reward entropy.",
                sft_arm_note(info),
                ("figure", "information.png"),
                *([("figure", "rl_bits.png")] if "rl_bits.png" in shown else []),  # bits by RL: none without RL
                info.round(1),
                *recall_blocks(cfg, checkpoints),
            ],
        ),
        *capacity_section(cfg, at),
        *truncation_section(cfg, at),
        *levers_section(cfg, at),
        (
            "Base policy",
            [
                "Pass@1 of each base model on RL train prompts it never saw (the warm-start reads only the task's "
                "warm-up split; a checkpoint that is not warm-started is read from the rollouts stage's train "
                "samples). The protocol asks for 5-60%: below, RL sees almost no reward variance; above, little "
                "is left to learn. " + "; ".join(f"{r['model']}: {base_band(r)}" for r in rollouts) + ".",
                pd.DataFrame(rollouts).round(3),
            ],
        ),
        (
            "Runs",
            [
                f"{len(runs)} sweep runs, {len(diverged)} not completed."
                + (
                    f" The verdicts were judged on {len(judged)} runs (confirmation runs where a regime has them)."
                    if len(judged)
                    else ""
                ),
                *([diverged] if len(diverged) else []),
                *format_collapse_note(cfg, runs),
            ],
        ),
        *([("Samples", samples_blocks(samples))] if len(samples := sample_table(cfg, at, judged)) else []),
        ("Provenance", [prov]),
    ]


def sample_table(cfg, at, judged: pd.DataFrame, per_method: int = 3) -> pd.DataFrame:
    """A few of what each method sampled on test: its first judged run's final checkpoint, the first
    sample of each of `per_method` prompts, from the evaluate stage's samples.jsonl (empty for a study
    evaluated before it kept them)."""
    from rankone.config import RunId

    rows = []
    confirmed = set(cfg.confirmed_regimes()) if cfg.confirmation else set()
    for (regime, model, method), runs in judged.groupby(["regime", "model", "method"], sort=False):
        where = at.confirm() if regime in confirmed else at
        path = where.evaluation(regime, model, method).with_name("samples.jsonl")
        if not path.is_file():
            continue
        first = runs.sort_values("seed").iloc[0]
        run = RunId(regime, model, method, float(first.lr), int(first.seed)).path
        kept = [s for s in read_jsonl(path) if s["run"] == run]
        if not kept:
            continue
        last = max(s["step"] for s in kept)
        seen: set[str] = set()
        for s in kept:
            if s["step"] == last and s["prompt"] not in seen and len(seen) < per_method:
                seen.add(s["prompt"])
                rows.append(
                    {"regime": regime, "model": model, "method": method, "seed": int(first.seed), "step": last}
                    | {k: s[k] for k in ("prompt", "answer", "completion", "reward")}
                )
    return pd.DataFrame(rows)


def samples_blocks(samples: pd.DataFrame) -> list:
    """The samples section: what it shows, and the table (line breaks shown as ⏎)."""
    shown = samples.assign(
        **{c: samples[c].map(lambda t: str(t).replace("\n", " ⏎ ")) for c in ("prompt", "answer", "completion")}
    )
    return [
        "What each method sampled on test at the evaluation temperature: its first judged seed's final weights, "
        "one sample of each of the first prompts, scored by the task's checker. Every sample of every run and "
        "checkpoint is in the evaluate stage's samples.jsonl.",
        shown,
    ]


def _round(table: pd.DataFrame) -> pd.DataFrame:
    """Scores and gaps to three decimals (what intervals over a handful of seeds support);
    learning rates as written in the config."""
    rates = [c for c in table.columns if c == "lr" or c.endswith("_lr")]
    return table.round(3).assign(**{c: table[c].map(lambda v: f"{v:g}" if pd.notna(v) else "") for c in rates})


def _matrix_summary(matrices: pd.DataFrame) -> pd.DataFrame:
    if not len(matrices):
        return matrices
    m = matrices.assign(
        rank_over_full=matrices["rank"] / matrices.full_rank,
        effective_over_full=matrices.effective_rank / matrices.full_rank,
    )
    return (
        m.groupby(["regime", "model"], as_index=False)[["rank_over_full", "effective_over_full", "share_atol"]]
        .mean()
        .round(4)
    )


def to_markdown(cfg: StudyConfig, sections) -> str:
    lines = [f"# rankone report: {cfg.experiment}", ""]
    for heading, blocks in sections:
        lines += [f"## {heading}", ""]
        for b in blocks:
            if isinstance(b, pd.DataFrame):  # a missing value is an empty cell, never "nan"
                lines += [b.astype(object).where(b.notna(), None).to_markdown(index=False, missingval=""), ""]
            elif isinstance(b, tuple):
                caption = FIGURES[b[1]].caption
                lines += [f"![{caption}]({b[1]})", "", f"*{caption}*", ""]
            else:
                lines += [b, ""]
    return "\n".join(lines)


def to_html(cfg: StudyConfig, sections) -> str:
    """report.html: self-contained (figures inlined), with the published pages' renderer and style."""
    import base64

    def inline(name: str) -> str:
        data = base64.b64encode((Path(cfg.reports_dir) / cfg.experiment / name).read_bytes()).decode()
        return f"data:image/png;base64,{data}"

    body = [f"<h1>rankone report: {html.escape(cfg.experiment)}</h1>"]
    for heading, blocks in sections:
        body.append(f"<h2>{html.escape(heading)}</h2>")
        body += [render.block(b, inline) for b in blocks]
    return render.page(f"rankone: {cfg.experiment}", "".join(body))
