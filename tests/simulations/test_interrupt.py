"""Ctrl-C stops ``python -m simulations run --workers 2`` at once, workers included, and the run resumes."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ctrl_c_stops_the_study_and_its_workers_and_the_run_resumes(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    out = tmp_path / "run"
    # enough replications (100 per chunk) that a loaded machine, whose parent writes the first chunk late, still
    # interrupts the run before it ends
    reps = 10_000
    cmd = [sys.executable, "-m", "simulations", "run", "--reps", str(reps), "--workers", "2", "--settings",
           "noise-free", "--out", str(out)]
    # a terminal's Ctrl-C sends SIGINT to the whole foreground process group: the parent and its workers
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    while not list((out / "chunks").glob("*.parquet")) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    os.killpg(proc.pid, signal.SIGINT)
    started = time.monotonic()
    _, err = proc.communicate(timeout=30)
    assert time.monotonic() - started < 10
    assert proc.returncode == 130 and "run the same command again to resume" in err and "Traceback" not in err
    time.sleep(0.2)
    try:
        os.killpg(proc.pid, 0)
        alive = True
    except ProcessLookupError:
        alive = False
    assert not alive, "a worker of the interrupted run is still running"
    saved = list((out / "chunks").glob("*.parquet"))
    assert 1 <= len(saved) < reps // 100 and not list((out / "chunks").glob("*.tmp"))
    resumed = subprocess.run(cmd + ["--quiet"], env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    timing = json.loads(resumed.stdout[:resumed.stdout.index("}") + 1])
    assert timing["replications_computed_now"] == reps - 100 * len(saved)
