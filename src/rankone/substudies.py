"""A study's sub-studies, one object per kind: a capacity sub-study (one facts-table size), a
lever's sub-study, the confirmation runs of one regime, and an edge-extension round (more of the
sweep's lrs, analysis.lr_extension).

Each has its own runs and results folder under the study's and shares its base models. The
workflow (workflow/rules/common.smk, from a job's wildcards), the CLI (`--capacity N`,
`--lever NAME`, `--confirm`, `--extend K`) and `rankone status` all find a sub-study's config, folder, label
and flag here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rankone.config import ConfigError, StudyConfig
from rankone.paths import Layout

KINDS = ("capacity", "lever", "confirm", "extend")
# The workflow's wildcard that puts a job in each kind (common.smk's wildcard_constraints).
WILDCARDS = {"capacity": "n_facts", "lever": "lever", "confirm": "confirm", "extend": "extension"}


@dataclass(frozen=True)
class SubStudy:
    kind: str  # one of KINDS
    key: str  # the table size, the lever's name, the confirmed regime, or the extension round

    @property
    def label(self) -> str:
        """How status and the published page name it: "capacity n64", "lever kl", "confirm rl", "extend r1"."""
        prefix = {"capacity": "n", "extend": "r"}.get(self.kind, "")
        return f"{self.kind} {prefix}{self.key}"

    @property
    def flag(self) -> str:
        """The CLI flag that runs a job in it (the regime of a confirmation job is its run's)."""
        return "--confirm" if self.kind == "confirm" else f"--{self.kind} {self.key}"

    def layout(self, at: Layout) -> Layout:
        if self.kind == "capacity":
            return at.capacity(self.key)
        if self.kind == "extend":
            return at.extension(self.key)
        return at.lever(self.key) if self.kind == "lever" else at.confirm()

    def waits_for_select(self, cfg: StudyConfig) -> bool:
        """Whether its runs take the lrs the select stage chose (confirmation runs, and capacity
        sub-studies with `capacity.learning_rates: chosen`)."""
        return capacity_takes_select(cfg) if self.kind == "capacity" else self.kind == "confirm"

    def study(self, cfg: StudyConfig, at: Layout, with_runs: bool = True) -> StudyConfig:
        """Its config. A capacity sub-study that takes select's lrs lists no runs until select has
        run, or without `with_runs` (enough for its data)."""
        from rankone.analysis import chosen, extension_lrs  # pandas: only a job that reads select's tables

        if self.kind == "lever":
            return cfg.lever_study(self.key)
        if self.kind == "confirm":
            return cfg.confirm_study(chosen(at), self.key)
        if self.kind == "extend":
            return cfg.extension_study(extension_lrs(at, int(self.key)))
        picked = with_runs and self.waits_for_select(cfg) and at.table("best_lr.csv").is_file()
        return cfg.capacity_study(int(self.key), chosen(at) if picked else None)


def capacity_takes_select(cfg: StudyConfig) -> bool:
    """Whether the study's capacity sub-studies run at the lrs the select stage chose
    (`capacity.learning_rates: chosen`)."""
    return cfg.capacity is not None and cfg.capacity.learning_rates == "chosen"


def of(cfg: StudyConfig) -> list[SubStudy]:
    """The study's capacity and lever sub-studies, in a stable order (the confirmation runs are
    counted with the study's own, rankone.status)."""
    return [SubStudy("capacity", str(n)) for n in (cfg.capacity.n_facts if cfg.capacity else [])] + [
        SubStudy("lever", name) for name in (cfg.levers.variants if cfg.levers else {})
    ]


def with_configs(cfg: StudyConfig, at: Layout) -> list[tuple[SubStudy, StudyConfig]]:
    """(sub-study, its config) of every capacity and lever sub-study, in `of`'s order."""
    return [(part, part.study(cfg, at)) for part in of(cfg)]


def extension_rounds(cfg: StudyConfig, at: Layout) -> list[tuple[SubStudy, StudyConfig]]:
    """(round, its config) of every edge-extension round whose lrs are known (the select round before
    it has run; analysis.lr_extension)."""
    parts = [SubStudy("extend", str(k)) for k in range(1, cfg.analysis.lr_extension + 1)]
    return [(part, part.study(cfg, at)) for part in parts if at.select_round(int(part.key) - 1).is_file()]


def confirmations(cfg: StudyConfig, at: Layout) -> list[tuple[SubStudy, StudyConfig]]:
    """(confirmation runs of a regime, their config) of every confirmed regime, once select has chosen
    the lrs they run at (none before, or where its table lacks a method: select has to run again)."""
    if not at.table("best_lr.csv").is_file():
        return []
    from rankone.analysis import chosen

    try:
        lrs = chosen(at)
        return [(SubStudy("confirm", g), cfg.confirm_study(lrs, g)) for g in cfg.confirmed_regimes()]
    except ConfigError:
        return []


def from_wildcards(wildcards: Mapping[str, str]) -> SubStudy | None:
    """The sub-study of a workflow job (None: the study's own)."""
    for kind in KINDS:
        if WILDCARDS[kind] in wildcards.keys():
            key = wildcards["regime"] if kind == "confirm" else wildcards[WILDCARDS[kind]]
            return SubStudy(kind, str(key))
    return None


def from_args(
    capacity: int | None, lever: str | None, confirm: bool, regime: str | None, extend: int | None = None
) -> SubStudy | None:
    """The sub-study a CLI job names (None: the study's own); more than one is an error."""
    if sum([capacity is not None, lever is not None, confirm, extend is not None]) > 1:
        raise ConfigError("--capacity, --lever, --confirm and --extend name different sub-studies; give one")
    if confirm:
        return SubStudy("confirm", regime or "")
    if extend is not None:
        return SubStudy("extend", str(extend))
    if capacity is not None:
        return SubStudy("capacity", str(capacity))
    return SubStudy("lever", lever) if lever is not None else None
