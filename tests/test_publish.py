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

    index = publish(where / "results", snakemake_report=False, allow_dirty=True)  # the tree may be dirty here
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


def test_regime_by_task_sorts_rank_one_rows_by_what_their_runs_learned(tmp_path):
    """Hand-made published studies: `two-by-two` (RL and SFT on arithmetic), `default` (SFT on facts)
    and `crossover` (a 64-key table size, both regimes on facts). Each rank-1 row lands in its cell of
    the 2x2; the RL row says what it is about."""
    import pandas as pd
    import yaml

    from rankone.publish import regime_by_task, regime_by_task_markdown, rank1_verdicts

    arithmetic = {"name": "arithmetic", "params": {"max_operand": 9}}
    facts = {"name": "facts", "params": {"n_facts": 64, "digits": 2}}

    def study(name, tasks, verdicts, crossover=None):
        data = tmp_path / name / "data"
        data.mkdir(parents=True)
        (tmp_path / name / "config.yaml").write_text(yaml.safe_dump({"tasks": tasks}))
        if verdicts:
            pd.DataFrame(verdicts).to_csv(data / "verdicts.csv", index=False)
        if crossover:
            pd.DataFrame(crossover).to_csv(data / "crossover.csv", index=False)
        return {"experiment": name}

    def row(regime, verdict, gap, about=""):
        return {
            "regime": regime,
            "model": "llama-tiny",
            "method": "lora-r1",
            "rank": 1,
            "metric": "score",
            "verdict": verdict,
            "gap": gap,
            "ci_low": gap - 0.01,
            "ci_high": gap + 0.01,
            "seeds": 3,
            "judged_on": "confirmation seeds",
            "about": about,
        }

    entries = [
        study(
            "two-by-two",
            {"rl": arithmetic, "sft": arithmetic},
            [row("rl", "worse", -0.2, "learning"), row("sft", "parity", 0.0)],
        ),
        study("default", {"rl": arithmetic, "sft": facts}, [row("sft", "worse", -0.3)]),
        study("crossover", {"rl": facts, "sft": facts}, [], [{**row("rl", "inconclusive", -0.1), "n_facts": 64}]),
    ]
    table = regime_by_task(tmp_path, rank1_verdicts(tmp_path, entries))
    cells = {(r.task, r.regime, r.study): (r.verdict, r.about) for r in table.itertuples()}
    assert cells == {
        ("problems (arithmetic)", "RL", "two-by-two"): ("worse", "learning"),
        ("problems (arithmetic)", "SFT", "two-by-two"): ("parity", ""),
        ("a random table", "SFT", "default"): ("worse", ""),
        ("a random table", "RL", "crossover"): ("inconclusive", ""),
    }
    text = "\n".join(regime_by_task_markdown(table))
    assert text.count("\n| problems") == 2 and text.count("\n| a random table") == 2 and "(none published)" not in text


def test_a_study_whose_runs_another_published_study_holds_is_counted_once():
    """Sharing is read from the runs, not from the studies' names or configs: capacity and layers
    published one set of RL runs until capacity was republished at 2,000 RL steps (2026-12-08), and
    now share none; learning-pilot's first page judged on the runs of `learning` (a page since
    withdrawn) byte for byte, its rerun (other base models) shares none. The republished default
    judges on its confirmation runs over 3 base models, which no other study holds (levers shares
    only its sweep runs, which judge nothing in the default)."""
    from tests.conftest import ROOT

    from rankone.publish import published, rank1_verdicts

    table = rank1_verdicts(ROOT / "reports", published(ROOT / "reports"))
    rl = table[(table.part == "study") & (table.regime == "RL") & (table.model == "llama-tiny")].set_index("study")
    # capacity's republication (2026-12-08, 2,000 RL steps) no longer holds layers' runs (175 steps)
    for study in ("capacity", "layers", "learning-pilot", "default"):
        assert (rl.loc[study, "same_as"], rl.loc[study, "shares"]) == ("", ""), study
    assert rl.loc["levers", "same_as"] == ""


def test_a_study_built_from_uncommitted_changes_is_not_published_unless_allowed(fresh_study, monkeypatch):
    """An output whose provenance says the tree was dirty has no commit that reproduces it: publish
    stops with a one-line error naming the study, and `allow_dirty` publishes it with a warning."""
    import re

    import pytest

    from rankone.io import InputError

    where, cfg = fresh_study
    monkeypatch.chdir(where)
    at = Layout(cfg)
    run = cfg.runs()[0]
    at.train(run).mkdir(parents=True)
    git = {"commit": "b42ad1f8def8b5e858fa1f50bad14590be8ab0c8", "dirty": True}
    (at.train(run) / "run.json").write_text(json.dumps({"status": "completed", "provenance": {"git": git}}))

    stop = r"smoke: \d+ outputs were built from uncommitted changes to the code \(commit [0-9a-f, ]*b42ad1f8def8"
    with pytest.raises(InputError, match=stop):
        publish(where / "results", snakemake_report=False)
    assert not (at.report / "index.html").exists()

    site = publish(where / "results", snakemake_report=False, allow_dirty=True).read_text()
    page = (at.report / "index.html").read_text()
    assert "built from uncommitted changes on top of commit" in page and "no commit reproduces them" in page
    assert re.search(r"b42ad1f8def8[0-9a-f, ]* \+ uncommitted changes \(\d+ outputs\)", site)


