"""Work a build leaves running after it: `python -m MODULE JOB` in a child of its own session,
so that a script that loads and exits still gets it done (the child lowers its own priority).
The precompiled header (pch.py) and the header-cost measurement (header_cost.py) run this way."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def start(module: str, job: dict) -> subprocess.Popen:
    repo = str(Path(__file__).resolve().parents[2])  # workbench/, kwb_store/ and cache_tools/ for the child's imports
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([repo, *filter(None, [os.environ.get("PYTHONPATH")])]))
    return subprocess.Popen([sys.executable, "-m", module, json.dumps(job)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
