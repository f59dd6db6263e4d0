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