def test_uncommitted_changes_outside_the_code_leave_an_output_reproducible():
    """A changed config file (published resolved beside the study), prose, a test or a make target does
    not stop a commit from reproducing an output; a changed source file does; a record from before provenance listed
    the changed paths counts when a clean output of its stage and commit ran the same code."""
    from rankone.publish import clean_code, from_commit

    def record(dirty, changed=None, digest="c0de"):
        git = {"commit": "abc", "dirty": dirty} | ({"changed": changed} if changed is not None else {})
        return {"stage": "train", "code_digest": digest, "git": git}

    clean = record(False, [])
    assert from_commit(clean, clean_code([clean]))
    assert from_commit(record(True, ["config/experiments/levers.yaml", "CHANGELOG.md"]), set())
    assert from_commit(record(True, ["tests/conftest.py", "benchmarks/test_speed.py", "Makefile"]), set())
    assert not from_commit(record(True, ["config/default.yaml", "src/rankone/rl/step.py"]), set())
    assert from_commit(record(True), clean_code([clean, record(True)]))  # legacy: its code is a clean run's
    assert not from_commit(record(True, digest="f00d"), clean_code([clean]))
    assert not from_commit(record(True), clean_code([record(True)]))


def test_the_index_figure_draws_every_rank_one_verdict_in_margins():
    """The index opens with one figure: a row per (study, part, regime, model) that has a margin, its
    gap and interval in margins, the margins drawn, an arrow where an interval runs off the scale."""
    import math
    import re

    import pandas as pd

    from rankone.publish import FOREST_SPAN, rank1_figure

    def row(study, regime, gap, low, high, verdict, margin=0.05, part="study"):
        return dict(
            study=study,
            part=part,
            regime=regime,
            model="m",
            rank=1,
            verdict=verdict,
            gap=gap,
            ci_low=low,
            ci_high=high,
            seeds=4,
            margin=margin,
        )

    table = pd.DataFrame(
        [
            row("a", "RL", 0.01, -0.02, 0.03, "parity"),
            row("b", "SFT", -1.2, -1.4, -1.0, "worse", margin=0.1),  # 12 margins: off the scale
            row("c", "RL", 0.0, -0.1, 0.1, "not judged (FullFT did not learn it)", part="64 keys"),
            row("d", "RL", 0.0, -0.1, 0.1, "inconclusive", margin=math.nan),  # no margin: not drawn
        ]
    )
    svg = rank1_figure(table)
    assert svg.startswith("<figure") and svg.count("<circle") == 3 and svg.count("stroke-dasharray") == 2
    assert "a · RL · m" in svg and "c · 64 keys · RL · m" in svg and "d · RL" not in svg
    assert svg.count("<path") == 2 and ">not judged<" in svg  # both ends of b's interval past -FOREST_SPAN
    assert svg.count('fill="white"') == 1  # not judged, whatever its reason: an open marker
    assert f">{-FOREST_SPAN:+d}<" in svg and not re.search(r"\bnan\b", svg)
    assert rank1_figure(table.iloc[:0]) == ""


def test_a_study_page_puts_its_verdicts_in_one_table_with_rank_one_standing_out():
    import math

    import pandas as pd

    from rankone.publish import verdict_table

    def row(method, rank, verdict, gap, low, high, metric="score"):
        return dict(
            regime="rl",
            model="m",
            method=method,
            rank=rank,
            metric=metric,
            verdict=verdict,
            gap=gap,
            ci_low=low,
            ci_high=high,
            seeds=12,
            about="learning",
        )

    verdicts = pd.DataFrame(
        [
            row("lora-r1", 1, "worse", -0.2, -0.3, -0.1),
            row("lora-r16", 16, "parity", 0.0, -0.01, 0.01),
            row("temperature", math.nan, "worse", -0.4, math.nan, math.nan),
            row("lora-r1", 1, "worse", -0.3, -0.4, -0.2, metric="greedy_accuracy"),  # one metric: the score
        ]
    )
    html = verdict_table(verdicts)
    assert html.count("<tr") == 4 and html.count("class=rank1") == 1
    assert "<tr class=rank1><td>RL · m</td>" in html and "-0.200 [-0.300, -0.100]" in html
    assert "no interval" in html and "nan" not in html
    assert verdict_table(pd.DataFrame()) == ""


