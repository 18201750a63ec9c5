"""``chronus serve --backend slurm`` as a child process, against a :class:`SlurmLab`: what the
end-to-end tests, the demo and the benchmarks run, so all three drive the real daemon."""

from __future__ import annotations

import sys
from pathlib import Path

from chronus_py.backends.slurm.lab import SlurmLab
from chronus_py.service import serve_process


class ServeProcess(serve_process.ServeProcess):
    """One ``chronus serve --backend slurm`` process on ``db``, in the lab's environment."""

    def __init__(
        self,
        lab: SlurmLab,
        db: Path,
        *extra: str,
        grace: float = 1.0,
        poll: float = 0.5,
        lease: float = 1200.0,
        headroom: float = 0.5,
    ):
        """``headroom`` 0.5: the default 0.9 keeps 90 % of a cluster this small for the pool,
        too little for any guarantee."""
        super().__init__(db, env=lab.env)
        self.lab = lab
        self.argv = [
            sys.executable,
            "-m",
            "chronus_py",
            "serve",
            "--backend",
            "slurm",
            "--slurmrestd",
            f"unix:{lab.socket}",
            "--partition",
            lab.partition,
            "--db",
            str(self.db),
            "--listen",
            f"127.0.0.1:{self.port}",
            "--slurm-grace",
            f"{grace:g}",
            "--slurm-poll",
            f"{poll:g}",
            "--slurm-workdir",
            str(lab.root / "jobs"),
            "--lease",
            f"{lease:g}",
            "--headroom",
            f"{headroom:g}",
            *extra,
        ]
