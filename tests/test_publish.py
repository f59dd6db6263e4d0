"""`rankone publish` on a study that has not finished: it still publishes, and the page says
what is missing; a run folder without run.json is never shown as complete."""

from __future__ import annotations

import json

from rankone import status
from rankone.paths import Layout
from rankone.publish import publish


def test_an_unfinished_study_is_published_with_what_is_missing(fresh_study, monkeypatch):
    where, cfg = fresh_study
    monkeypatch.chdir(where)
    at = Layout(cfg)
    runs = cfg.runs()
    done, half = runs[0], runs[2]
    at.train(done).mkdir(parents=True)
    (at.train(done) / "run.json").write_text(json.dumps({"status": "completed"}))
    at.train(half).mkdir(parents=True)
    (at.train(half) / "metrics.jsonl").write_text('{"step": 0}\n')  # everything but run.json
    (at.train(half) / "weights").mkdir()

    index = publish(where / "results", snakemake_report=False)
    page = (at.report / "index.html").read_text()
    total = len(status.grid(cfg))
    assert f"{total} training runs: 1 completed, 1 started, {total - 2} missing" in page
    assert "This study has not finished" in page and "Runs not complete" in page
    assert f"<td>{half.path}</td>" in page and f"<td>{done.path}</td>" not in page
    assert (at.report / "config.yaml").is_file()
    assert 'href="snakemake-report.zip"' not in page  # no link to a Snakemake report that was not written
    site = index.read_text()
    assert f"{cfg.experiment}/index.html" in site and "not finished: 1 completed, 1 started" in site
    assert f"<td>1/{total}</td>" in site


def test_a_study_without_any_result_is_left_out(fresh_study, monkeypatch):
    where, cfg = fresh_study
    monkeypatch.chdir(where)
    site = publish(where / "results", snakemake_report=False).read_text()
    assert "No study has results yet" in site and not (Layout(cfg).report / "index.html").exists()
