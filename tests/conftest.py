"""Shared test fixtures: where the shared public data lives, and how to run the CLI."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# The prepared-model cache (nlpkit/lm/prepared/) of every test, and of every CLI run a test starts, goes to a
# temporary directory removed at the end: the suite never writes into the user's cache.
# (Made once per process: a test module importing `tests.conftest` runs this file a second time.)
_made = os.environ.get("NLPKIT_TEST_CACHE_DIR", "").split(":", 1)
_CACHE_DIR = _made[1] if _made[0] == str(os.getpid()) else tempfile.mkdtemp(prefix="nlpkit-test-cache-")
os.environ["NLPKIT_TEST_CACHE_DIR"] = f"{os.getpid()}:{_CACHE_DIR}"
os.environ["NLPKIT_CACHE_DIR"] = _CACHE_DIR
os.environ.pop("NLPKIT_RESULTS_CACHE", None)  # a results cache is what a test asks for, never the user's


def pytest_unconfigure(config) -> None:
    from nlpkit.lm.prepared import flush
    flush()  # entries still being written by a thread
    shutil.rmtree(_CACHE_DIR, ignore_errors=True)


FIXTURES = Path(__file__).resolve().parent / "fixtures"

# A suite started in the background by a shell without job control (`cmd &`, nohup) inherits SIGINT ignored, and so
# would every nlpkit the Ctrl-C tests start (Python installs no KeyboardInterrupt handler then): restore the default
# here, so children get SIGINT's default disposition whatever started the suite.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

try:   # no wall-clock deadline per example: the suite's two xdist workers (and a busy machine) slow any test down
    from hypothesis import settings as _hypothesis_settings
    _hypothesis_settings.register_profile("nlpkit", deadline=None)
    _hypothesis_settings.load_profile("nlpkit")
except ImportError:
    pass


def nlpkit_data_dir() -> Path | None:
    """The shared data folder (`NLPKIT_DATA`, else `../shared/data` beside the repo), or None."""
    env = os.environ.get("NLPKIT_DATA")
    candidates = [Path(env)] if env else []
    candidates += [REPO.parent / "shared" / "data", REPO.parent.parent / "shared" / "data"]
    for c in candidates:
        if c.is_dir():
            return c
    return None


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path to ../shared/data; skips the test with a reason when it is absent."""
    d = nlpkit_data_dir()
    if d is None:
        pytest.skip("shared data folder ../shared/data (or $NLPKIT_DATA) is absent")
    return d


def run_cli(*args: str, input: str | bytes | None = None, env: dict | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
    """Run the real `nlpkit` entry point in a subprocess; returns the CompletedProcess (bytes out)."""
    full_env = dict(os.environ)
    full_env.pop("NLPKIT_DEBUG", None)
    if env:
        full_env.update(env)
    if isinstance(input, str):
        input = input.encode("utf-8")
    return subprocess.run([sys.executable, "-m", "nlpkit", *args], input=input,
                          capture_output=True, env=full_env, timeout=timeout, cwd=str(REPO))


@pytest.fixture
def cli():
    """`cli("edit-distance", "a", "b")` -> CompletedProcess with .returncode, .stdout, .stderr (bytes)."""
    return run_cli
