"""Fixtures shared by the Python tests: cargo-built radiohost binaries and the
installed `radiohost` package."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _cargo_build(*args):
    if shutil.which("cargo") is None:
        pytest.skip("SKIPPED: cargo is not on PATH; radiohost cannot be built")
    out = subprocess.run(["cargo", "build", "-q", *args], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.fail(f"cargo build {' '.join(args)} failed:\n{out.stderr}")


@pytest.fixture(scope="session")
def target_dir():
    if shutil.which("cargo") is None:
        pytest.skip("SKIPPED: cargo is not on PATH; radiohost cannot be built")
    meta = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )
    return Path(json.loads(meta.stdout)["target_directory"]) / "debug"


@pytest.fixture(scope="session")
def tool(target_dir):
    _cargo_build("-p", "radiohost-iq", "--example", "sigmf_tool")
    return target_dir / "examples" / "sigmf_tool"


@pytest.fixture(scope="session")
def radiohost(target_dir):
    _cargo_build("-p", "radiohost", "--bin", "radiohost")
    return target_dir / "radiohost"


@pytest.fixture(scope="session")
def rh():
    """The installed radiohost package. scripts/test installs it and sets
    RADIOHOST_REQUIRE_PYTHON=1, making an import failure a failure."""
    try:
        import radiohost
    except ImportError as e:
        if os.environ.get("RADIOHOST_REQUIRE_PYTHON") == "1":
            raise
        reason = f"SKIPPED: the radiohost package is not installed ({e}); run scripts/test --python"
        print(reason, file=sys.__stderr__)
        pytest.skip(reason)
    return radiohost
