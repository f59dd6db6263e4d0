"""The docs a newcomer reads: a short README, generated pages that are not stale, links that resolve."""

import re
from pathlib import Path

import pytest

from rankone import publish
from rankone.cli import config_reference

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_readme_is_a_doorway():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    assert not re.search(r"\b[0-9a-f]{7,40}\b", text), "no commit hashes in the README"


def test_config_reference_is_generated_from_the_schema():
    assert (ROOT / "docs" / "config.md").read_text() == config_reference(), (
        "docs/config.md is stale: rankone schema --markdown > docs/config.md"
    )


def test_config_reference_names_every_registered_choice_with_its_help():
    from rankone.objectives import BASELINES, LOSSES

    text = config_reference()
    for registry in (BASELINES, LOSSES):
        for name, choice in registry.items():
            assert f"| `{name}` | {choice.about} |" in text


def test_snakemakes_report_captions_are_the_figure_registrys():
    """A caption is written once (rankone.figures.FIGURES): every rule's report() caption file is generated from
    it, and every figure a rule or sub-study publishes has one."""
    from rankone.figures import FIGURES, caption_rst

    folder = ROOT / "workflow" / "report"
    assert {p.stem for p in folder.glob("*.rst")} == {Path(f).stem for f in FIGURES}
    for figure in FIGURES:
        assert (folder / f"{Path(figure).stem}.rst").read_text() == caption_rst(figure), (
            f"workflow/report/{Path(figure).stem}.rst is stale: rankone captions"
        )
    rules = "".join(p.read_text() for p in (ROOT / "workflow" / "rules").glob("*.smk"))
    for stem in re.findall(r'caption=f?"\.\./report/([a-z_]+|\{name\})\.rst"', rules):
        assert stem == "{name}" or f"{stem}.png" in FIGURES, stem


def test_findings_and_readme_block_come_from_the_published_reports(monkeypatch):
    monkeypatch.chdir(ROOT)
    assert (ROOT / "docs" / "findings.md").read_text() == publish.findings_markdown(), (
        "docs/findings.md is stale: rankone findings"
    )
    assert publish.readme_block() in (ROOT / "README.md").read_text(), (
        "README's findings block is stale: rankone findings"
    )


def test_readme_block_is_replaced_and_a_missing_block_is_an_error():
    text = f"intro\n{publish.MARKERS[0]}\nold line\n{publish.MARKERS[1]}\nrest\n"
    assert publish.with_readme_block(text, "NEW") == "intro\nNEW\nrest\n"
    with pytest.raises(ValueError, match="no generated findings block"):
        publish.with_readme_block("intro\n", "NEW")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_link_stays_inside_the_repository_and_resolves(doc):
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text()):
        if re.match(r"[a-z]+://", target):
            continue
        path = (doc.parent / target).resolve()
        assert path.is_relative_to(ROOT), f"{doc.name}: {target} leaves the repository"
        assert path.exists(), f"{doc.name}: {target} does not exist"
