"""SECTORCRYPT_STRICT=1 (set by CI) turns every skip of these tests into a failure with the
same reason: checked on a scratch test file that needs a tool no machine has, run by
pytest in a child process with this folder's conftest.py."""

import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCRATCH = """
from conftest import need


def test_needs_a_missing_tool():
    need("sectorcrypt-no-such-tool")
"""


def run_scratch(tmp_path, strict):
    shutil.copy(os.path.join(HERE, "conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "test_scratch.py").write_text(SCRATCH)
    env = {k: v for k, v in os.environ.items() if k != "SECTORCRYPT_STRICT"}
    if strict is not None:
        env["SECTORCRYPT_STRICT"] = strict
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )


def test_a_missing_tool_skips_and_fails_only_under_strict(tmp_path):
    reason = "sectorcrypt-no-such-tool is not installed"
    for strict in (None, "0"):
        p = run_scratch(tmp_path, strict)
        assert p.returncode == 0, p.stdout + p.stderr
        assert "1 skipped" in p.stdout and reason in p.stdout, p.stdout
    p = run_scratch(tmp_path, "1")
    assert p.returncode != 0, "SECTORCRYPT_STRICT=1 let a skip pass: " + p.stdout
    assert "1 failed" in p.stdout and reason in p.stdout, p.stdout
    assert "SECTORCRYPT_STRICT=1" in p.stdout, p.stdout
