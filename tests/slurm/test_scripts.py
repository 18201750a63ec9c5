"""The job scripts chronus ships (the API jobs' default, the lab's workload) under the checkpoint
signal at their most fragile moment: while they start and read their checkpoint.

Slurm calls a job RUNNING before its script runs, and signals every process of the job. The
scripts once read their checkpoint with ``$(cat ...)``: a signal then killed the subshell (a child
does not keep the shell's trap), the checkpoint read as nothing, the loop test failed and the
script exited 0 having done no work: COMPLETED in Slurm, a preempted job that chronus counted
finished. Here ``cat`` and ``date`` take half a second, so the signal lands inside whatever
child a script runs before its first step; no Slurm needed, only ``sh``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

from chronus_py.backends.slurm.backend import DEFAULT_SCRIPT
from chronus_py.backends.slurm.lab import workload

SLOW = '#!/bin/sh\nsleep 0.5\nexec /bin/{name} "$@"\n'


def test_a_signal_while_a_script_starts_never_makes_it_exit_0(tmp_path):
    slow = tmp_path / "slow"
    slow.mkdir()
    for name in ("cat", "date"):
        (slow / name).write_text(SLOW.format(name=name))
        (slow / name).chmod(0o755)
    env = {"PATH": f"{slow}:/usr/bin:/bin", "SLURM_JOB_ID": "7", "CHRONUS_DURATION_SECONDS": "30"}
    procs = {}
    for name, script in (("default", DEFAULT_SCRIPT), ("workload", workload(30))):
        (tmp_path / name).mkdir()
        (tmp_path / name / "job.sh").write_text(script)
        procs[name] = subprocess.Popen(
            ["sh", "job.sh"],
            cwd=tmp_path / name,
            env=env,
            start_new_session=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
    time.sleep(0.2)  # the traps are set; a slow child, if a script runs one, is running
    for proc in procs.values():
        os.killpg(proc.pid, signal.SIGUSR1)  # as Slurm does: every process of the job
    time.sleep(2.0)  # a script that lost its checkpoint read exits within 1.5 s
    codes = {}
    for name, proc in procs.items():
        codes[name] = proc.poll()  # None: still working, the signal was handled
        if codes[name] is None:
            os.killpg(proc.pid, signal.SIGKILL)
        out = proc.communicate()[0].decode()
        assert codes[name] is None or codes[name] < 0, f"{name} exited {codes[name]}:\n{out}"
