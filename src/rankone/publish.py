"""`make publish`: a static site under reports/ from every study under results/.

- `reports/index.html` lists each study that has results: a one-line headline (rank 1
  against FullFT, per regime and model), the commit, the date and the run time.
- `reports/<experiment>/index.html` opens with the answer in plain sentences beside the
  forest plot, then one section per analysis (the report stage's sections: figures as PNG
  files, tables rounded as the report rounds them), every analysis table as a CSV under
  `data/`, provenance (commit, environment, config) and the command that reproduces the
  study, and Snakemake's own report (`snakemake-report.zip`, written here) beside it.
- A study with missing or failed runs is published too: its page says which runs are
  missing or failed and why the analysis is absent. A run counts as complete only when its
  `run.json` says so (rankone.status).

Nothing here trains or analyses: it reads what the stages wrote.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import shutil
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pandas as pd

from rankone import report, status
from rankone.config import StudyConfig, load
from rankone.figures import FIGURES
from rankone.io import atomic_path, log
from rankone.paths import Layout

ZIP = "snakemake-report.zip"
LOCK = Path("envs") / "cpu.lock.txt"
STYLE = """
*{box-sizing:border-box}body{font:15px/1.5 system-ui,sans-serif;margin:0;color:#1d1d1f}
header{background:#f4f4f6;border-bottom:1px solid #ddd;padding:.5em 1.5em}
header a{margin-right:1em}main{max-width:1240px;margin:0 auto;padding:0 1.5em 3em}
h1{font-size:1.4em;margin:.3em 0}p.method{font-size:13px;color:#444}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #eee}
.answer{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:1.5em;align-items:start}
.answer img{width:100%;max-height:560px;object-fit:contain}.answer ul{margin:0;padding-left:1.1em;font-size:13px;
line-height:1.4}.answer li{margin-bottom:.35em}@media(max-width:900px){.answer{grid-template-columns:1fr}}
figure{margin:1em 0}figure img{max-width:100%;height:auto;max-height:640px}figcaption{color:#555;font-size:13px}
table{border-collapse:collapse;font-size:13px;margin:.5em 0}td,th{padding:3px 8px;border-bottom:1px solid #ddd;
text-align:right}th{background:#fafafa}.scroll{overflow-x:auto}.note{background:#fff6e0;padding:.6em 1em;
border-left:4px solid #e0a800}code,pre{background:#f4f4f6;padding:2px 4px}pre{padding:.6em;overflow-x:auto}
nav.toc{font-size:13px;margin:.5em 0}nav.toc a{margin-right:.8em}
"""


def studies(results_root: Path) -> list[Path]:
    """Every study under `results_root` (one folder per experiment, with its resolved study.yaml)."""
    return sorted(p for p in Path(results_root).glob("*/study.yaml"))


def publish(results_root: Path = Path("results"), snakemake_report: bool = True) -> Path:
    """Publish every study under `results_root`; returns the site's index page."""
    entries, reports_root = [], None
    for study_yaml in studies(results_root):
        try:
            cfg = load(study_yaml)
        except Exception as err:  # an old or hand-edited study.yaml: say so, publish the rest
            log.warning("skipping %s: %s", study_yaml, err)
            continue
        entry = publish_study(cfg, study_yaml, snakemake_report)
        reports_root = Path(cfg.reports_dir)
        if entry is not None:
            entries.append(entry)
    reports_root = reports_root or Path("reports")
    reports_root.mkdir(parents=True, exist_ok=True)
    index = reports_root / "index.html"
    with atomic_path(index) as tmp:
        tmp.write_text(site_index(entries))
    return index


def publish_study(cfg: StudyConfig, study_yaml: Path, snakemake_report: bool = True) -> dict | None:
    """Write one study's page (and data, config, Snakemake report); None when it has no results at all."""
    at = Layout(cfg)
    grid = status.grid(cfg)
    counts = status.summary(grid)
    if counts["missing"] == len(grid) and not (at.analysis / "runs.csv").is_file():
        return None
    out = at.report
    out.mkdir(parents=True, exist_ok=True)
    complete = (at.analysis / "verdicts.csv").is_file() and (out / "forest.png").is_file()
    shutil.copyfile(study_yaml, out / "config.yaml")
    csvs, too_big = copy_tables(at.analysis, out / "data")
    zip_note = ""
    if complete and snakemake_report:
        zip_note = write_snakemake_report(study_yaml, out / ZIP)
    analysis = report.tables(at) if complete else None
    entry = {
        "experiment": cfg.experiment, "complete": complete, "counts": counts, "runs": len(grid),
        "headline": one_line(analysis["verdicts"]) if complete else f"not finished: {status.describe(counts)}",
        **provenance(at),
    }
    page = experiment_page(cfg, at, entry, grid, analysis, (csvs, too_big), (out / ZIP).is_file(), zip_note)
    with atomic_path(out / "index.html") as tmp:
        tmp.write_text(page)
    return entry


MAX_TABLE_BYTES = 1 << 20  # a published site stays small: larger tables stay in results/


def copy_tables(analysis: Path, to: Path) -> tuple[list[str], list[str]]:
    """Every analysis table up to 1 MiB as a downloadable CSV: (copied, left out for size)."""
    tables = sorted(analysis.glob("*.csv")) if analysis.is_dir() else []
    copied = [p.name for p in tables if p.stat().st_size <= MAX_TABLE_BYTES]
    if copied:
        to.mkdir(parents=True, exist_ok=True)
        for name in copied:
            shutil.copyfile(analysis / name, to / name)
    return copied, [f"{p.name} ({p.stat().st_size / 2**20:.1f} MiB)" for p in tables if p.name not in copied]


def write_snakemake_report(study_yaml: Path, zip_path: Path) -> str:
    """Snakemake's own report of the study; '' when written, else why not."""
    out = subprocess.run([sys.executable, "-m", "snakemake", "--report", str(zip_path.absolute()),
                          "--configfile", str(study_yaml)], capture_output=True, text=True)
    if out.returncode == 0 and zip_path.is_file():
        return ""
    reason = next((line for line in out.stderr.splitlines() if "Error" in line), "see `snakemake --report`")
    log.warning("%s: Snakemake's report failed: %s", study_yaml, reason)
    return f"Snakemake's report could not be written ({reason})."


def provenance(at: Layout) -> dict:
    """Commit, time span and environment of the runs, from the provenance the stages recorded."""
    records = []
    for pattern in ("data/*/manifest.json", "models/*/rankone.json", "**/run.json"):  # runs of sub-studies too
        for path in at.root.glob(pattern):
            try:
                records.append(json.loads(path.read_text()).get("provenance") or {})
            except (json.JSONDecodeError, OSError):
                continue
    started = [r["started"] for r in records if r.get("started")]
    finished = [r["finished"] for r in records if r.get("finished")]
    commits = sorted({(r.get("git") or {}).get("commit") or "unknown" for r in records if "git" in r})
    packages = next((r["packages"] for r in records if r.get("packages")), {})
    span = (datetime.fromisoformat(max(finished)) - datetime.fromisoformat(min(started))).total_seconds() \
        if started and finished else None
    return {
        "commit": ", ".join(c[:12] for c in commits) or "unknown",
        "date": max(finished)[:10] if finished else "",
        "run_time": _duration(span),
        "span_seconds": span,
        "environment": hashlib.sha256(json.dumps(packages, sort_keys=True).encode()).hexdigest()[:16],
        "lock": hashlib.sha256(LOCK.read_bytes()).hexdigest()[:16] if LOCK.is_file() else "no lock file here",
    }


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    h, rest = divmod(int(seconds), 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}"


def one_line(verdicts: pd.DataFrame) -> str:
    """Rank 1 (the lowest LoRA rank) against FullFT on each regime's score, per model."""
    if not len(verdicts):
        return "no LoRA-vs-FullFT pairs"
    score = verdicts[(verdicts.metric == "score") & verdicts["rank"].notna()]
    parts = []
    for regime, rows in score.groupby("regime", sort=False):
        low = rows[rows["rank"] == rows["rank"].min()]
        rank = int(low["rank"].iloc[0])
        parts.append(f"{regime.upper()}: rank {rank} " + ", ".join(
            f"{r.verdict} ({r.model}, {r.gap:+.3f})" for r in low.itertuples()))
    return "; ".join(parts) + " against FullFT"


class Raw(str):
    """HTML written here, inserted as it is."""


def _text(block: str) -> str:
    return re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", html.escape(block))


def _block(b) -> str:
    if isinstance(b, Raw):
        return b
    if isinstance(b, pd.DataFrame):
        return f'<div class="scroll">{b.to_html(index=False, border=0, na_rep="")}</div>'
    if isinstance(b, tuple):
        caption = html.escape(FIGURES.get(b[1], b[1]))
        return (f'<figure><img src="{html.escape(b[1])}" alt="{caption}">'
                f"<figcaption>{caption}</figcaption></figure>")
    return f"<p>{_text(b)}</p>"


def _anchor(heading: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", heading.lower()).strip("-")


def _page(title: str, body: str, home: str) -> str:
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width,initial-scale=1'><link rel='icon' href='data:,'><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body><header><a href='{home}'>rankone: all studies</a></header>"
            f"<main>{body}</main></body></html>\n")


def experiment_page(cfg: StudyConfig, at: Layout, entry: dict, grid: list, analysis: dict | None,
                    tables: tuple[list[str], list[str]], has_zip: bool, zip_note: str) -> str:
    """One study's page; `analysis`: the report's tables (rankone.report.tables), None when unfinished."""
    body = [f"<h1>{html.escape(cfg.experiment)}</h1>",
            f"<p>{entry['runs']} training runs: {status.describe(entry['counts'])}</p>"]
    incomplete = [s for s in grid if s.state != "completed"]
    sections = []
    if analysis is not None:
        sections = report.build_sections(cfg, at, **analysis)
        answer = report.findings(analysis["verdicts"], analysis["plateau"], analysis["judged"])
        method = [b for b in sections[0][1] if isinstance(b, str) and b not in answer]
        figures = [b for b in sections[0][1] if isinstance(b, tuple) and b[1] != "forest.png"]  # the trajectory
        body.append('<section class="answer" id="the-answer"><img src="forest.png" alt="'
                    + html.escape(FIGURES["forest.png"]) + '"><div><h2 style="margin-top:0">The answer</h2><ul>'
                    + "".join(f"<li>{_text(a)}</li>" for a in answer) + "</ul></div></section>"
                    + "".join(_block(f) for f in figures)
                    + "".join(f'<p class="method">{_text(m)}</p>' for m in method))
        sections = sections[1:]
    else:
        body.append('<p class="note">This study has not finished: the analysis and the report have not run, so '
                    "there are no verdicts yet. Runs not complete are listed below; rerun the study "
                    "(<code>snakemake</code>) to finish them.</p>")
    if incomplete:
        rows = pd.DataFrame([{"part": s.sub_study or "study", "run": s.run.path, "state": s.state,
                              "log": str(s.log) if s.log else ""} for s in incomplete])
        sections.append(("Runs not complete", [
            f"{len(incomplete)} of {len(grid)} runs are not complete (a run is complete only when its run.json "
            "says so; 'started' means running or interrupted, 'failed' that its job's log ends in an error).",
            rows]))
    csvs, too_big = tables
    downloads = "".join(f'<li><a href="data/{html.escape(n)}">{html.escape(n)}</a></li>' for n in csvs)
    if too_big:
        downloads += (f"<li>Not published for size (in results/{html.escape(cfg.experiment)}/analysis/): "
                      + html.escape(", ".join(too_big)) + "</li>")
    zip_link = (f'<a href="{ZIP}">Snakemake\'s report</a> (zip: open report.html inside)' if has_zip
                else html.escape(zip_note or "Snakemake's report: not published for this study (`make publish` "
                                 "writes it from a finished study)."))
    command = (f"git checkout {entry['commit'].split(',')[0]}\n"
               f"snakemake --cores all --configfile reports/{cfg.experiment}/config.yaml\n"
               "make publish")
    sections.append(("Downloads and reproduction", [
        Raw(f"<ul><li>{zip_link}</li><li><a href='config.yaml'>config.yaml</a>: the resolved config, every "
        "default filled in</li>" + (f"<li>Tables (CSV):<ul>{downloads}</ul></li>" if downloads else "")
        + "</ul>"),
        pd.DataFrame([
            {"item": "commit of the runs", "value": entry["commit"]},
            {"item": "finished", "value": entry["date"]},
            {"item": "wall time (first job start to last job end)", "value": entry["run_time"]},
            {"item": "environment (sha256 of the package versions the runs recorded)", "value": entry["environment"]},
            {"item": "envs/cpu.lock.txt at publish (sha256)", "value": entry["lock"]},
            {"item": "config digest", "value": cfg.digest()},
            {"item": "published", "value": time.strftime("%Y-%m-%d %H:%M %Z")},
        ]),
        Raw("<p>To reproduce (same commit, from the repository root):</p><pre>" + html.escape(command) + "</pre>"),
    ]))
    toc = "".join(f'<a href="#{_anchor(h)}">{html.escape(h)}</a>' for h, _ in sections)
    body.append(f'<nav class="toc">{toc}</nav>')
    for heading, blocks in sections:
        body.append(f'<h2 id="{_anchor(heading)}">{html.escape(heading)}</h2>')
        body += [_block(b) for b in blocks]
    return _page(f"rankone: {cfg.experiment}", "".join(body), "../index.html")


def site_index(entries: list[dict]) -> str:
    rows = "".join(
        f"<tr><td style='text-align:left'><a href='{html.escape(e['experiment'])}/index.html'>"
        f"{html.escape(e['experiment'])}</a></td><td style='text-align:left'>{html.escape(e['headline'])}</td>"
        f"<td>{html.escape(e['commit'])}</td><td>{html.escape(e['date'])}</td><td>{html.escape(e['run_time'])}</td>"
        f"<td>{e['counts']['completed']}/{e['runs']}</td></tr>" for e in entries)
    body = ("<h1>rankone: published studies</h1><p>How much adapter capacity does RL need? Each study compares "
            "LoRA ranks with full fine-tuning at each method's best learning rate; a verdict of parity needs the "
            "whole confidence interval inside the margin.</p>"
            "<table><tr><th>study</th><th style='text-align:left'>headline</th><th>commit</th><th>finished</th>"
            f"<th>wall time</th><th>runs complete</th></tr>{rows}</table>"
            + ("" if entries else "<p>No study has results yet.</p>"))
    return _page("rankone: published studies", body, "index.html")
