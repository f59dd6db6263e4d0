"""The crossover over table sizes that are each a study of their own (issue #40, `rankone crossover`).

A capacity sub-study (rankone.capacity) runs every table size on one lr per method; the crossover
asks for more at every size: its own lr grid with edge extension, selection seeds, and verdicts on
fresh confirmation seeds. So each size is a whole study (config/experiments/crossover/n<size>.yaml:
RL and SFT on the same facts table, the select checkpoint, confirmation), and this module reads the
finished studies, one per size, and states the crossover over them:

- per (size, regime, method), at the lr the size's own sweep chose: greedy recall of every key and
  the bits it tells (Fano), with an interval over the seeds that judge (the confirmation seeds where
  the study has them, else the sweep's, flagged `judged_on`), bits per RL episode or SFT example, and
  the equivalence verdict on recall against FullFT, and how sure its wrong answers are (`wrong`,
  `locked_wrong`: test keys wrong in every sample, which no policy gradient reaches)
  (rankone.capacity.crossover_rows);
- the precondition (rankone.capacity.rl_precondition): an RL size is judged only where FullFT
  under RL learned the table;
- rank 1's capacity under RL and under SFT with its interval, and the sentence (report.crossover_sentence).

A study whose table carries several bits a key (SFT on 8-bit values, the mechanism's third arm)
lands in its own panel of the figure, beside RL and SFT at one bit a key.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from rankone.analysis import NOT_MEASURED, IncompleteRunError, about, judging, read_best, sweep, with_replicas
from rankone.capacity import crossover_rows, rl_precondition
from rankone.config import load
from rankone.io import InputError, atomic_path, read_table, span_seconds, write_json
from rankone.outputs import CROSSOVER_RECORD
from rankone.paths import Layout
from rankone.report import BITS_A_KEY, CROSSOVER_SHOWN, crossover_sentence, mechanism_sentence
from rankone.status import own_provenance
from rankone.tasks import params_of, task_of


def size_rows(results: str | Path) -> list[dict]:
    """One finished study's rows: its table size, each (regime, model, method) at the lr its sweep
    chose, judged on its confirmation seeds where it has them."""
    results = Path(results)
    if not (results / "study.yaml").is_file():
        raise InputError(f"{results}: no study.yaml there (a study's results/<experiment> folder)")
    cfg = load(results / "study.yaml")
    cfg = cfg.model_copy(update={"results_dir": str(results.parent)})  # wherever the folder is now
    tasks = {g: cfg.tasks[g] for g in cfg.regimes}
    tables = {(t.name, params_of(t)) for t in tasks.values()}
    if any(not task_of(t).stores_table for t in tasks.values()) or len(tables) > 1:
        raise InputError(f"{results}: a crossover size trains every regime on one facts table (tasks.rl = tasks.sft)")
    at = Layout(cfg)
    try:
        best = read_best(at)
    except IncompleteRunError:
        raise InputError(f"{results}: its select stage has not run (snakemake finishes the study first)") from None
    runs, curves, _ = judging(cfg, at, best, sweep(cfg, at))  # as in the study's own verdicts
    confirmed = cfg.confirmed_regimes()
    if confirmed:
        best = with_replicas(cfg, best)
    params = params_of(tasks[cfg.regimes[0]])
    rows = crossover_rows(cfg, cfg, params.n_facts, runs, curves, best, lr_from="this size's sweep")
    sharp = at.table("sharpening.csv")  # what the study's RL verdicts are about (its FullFT against the base)
    regimes = about(read_table(sharp)) if sharp.is_file() else {}
    for row in rows:
        row["study"] = cfg.experiment
        row["about"] = regimes.get((row["regime"], row["model"]), NOT_MEASURED)
        row["judged_on"] = "confirmation seeds" if row["regime"] in confirmed else "sweep seeds"
        row[BITS_A_KEY] = row["table_bits"] / params.n_facts
        per = "episode" if row["regime"] == "rl" else "example"
        row[f"bits_per_{per}"] = row["bits_recalled"] / row["episodes"]
    return rows


def time_span(results: str | Path) -> float | None:
    """Seconds from a study's first job to its last, from the provenance every stage records (data
    manifests, base models, runs; not those of runs it shares with another study); None when none is recorded."""
    return span_seconds(own_provenance(results))


def crossover_table(studies: list[str | Path]) -> pd.DataFrame:
    """Every size's rows, the precondition applied, smallest table first."""
    if not studies:
        raise InputError("rankone crossover: name at least one study (results/<experiment>)")
    table = pd.DataFrame([row for study in studies for row in size_rows(study)])
    return (
        rl_precondition(table)
        .sort_values(["regime", BITS_A_KEY, "model", "table_bits", "rank"], na_position="first")
        .reset_index(drop=True)
    )


def write(table: pd.DataFrame, out: str | Path, spans: dict[str, float | None] | None = None) -> Path:
    """crossover.csv, crossover.png, crossover.md and crossover.json (the studies read, their time
    spans: what `rankone publish` publishes the crossover from) under `out`, all or none; `spans`: each
    study's seconds from first job to last (time_span), stated with their sum (the studies run in turn)."""
    from rankone.figures import plot_crossover

    out = Path(out)
    with atomic_path(out) as tmp:
        tmp.mkdir()
        table.to_csv(tmp / "crossover.csv", index=False)
        plot_crossover(table, tmp / "crossover.png")
        write_json(tmp / CROSSOVER_RECORD, {"studies": list(dict.fromkeys(table.study)), "spans_seconds": spans or {}})
        shown = [c for c in CROSSOVER_SHOWN if c in table]
        mechanism = mechanism_sentence(table)
        lines = [
            "# The crossover, one study per table size",
            "",
            crossover_sentence(table),
            "",
            *([mechanism, ""] if mechanism else []),
            "![Bits recalled against table bits](crossover.png)",
            "",
            table[shown].round(4).astype(object).where(table[shown].notna(), None).to_markdown(index=False),
            "",
        ]
        if spans:
            known = [s for s in spans.values() if s is not None]
            lines += [
                f"Time from first job to last, one study after another: {sum(known) / 3600:.1f} h in all ("
                + ", ".join(f"{k} {'?' if s is None else f'{s / 3600:.2f} h'}" for k, s in spans.items())
                + ").",
                "",
            ]
        (tmp / "crossover.md").write_text("\n".join(lines))
    return out
