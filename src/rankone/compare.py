"""Two studies' verdicts side by side (`rankone compare`): the same comparisons, judged twice.

Built for the cross-check through TRL (config/experiments/trl.yaml: the default study's RL cells
trained by TRL's GRPOTrainer, scored by rankone's evaluation), it reads any two `verdicts.csv`
(a study's `results/<experiment>/analysis/` or its published `reports/<experiment>/data/`) and
puts the rows both judge (regime, model, method, metric) in one table: each study's gap to FullFT
with its interval, seeds, verdict and what the verdict is about, and whether the two verdicts agree.
Rows only one study judges are left out and counted.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from rankone.io import InputError, read_table

KEY = ["regime", "model", "method", "metric"]
SHOWN = ["lr", "gap", "ci_low", "ci_high", "seeds", "verdict", "about"]


def verdicts_of(study: str | Path) -> pd.DataFrame:
    """A study's verdicts.csv: the file itself, or the folder of a study's results or published report."""
    path = Path(study)
    for candidate in (path, path / "analysis" / "verdicts.csv", path / "data" / "verdicts.csv"):
        if candidate.is_file():
            table = read_table(candidate)
            missing = [c for c in KEY + SHOWN if c not in table]
            if missing:
                raise InputError(f"{candidate}: not a verdicts table (no column {', '.join(missing)})")
            return table
    raise InputError(f"{study}: no verdicts.csv there (a study's results/<experiment> or reports/<experiment>)")


def side_by_side(a: pd.DataFrame, b: pd.DataFrame, names: tuple[str, str]) -> tuple[pd.DataFrame, int]:
    """The rows both tables judge, each study's columns suffixed by its name, and `agree`; with the
    number of rows only one of them has."""
    left, right = (t[KEY + SHOWN].rename(columns={c: f"{c} ({n})" for c in SHOWN}) for t, n in zip((a, b), names))
    both = left.merge(right, on=KEY, how="inner")
    both["agree"] = both[f"verdict ({names[0]})"] == both[f"verdict ({names[1]})"]
    only = len(a) + len(b) - 2 * len(both)
    return both.sort_values(KEY, ignore_index=True), only


def names_of(both: pd.DataFrame) -> tuple[str, ...]:
    """The two studies' names in a side-by-side table (its `verdict (<name>)` columns)."""
    return tuple(c[len("verdict (") : -1] for c in both.columns if c.startswith("verdict ("))


def cells(both: pd.DataFrame, mark: str = "") -> pd.DataFrame:
    """The side-by-side rows for reading: per study, the gap with its interval, the seeds and the verdict
    (between `mark`s: `**` in markdown)."""
    shown = both[KEY].copy()
    for n in names_of(both):
        shown[f"{n}: gap [95% CI], seeds, verdict"] = [
            f"{r[f'gap ({n})']:+.3f} [{r[f'ci_low ({n})']:+.3f}, {r[f'ci_high ({n})']:+.3f}], "
            f"{r[f'seeds ({n})']:.0f}, {mark}{r[f'verdict ({n})']}{mark}"
            for r in both.to_dict("records")
        ]
    shown["agree"] = both["agree"].map({True: "yes", False: "no"})
    return shown


def agreement(both: pd.DataFrame, only: int) -> str:
    """How many of the verdicts both studies judge agree."""
    said = f"{int(both['agree'].sum())} of {len(both)} verdicts agree"
    return said + (f"; {only} rows judged by one study alone." if only else ".")


def markdown(both: pd.DataFrame, only: int, names: tuple[str, str]) -> str:
    """The table as markdown: per study, the gap with its interval, the seeds and the verdict."""
    if both.empty:
        return f"No comparison is judged by both {names[0]} and {names[1]}."
    shown = cells(both, mark="**")
    lines = ["| " + " | ".join(shown.columns) + " |", "|" + " --- |" * len(shown.columns)]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in shown.itertuples(index=False)]
    return "\n".join(lines + ["", agreement(both, only)])
