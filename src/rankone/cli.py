"""`rankone <stage> --config CONFIG ...`: every stage of the workflow without Snakemake.

Each subcommand runs one job and writes where the Snakemake rule expects it
(rankone.paths), so `rankone train --config config/smoke.yaml --run rl/qwen3-tiny/lora-r1/lr0.01/seed0`
reproduces exactly what `snakemake` would run for that run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import yaml

from rankone import __version__
from rankone.checks import load, validate
from rankone.config import ConfigError, RunId, StudyConfig, json_schema, layered_files
from rankone.data import DataError
from rankone.gpus import claim_for_job
from rankone.io import InputError, log, pin_cpu_kernels, setup_logging
from rankone.jobserver import ENV as JOBSERVER_ENV
from rankone.jobserver import forward, refuse_other_kernels
from rankone.paths import Layout


def _scoped(cfg: StudyConfig, args) -> tuple[StudyConfig, Layout]:
    """The study and layout a job runs in: the study itself, with --capacity N its capacity
    sub-study at table size N, with --lever NAME that lever's sub-study, with --confirm its
    confirmation runs (each method at the best lr the select stage chose), or with --extend K its
    edge-extension round K (rankone.substudies)."""
    from rankone import substudies

    named = getattr(args, "run", None) or getattr(args, "method", None) or getattr(args, "regime", None) or ""
    part = substudies.from_args(
        args.capacity, args.lever, getattr(args, "confirm", False), named.split("/")[0], getattr(args, "extend", None)
    )
    at = Layout(cfg)
    return (cfg, at) if part is None else (part.study(cfg, at), part.layout(at))


def cmd_data(cfg: StudyConfig, args) -> None:
    from rankone import data

    sub_study = args.capacity is not None or args.lever is not None
    cfg, at = _scoped(cfg, args)
    if args.regime not in cfg.tasks or (sub_study and args.regime not in cfg.regimes):
        raise ConfigError(
            f"--regime {args.regime!r}: no such regime here (capacity sub-studies have sft only, "
            "lever sub-studies rl only)"
        )
    data.build(cfg, args.regime, at.data(args.regime))


def cmd_models(cfg: StudyConfig, args) -> None:
    from rankone.models.build import build

    at = Layout(cfg)
    build(cfg, args.model, at.data_root, at.model(args.model))


def cmd_rollouts(cfg: StudyConfig, args) -> None:
    from rankone.data import verify
    from rankone.rollouts import stage

    at = Layout(cfg)
    verify(at.data("rl"))
    stage.run(cfg, at.model(args.model), at.data("rl"), at.rollouts(args.model))


def job_devices(args) -> int | None:
    """The devices a train job was given: --processes, else the count the launcher passed its
    processes (RANKONE_PROCESSES), else the job's GPUs (RANKONE_GPUS, which the rule's `gpu`
    resource sets); None when nothing says."""
    for value in (args.processes, os.environ.get("RANKONE_PROCESSES"), os.environ.get("RANKONE_GPUS")):
        if value and int(value) > 0:
            return int(value)
    return None


DEFAULT_STUDY = "config/default.yaml"  # the study Snakemake layers every --configfile over


def layered_study(names: list[str]) -> StudyConfig:
    """The study of config files layered in order, as Snakemake layers --configfile (one file: as it
    is); where they validate only over the default study (experiments given without their base),
    the error says so."""
    try:
        return load(names[0]) if len(names) == 1 else validate(layered_files(names), "config " + " + ".join(names))
    except ConfigError as err:
        if over_the_default(names):
            raise ConfigError(
                f"{err} (an experiment layers over a study: --config {DEFAULT_STUDY} {' '.join(names)})"
            ) from None
        raise


def over_the_default(names: list[str]) -> bool:
    """Whether config files that do not validate as given do once layered over the default study,
    as Snakemake layers them (the Snakefile's configfile comes first)."""
    if DEFAULT_STUDY in names or not Path(DEFAULT_STUDY).is_file():
        return False
    try:
        validate(layered_files([DEFAULT_STUDY, *names]))
    except ConfigError:
        return False
    return True


def train_processes(args) -> int:
    """How many processes train a run: the job's devices, else one."""
    return job_devices(args) or 1


def cmd_train(cfg: StudyConfig, args) -> None:
    from rankone.data import verify
    from rankone.train import TRAINERS
    from rankone.train.folder import drop_finished, keep_finished, restore_finished

    cfg, at = _scoped(cfg, args)
    runs = extended_runs(cfg, at, args.run)
    verify(at.data(runs[0].regime))
    main = os.environ.get("RANK", "0") == "0"  # process 0 of several (torchrun's), or the only one
    for i, run in enumerate(runs):  # one process for every seed of a cell: imports and data load once
        out, model = at.train(run), at.model(run.model)
        if restore_finished(cfg, run, model, out, write=main):  # finished before this job was interrupted
            continue
        TRAINERS[run.regime](cfg, run, model, at.data(run.regime), out)
        if main and i < len(runs) - 1:  # kept until the job ends, for a rerun if it is killed first
            keep_finished(cfg, run, model, out)
    if main:
        for run in runs:
            drop_finished(at.train(run))


def extended_runs(cfg: StudyConfig, at: Layout, text: str) -> list:
    """The runs `text` names (StudyConfig.select), or, at an lr past the grid's edge, the sweep's runs
    that an edge-extension round added (the workflow's train rule trains both the same way)."""
    from rankone import substudies

    try:
        return cfg.select(text)
    except ConfigError:
        for _, study in substudies.extension_rounds(cfg, at):
            try:
                return study.select(text)
            except ConfigError:
                continue
        raise


def cmd_evaluate(cfg: StudyConfig, args) -> None:
    from rankone import evaluate
    from rankone.data import verify

    parts = args.method.strip("/").split("/")
    if len(parts) != 3:
        raise ConfigError(f"--method {args.method!r} is not of the form <regime>/<model>/<method>")
    cfg, at = _scoped(cfg, args)
    if tuple(parts) not in {(r.regime, r.model, r.method) for r in cfg.runs()}:
        raise ConfigError(
            f"--method {args.method!r}: no such method in the study; `rankone runs --config ...` lists them"
        )
    verify(at.data(parts[0]))
    try:
        evaluate.run(cfg, *parts, at)
    except ValueError as err:
        raise ConfigError(str(err)) from None


def cmd_select(cfg: StudyConfig, args) -> None:
    from rankone import analysis

    analysis.select(cfg, Layout(cfg), args.round)


def cmd_analysis(cfg: StudyConfig, args) -> None:
    from rankone import analysis

    analysis.run(cfg, Layout(cfg))


def cmd_capacity(cfg: StudyConfig, args) -> None:
    from rankone import capacity

    if cfg.capacity is None:
        raise ConfigError("the study has no capacity section (see config/experiments/capacity.yaml)")
    capacity.run(cfg, Layout(cfg))


def cmd_updates(cfg: StudyConfig, args) -> None:
    from rankone import updates

    updates.run(cfg, Layout(cfg))


def cmd_truncation(cfg: StudyConfig, args) -> None:
    from rankone import truncation

    if cfg.truncation is None:
        raise ConfigError("the study has no truncation section (see config/experiments/truncation.yaml)")
    truncation.run(cfg, Layout(cfg))


def cmd_levers(cfg: StudyConfig, args) -> None:
    from rankone import levers

    if cfg.levers is None:
        raise ConfigError("the study has no levers section (see config/experiments/levers.yaml)")
    levers.run(cfg, Layout(cfg))


def cmd_report(cfg: StudyConfig, args) -> None:
    from rankone import report

    report.run(cfg, Layout(cfg))


def sub_studies(cfg: StudyConfig) -> list[tuple]:
    """(sub-study, its config) of every capacity and lever sub-study, in a stable order."""
    from rankone import substudies

    return substudies.with_configs(cfg, Layout(cfg))


def sub_study_runs(parts: list[tuple]) -> list[tuple[str, RunId]]:
    """(CLI flag, run) of every run of `parts` (sub_studies) whose lrs are known."""
    return [(part.flag, run) for part, study in parts if not study.awaits_choice for run in study.runs()]


def cmd_runs(cfg: StudyConfig, args) -> None:
    for run in cfg.runs():
        print(run.path)
    for flag, run in sub_study_runs(sub_studies(cfg)):
        print(f"{run.path} {flag}")


def cmd_status(cfg: StudyConfig, args) -> None:
    from tabulate import tabulate

    from rankone import status

    parts = sub_studies(cfg)
    runs = status.grid(cfg, parts)
    print(tabulate(status.table(runs), headers="keys", tablefmt="simple"))
    counts = status.summary(runs)
    print(f"\n{cfg.experiment}: {len(runs)} training runs: {status.describe(counts, always=('completed',))}")
    for part, study in parts:
        if study.awaits_choice:
            print(
                f"{part.label}: its runs wait for the select stage's learning rates (capacity.learning_rates: chosen)"
            )
    for s in runs:
        if s.state == "failed":
            print(f"failed: {s.run.path}{' (' + s.sub_study + ')' if s.sub_study else ''}: see {s.log}")
    report = Layout(cfg).report / "report.html"
    print(f"report: {report}" if report.is_file() else "report: not written yet")


def cmd_summary(cfg: StudyConfig, args) -> None:
    from rankone import report

    at = Layout(cfg)
    page = at.report / "report.html"
    if not page.is_file():
        raise InputError(f"no report at {page}: the study has not finished (rankone status --config {args.config})")
    print(f"\nReport: {page.resolve()}")
    for line in report.headline(at.analysis):
        print(f"- {line.replace('**', '')}")


def cmd_check(cfg: StudyConfig, args) -> None:
    confirm = sum(
        len(cfg.confirm_models()) * len(cfg.regime_methods(g)) * len(cfg.confirmation.seeds[g])
        for g in cfg.confirmed_regimes()
    )
    parts = sub_studies(cfg)
    waiting = sum(len(s.regimes) * len(s.models) * len(s.methods) * len(s.seeds) for _, s in parts if s.awaits_choice)
    print(
        f"{args.config}: valid, {len(cfg.runs())} training runs in the sweep, {confirm} confirmation runs (after "
        f"select), {len(sub_study_runs(parts)) + waiting} sub-study runs (capacity, levers"
        f"{f'; {waiting} at the lrs select chooses' if waiting else ''})"
    )


def cmd_plan(files: list[str], scaling: bool) -> int:
    """Print what every job of the study (config files layered in order, as Snakemake layers
    --configfile) needs; exit 1 naming the jobs that cannot fit their resources."""
    from rankone import plan

    cfg = layered_study(files)
    if scaling:
        print(plan.scaling(cfg))
        return 0
    estimates = plan.plan(cfg)
    print(plan.table(cfg, estimates))
    bad = plan.misfits(cfg, estimates)
    for line in bad:
        log.error("cannot fit: %s", line)
    return 1 if bad else 0


def config_reference() -> str:
    """docs/config.md: every field of the schema, and the names the registered fields know."""
    from rankone.configdoc import markdown
    from rankone.engines import ENGINES
    from rankone.objectives import BASELINES, LOSSES, TRAINERS
    from rankone.tasks import BUILT_IN

    registries = {"rollout.engine": ENGINES, "rl.baseline": BASELINES, "rl.loss": LOSSES, "rl.trainer": TRAINERS}
    return markdown(json_schema(), registries, {task.name: task for task in BUILT_IN})


# `rankone --help` lists the commands in these groups, in this order.
COMMAND_GROUPS = {
    "check and size a study": ["check", "plan", "resolve"],
    "inspect a study": ["status", "runs", "summary", "compare", "crossover"],
    "stages (each Snakemake job runs one)": [
        "data",
        "models",
        "rollouts",
        "train",
        "evaluate",
        "select",
        "analysis",
        "capacity",
        "updates",
        "levers",
        "truncation",
        "report",
    ],
    "start stage jobs warm": ["jobserver"],
    "publish": ["publish", "findings"],
    "maintainer": ["schema", "captions"],
}


def grouped_help(parser: argparse.ArgumentParser, sub) -> None:
    """List the subcommands by COMMAND_GROUPS in `parser`'s help instead of argparse's one flat list."""
    helps = {action.dest: action.help for action in sub._choices_actions}
    width = max(map(len, helps)) + 2
    lines = []
    for group, names in COMMAND_GROUPS.items():
        lines += [f"{group}:", *(f"  {n:<{width}}{helps[n]}" for n in names if n in helps), ""]
    sub._choices_actions.clear()  # argparse's flat list, replaced by the groups below
    sub.metavar, sub.help = "COMMAND", "one of the commands below; `rankone COMMAND --help` for its options"
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = "\n".join(lines).rstrip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rankone", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"rankone {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def stage(name, func, help, capacity=False, **ids):
        p = sub.add_parser(name, help=help)
        p.add_argument("--config", required=True, help="study config YAML (e.g. config/default.yaml)")
        for flag, text in ids.items():
            p.add_argument(f"--{flag}", required=True, help=text)
        if capacity:
            p.add_argument(
                "--capacity",
                type=int,
                metavar="N_FACTS",
                help="run in the capacity sub-study at this table size (capacity.n_facts)",
            )
            p.add_argument("--lever", metavar="NAME", help="run in this lever's sub-study (levers.variants)")
            p.add_argument(
                "--confirm",
                action="store_true",
                help="run in the confirmation sub-study (confirmation.seeds, at the lrs select chose)",
            )
            p.add_argument(
                "--extend",
                type=int,
                metavar="K",
                help="run in edge-extension round K (analysis.lr_extension: the lrs select --round K-1 named)",
            )
        p.set_defaults(func=func)

    stage(
        "data",
        cmd_data,
        "build a task's splits",
        capacity=True,
        regime="rl, sft or format (the warm-start's format lines, tasks.format)",
    )
    stage("models", cmd_models, "build and warm-start a base model", model="model preset name")
    stage("rollouts", cmd_rollouts, "base-policy rollout statistics", model="model preset name")
    stage(
        "train",
        cmd_train,
        "train one run, or every seed of a cell",
        capacity=True,
        run="<regime>/<model>/<method>/lr<lr>[/seed<seed>] (without the seed: all the study's seeds)",
    )
    sub.choices["train"].add_argument(
        "--processes",
        type=int,
        metavar="N",
        help="FullFT sharded (FSDP) over N processes under torchrun, one per "
        "device (default: the job's GPUs, RANKONE_GPUS, else 1); on the CPU they use gloo",
    )
    stage(
        "evaluate",
        cmd_evaluate,
        "evaluate every run of one method (all lrs, seeds)",
        capacity=True,
        method="<regime>/<model>/<method>, e.g. rl/qwen3-tiny/lora-r1",
    )
    stage(
        "select",
        cmd_select,
        "best learning rate per method on val (analysis/best_lr.csv), which the confirmation runs and the verdicts use",
    )
    sub.choices["select"].add_argument(
        "--round",
        type=int,
        metavar="K",
        help="the choice after edge-extension rounds 1..K only (0: the sweep alone), whose lrs past an edge "
        "round K+1 runs (analysis/rounds/best_lr.rK.csv); without it, after every round: best_lr.csv",
    )
    stage("analysis", cmd_analysis, "tables and verdicts (after select)")
    stage("capacity", cmd_capacity, "capacity experiment: bits stored per table size and rank, fall-off rank")
    stage("updates", cmd_updates, "structure of FullFT weight updates (share changed, rank, overlap)")
    stage("levers", cmd_levers, "levers experiment: each RL lever against plain RL at equal episodes")
    stage("truncation", cmd_truncation, "FullFT RL updates cut to rank k and re-evaluated (share of the gain kept)")
    stage("report", cmd_report, "figures, report.md and a self-contained report.html")
    stage("runs", cmd_runs, "list the study's training runs")
    stage("check", cmd_check, "validate a config (or configs layered in order, as snakemake --configfile) and exit")
    check_config = next(a for a in sub.choices["check"]._actions if a.dest == "config")
    check_config.nargs, check_config.metavar = "+", "YAML"
    stage("status", cmd_status, "how much of the study's grid is done, started, failed or diverged")
    stage("summary", cmd_summary, "where the report is, and its headline verdicts")
    schema = sub.add_parser("schema", help="print the config JSON schema (YAML)")
    schema.add_argument("--markdown", action="store_true", help="instead: the config reference (docs/config.md)")
    schema.set_defaults(func=None)
    publish = sub.add_parser("publish", help="the static site under reports/: every study under --results")
    publish.add_argument("--results", default="results", help="folder of the studies' results (default: results)")
    publish.add_argument("--no-snakemake-report", action="store_true", help="skip Snakemake's report zip")
    publish.add_argument(
        "--allow-dirty",
        action="store_true",
        help="publish a study with outputs built from uncommitted changes (its page says so)",
    )
    publish.set_defaults(func=None)
    findings = sub.add_parser(
        "findings", help="docs/findings.md and the README's findings block, from the published reports under reports/"
    )
    findings.set_defaults(func=None)
    jobserver = sub.add_parser(
        "jobserver",
        help=f"import the stage libraries once, then fork each stage command run with {JOBSERVER_ENV}=SOCKET",
    )
    jobserver.add_argument(
        "--socket",
        help="the Unix socket to listen on (an old one replaced); with a command, a temporary one if not given",
    )
    jobserver.add_argument(
        "--config", required=True, nargs="+", metavar="YAML", help="study config (files layered as check layers them)"
    )
    jobserver.add_argument(
        "served",
        metavar="command",
        nargs=argparse.REMAINDER,
        help="after --: a command to serve (e.g. snakemake --cores all), run with "
        f"{JOBSERVER_ENV} set; the server stops when it ends and exits with its status",
    )
    jobserver.set_defaults(func=None)
    captions = sub.add_parser(
        "captions",
        help="workflow/report/*.rst, Snakemake's report captions, from the figure registry (rankone.figures.FIGURES)",
    )
    captions.set_defaults(func=None)
    planner = sub.add_parser(
        "plan",
        help="per job: parameters, peak GPU memory, FLOPs, GPU-hours and GPUs "
        "needed, from the model shapes alone; exit 1 when a job cannot fit its resources",
    )
    planner.add_argument(
        "--config",
        required=True,
        nargs="+",
        metavar="YAML",
        help="config files layered in order, as snakemake --configfile layers them (e.g. "
        "config/default.yaml config/experiments/paper.yaml)",
    )
    planner.add_argument(
        "--scaling",
        action="store_true",
        help="instead: the study's train schedule on Qwen3 "
        "shapes from 0.6B to 32B, FullFT and LoRA rank 1 (GPUs, memory, GPU-hours per run)",
    )
    planner.set_defaults(func=None)
    compare = sub.add_parser(
        "compare",
        help="two studies' verdicts side by side (e.g. the default and its cross-check through TRL), as markdown",
    )
    compare.add_argument("studies", nargs=2, metavar="STUDY", help="results/<exp>, reports/<exp> or a verdicts.csv")
    compare.add_argument("--out", help="also write the table to this markdown file, and its rows to the .csv beside it")
    compare.set_defaults(func=None)
    crossover = sub.add_parser(
        "crossover",
        help="the RL capacity crossover over finished studies, one per table size (config/experiments/crossover/)",
    )
    crossover.add_argument("studies", nargs="+", metavar="STUDY", help="results/<exp> of each table size's study")
    crossover.add_argument("--out", required=True, help="folder for crossover.csv, crossover.png and crossover.md")
    crossover.set_defaults(func=None)
    resolve = sub.add_parser("resolve", help="validate a config and write it, defaults filled in, to --out")
    resolve.add_argument("--config", required=True)
    resolve.add_argument("--out", required=True)
    resolve.set_defaults(func=None)

    grouped_help(parser, sub)
    args = parser.parse_args(argv)
    from rankone.launcher import follow_launcher, launched

    if launched():
        follow_launcher()
    setup_logging(quiet=launched() and os.environ.get("RANK", "0") != "0")  # one process of a group logs
    if args.command == "schema" and args.markdown:
        sys.stdout.write(config_reference())
        return 0
    if args.command == "schema":
        yaml.safe_dump(json_schema(), sys.stdout, sort_keys=False)
        return 0
    if args.command == "plan":
        try:
            return cmd_plan(args.config, args.scaling)
        except (ConfigError, InputError) as err:
            log.error("%s", err)
            return 2
    if args.command == "publish":
        from rankone.publish import publish

        try:
            index = publish(
                Path(args.results), snakemake_report=not args.no_snakemake_report, allow_dirty=args.allow_dirty
            )
        except InputError as err:
            log.error("%s", err)
            return 2
        print(f"Published: {index.resolve()} (serve it: python -m http.server -d {index.parent})")
        return 0
    if args.command == "compare":
        from rankone.compare import markdown, side_by_side, verdicts_of

        try:
            tables = [verdicts_of(study) for study in args.studies]
        except InputError as err:
            log.error("%s", err)
            return 2
        names = tuple(
            Path(study).name if Path(study).is_dir() else Path(study).parent.parent.name for study in args.studies
        )
        both, only = side_by_side(*tables, names)
        text = markdown(both, only, names) + "\n"
        sys.stdout.write(text)
        if args.out:  # the markdown, and the same rows as a table beside it (a study page shows it: rankone.publish)
            Path(args.out).write_text(text)
            both.to_csv(Path(args.out).with_suffix(".csv"), index=False)
        return 0
    if args.command == "crossover":
        from rankone.crossover import crossover_table, time_span, write

        try:
            spans = {Path(s).name: time_span(s) for s in args.studies}
            out = write(crossover_table(args.studies), args.out, spans)
        except (ConfigError, InputError) as err:
            log.error("%s", err)
            return 2
        print(f"Written: {out / 'crossover.md'} (and crossover.csv, crossover.png, crossover.json for rankone publish)")
        return 0
    if args.command == "captions":
        from rankone.figures import write_captions

        print(f"Written: {len(write_captions())} caption files under workflow/report/")
        return 0
    if args.command == "jobserver":
        from rankone.jobserver import serve

        command = args.served[1:] if args.served[:1] == ["--"] else args.served
        try:
            cfg = layered_study(args.config)  # its cpu_kernels are pinned for every job
            vllm = ("vllm",) if cfg.rollout.engine == "vllm" else ()  # a vLLM study's sampling jobs: vLLM too

            def listening(path: Path) -> None:
                log.info("jobserver: %s listens (%s kernels%s)", path, cfg.cpu_kernels, ", vLLM" if vllm else "")

            socket_path = Path(args.socket) if args.socket else None
            code = serve(socket_path, cfg.cpu_kernels, entry, listening, vllm, command or None)
        except (ConfigError, InputError) as err:
            log.error("%s", err)
            return 2
        return code or 0
    if args.command == "findings":
        from rankone.publish import FINDINGS, write_findings

        write_findings()
        print(f"Written: {FINDINGS} and the README's findings block")
        return 0
    try:
        if isinstance(args.config, list):  # check: config files layered in order (the first alone: as it is)
            cfg = layered_study(args.config)
            args.config = " + ".join(args.config)
        else:
            cfg = load(args.config)
        claim_for_job()  # a GPU job on a local box: its own GPU ids, before torch starts
        pin_cpu_kernels(cfg.cpu_kernels)
        refuse_other_kernels(cfg.cpu_kernels)
        if args.command == "train" and launched():
            from rankone.train.distributed import check_world

            check_world(job_devices(args))
        elif args.command == "train" and train_processes(args) > 1:
            from rankone.train.distributed import launch

            return launch(train_processes(args), list(sys.argv[1:] if argv is None else argv))
        if args.command == "resolve":
            write_resolved(cfg, Path(args.out))
            return 0
        args.func(cfg, args)
    except (ConfigError, InputError, DataError) as err:
        log.error("%s", err)
        return 2
    return 0


def write_resolved(cfg: StudyConfig, out: Path) -> None:
    """The validated config with every default filled in; rewritten only when it changes."""
    text = yaml.safe_dump(json.loads(cfg.model_dump_json()), sort_keys=False)
    if not out.is_file() or out.read_text() != text:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)


def entry() -> int:
    """The `rankone` command: `main`, and a reader that leaves early (`rankone runs | head`) ends it
    quietly, as it does a Unix tool, not with a traceback."""
    try:
        code = forward(sys.argv[1:], set(COMMAND_GROUPS["stages (each Snakemake job runs one)"]))
        if code is None:  # no jobserver, or not one for this command: run it here
            code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python exits
        return 0
    return code


if __name__ == "__main__":
    sys.exit(entry())
