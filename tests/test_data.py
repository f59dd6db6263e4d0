"""Corrupt inputs are refused before any training, with the bad file named."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
import yaml

from rankone.data import DataError, verify
from tests.conftest import smoke_dict


@pytest.fixture
def data_copy(study, tmp_path):
    cfg, at = study
    root = tmp_path / "results"
    shutil.copytree(at.root, root / cfg.experiment)
    config = tmp_path / "study.yaml"
    config.write_text(yaml.safe_dump(smoke_dict(results_dir=str(root))))
    return config, root / cfg.experiment / "data"


def test_verify_accepts_untouched_data(data_copy):
    _, data = data_copy
    assert verify(data / "sft")["splits"]["train"]["rows"] > 0


def test_truncated_dataset_is_refused(data_copy):
    config, data = data_copy
    train = data / "sft" / "train.parquet"
    train.write_bytes(train.read_bytes()[: train.stat().st_size // 2])
    with pytest.raises(DataError, match="train.parquet: checksum mismatch"):
        verify(data / "sft")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "rankone",
            "train",
            "--config",
            str(config),
            "--run",
            "sft/qwen3-tiny/fullft/lr0.001/seed0",
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode != 0
    assert "checksum mismatch" in out.stderr and "trainable parameters" not in out.stderr


def test_checksum_mismatch_after_an_edit(data_copy):
    from rankone.data import read_split, write_split

    _, data = data_copy
    rows = read_split(data / "rl", "val")
    rows[0]["answer"] = "9" + rows[0]["answer"]  # a well-formed file, one answer changed
    write_split(data / "rl" / "val.parquet", rows)
    with pytest.raises(DataError, match="val.parquet: checksum mismatch"):
        verify(data / "rl")


def test_splits_go_through_datasets_with_their_fingerprint(data_copy):
    import datasets

    _, data = data_copy
    manifest = verify(data / "rl")
    val = datasets.Dataset.from_parquet(str(data / "rl" / "val.parquet"), keep_in_memory=True)
    assert val.column_names == ["prompt", "answer"] and len(val) == manifest["splits"]["val"]["rows"]
    assert len(set(m["fingerprint"] for m in manifest["splits"].values())) == len(manifest["splits"])


def test_missing_manifest(data_copy):
    _, data = data_copy
    (data / "rl" / "manifest.json").unlink()
    with pytest.raises(DataError, match="manifest.json is missing"):
        verify(data / "rl")


def test_format_lines_come_from_tasks_format_when_set(tmp_path):
    """tasks.format gives the warm-start's format lines in place of tasks.sft's (issue #40: SFT on a
    1-bit table whose base learned its format from another kind of table): the corpus holds the
    format task's warm-up lines and none of the SFT task's, at the same share."""
    from rankone import data
    from rankone.config import ConfigError, validate
    from rankone.models.build import warmup_corpus
    from rankone.paths import Layout

    bit = {"name": "facts", "params": {"n_facts": 64, "digits": 1, "alphabet": 2, "n_val": 8, "n_test": 8}}
    codes = {"name": "facts", "params": {"n_facts": 64, "digits": 4, "n_val": 8, "n_test": 8}}
    smoke = smoke_dict(results_dir=str(tmp_path), tasks={"rl": bit, "sft": bit}, capacity=None, levers=None)
    share = smoke["pretrain"]["sft_format_share"]
    plain, formatted = validate(smoke), validate({**smoke, "tasks": {**smoke["tasks"], "format": codes}})
    at = Layout(formatted)
    for name in ("rl", "sft", "format"):
        data.build(formatted, name, at.data(name))
    four_digit = {p for p, a in warmup_corpus(formatted, at.data_root, "llama-tiny") if len(a) == 4}
    format_prompts = {r["prompt"] for r in data.read_split(at.data("format"), "warmup")}
    assert four_digit and four_digit <= format_prompts
    n_format = sum(len(a) == 4 for _, a in warmup_corpus(formatted, at.data_root, "llama-tiny"))
    total = formatted.pretrain.steps * formatted.pretrain.batch_size
    assert n_format == round(total * share)
    assert not any(len(a) == 4 for _, a in warmup_corpus(plain, at.data_root, "llama-tiny"))  # tasks.sft's 1-bit lines
    with pytest.raises(ConfigError, match="tasks.format is set but pretrain.sft_format_share is 0"):
        validate(
            {
                **smoke,
                "tasks": {**smoke["tasks"], "format": codes},
                "pretrain": {**smoke["pretrain"], "sft_format_share": 0},
            }
        )