def test_every_page_takes_a_studys_rank_one_numbers_from_its_one_table():
    """One table per study (its data/verdicts.csv, copied beside its page): every committed study's
    rank-1 gap and interval read the same on the index, on its own page (every page published with
    the verdict table), and in its results.json where it has one, so two pages cannot disagree."""
    import html as html_lib

    from rankone.publish import _gap, rank1_verdicts
    from tests.conftest import ROOT

    reports = ROOT / "reports"
    index = html_lib.unescape((reports / "index.html").read_text())
    entries = [json.loads(p.read_text()) for p in sorted(reports.glob("*/study.json"))]
    rows = rank1_verdicts(reports, entries)
    assert len(rows)
    pages = 0
    for r in rows.itertuples():
        where = f"{r.study} {r.part} {r.regime} {r.model}"
        assert _gap(r) in index, where
        if r.part != "study":
            continue
        page = html_lib.unescape((reports / r.study / "index.html").read_text())
        if 'class="verdicts"' in page:  # published with the verdict table
            assert _gap(r) in page, where
            pages += 1
        results = reports / r.study / "results.json"
        for m in json.loads(results.read_text())["methods"] if results.is_file() else []:
            if (m["regime"].upper(), m["model"], m["method"]) == (r.regime, r.model, r.method):
                assert (m["against_fullft"]["gap"], m["against_fullft"]["verdict"]) == (r.gap, r.verdict), where
    assert pages or not any('class="verdicts"' in p.read_text() for p in reports.glob("*/index.html"))


def test_a_rewritten_report_does_not_make_the_code_dirty(tmp_path):
    import subprocess

    from rankone.io import git_state

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "index.html").write_text("old")
    (tmp_path / "train.py").write_text("x = 1\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    (tmp_path / "reports" / "index.html").write_text("new")  # as `rankone publish` leaves it, page after page
    assert git_state(tmp_path)["dirty"] is False
    (tmp_path / "train.py").write_text("x = 2\n")
    assert git_state(tmp_path) | {"commit": None} == {"commit": None, "dirty": True, "changed": ["train.py"]}


def test_a_study_of_two_commits_is_rerun_from_the_newer_and_names_the_study_it_shares_runs_with(
    fresh_study, monkeypatch
):
    """A study resumed or seeded across commits lists both; its page reruns it from the commit of
    the output finished last (not the first in the list), and runs copied from another study
    (scripts/share-runs' record) are named on the page (left out of its time: tests/test_share_runs.py);
    a figure an older page showed and this one does not is removed."""
    from rankone.status import SHARED_RECORD

    where, cfg = fresh_study
    monkeypatch.chdir(where)
    at = Layout(cfg)
    old, new = cfg.runs()[0], cfg.runs()[1]
    for run, commit, started, finished in [
        (old, "aaaa" * 10, "2026-12-01T00:00:00+00:00", "2026-12-01T05:00:00+00:00"),  # copied: hours of it
        (new, "ffff" * 10, "2099-12-06T10:00:00+00:00", "2099-12-06T10:30:00+00:00"),  # after the fixture's
    ]:
        at.train(run).mkdir(parents=True)
        provenance = {"git": {"commit": commit, "dirty": False}, "started": started, "finished": finished}
        (at.train(run) / "run.json").write_text(json.dumps({"status": "completed", "provenance": provenance}))
    shared = {
        "source": "an-earlier-study",
        "methods": [old.method],
        "folders": [str(at.train(old).relative_to(at.root))],
    }
    (at.root / SHARED_RECORD).write_text(json.dumps(shared))

    at.report.mkdir(parents=True, exist_ok=True)
    (at.report / "sft_curves.png").write_bytes(b"an older page's figure")
    publish(where / "results", snakemake_report=False, allow_dirty=True)  # the fixture's tree may be dirty
    page = (at.report / "index.html").read_text()
    assert not (at.report / "sft_curves.png").exists(), "a figure the page does not show stays published"
    assert "git checkout ffffffffffff" in page and "aaaaaaaaaaaa, " in page
    assert f"The runs of {old.method} are an-earlier-study's" in page


def test_a_committed_page_shows_no_figure_of_a_regime_its_study_did_not_run():
    """An SFT-only study draws no RL curves, no bits by RL and no sharpening profile on its page: they
    would be empty axes (the rule itself: tests/test_workflow.py, on the smoke study's tables). Two
    SFT-only pages published before the fix show them until their studies run again (issue #42 point
    7), as do seven RL-only pages the SFT curves (fixed in the code earlier); this test holds every
    other committed page to it. The one SFT-only page it read, the MLP crossover at 2,048 keys, has
    run RL since (2026-12-06), so none is left to read today."""
    published_before = {"crossover-n1024x8", "crossover-n4096"}  # the all-linear crossover's SFT-only sizes
    import yaml

    from tests.conftest import ROOT

    for config in sorted((ROOT / "reports").glob("*/config.yaml")):
        regimes = yaml.safe_load(config.read_text()).get("regimes", [])
        page = (config.parent / "index.html").read_text()
        if "rl" not in regimes and config.parent.name not in published_before:
            for figure in ("rl_curves.png", "rl_bits.png", "sharpening.png"):
                assert f'src="{figure}"' not in page, f"{config.parent.name}: {figure}"
