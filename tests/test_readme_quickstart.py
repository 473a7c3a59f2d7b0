"""The README's Quickstart block, run as written on this machine (the CPU where there is no GPU):
a new user's first command must not fail."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_quickstart_runs_as_written(tmp_path):
    readme = (ROOT / "README.md").read_text()
    quickstart = readme.split("## Quickstart", 1)[1]
    code = re.search(r"```python\n(.*?)```", quickstart, re.DOTALL).group(1)
    assert "wb.load(" in code and "backward()" in code
    done = subprocess.run([sys.executable, "-c", code + "\nprint('QUICKSTART OK', f(x).shape)"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0 and "QUICKSTART OK" in done.stdout, done.stdout[-2000:] + done.stderr[-4000:]
