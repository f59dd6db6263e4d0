"""Exact pins (`name==version`) read from a requirements file, a lock or a `pip freeze`: one
parser for the tests that keep every pin equal to the lock and for the image build's check."""

from __future__ import annotations

import re
from collections.abc import Iterable


def normalise(name: str) -> str:
    """A distribution's name as PyPI compares it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_pins(lines: Iterable[str]) -> dict[str, str]:
    """{normalised name: version} of every `name==version` line; comments and pip options skipped."""
    pins = {}
    for line in lines:
        line = line.split("#")[0].strip()
        if "==" in line and not line.startswith("-"):
            name, version = line.split("==")
            pins[normalise(name)] = version.strip()
    return pins
