"""A private Slurm cluster on one host, in a temporary directory: munge, slurmctld, N slurmd
nodes with fake GPUs, and slurmrestd on a unix socket (plus, on request, a second slurmrestd
with JWT auth over TCP).

It exists so the Slurm backend is tested, demonstrated and benchmarked against the real daemons,
never against an imitation: Debian's ``slurm-wlm``, ``slurmrestd``, ``munge`` (Slurm 22.05), or
the Slurm installed under a prefix (``CHRONUS_TEST_SLURM``, e.g. the 24.11 that ``.ci/slurm.sh``
builds; munge stays the system's). What differs between releases is kept here: slurmrestd serves
``openapi/v0.0.38`` up to 23.11 and ``openapi/slurmctld`` from 23.11 on, and ``SwitchType`` is
left out (``switch/none``, the old default, no longer exists in 24.11). Every daemon runs
in the foreground as a child of this process, so :meth:`SlurmLab.stop` can end exactly the
processes it started. Each node has plain ``gpu:N`` GRES, as a user's cluster would, and
features (``gpu`` on every node, ``fast`` on the first) for ``--constraint``; the GPUs are
character devices cloned from ``/dev/null`` (Slurm sets ``CUDA_VISIBLE_DEVICES`` only for
devices).

Needs root (slurmd runs jobs as their owner and ``mknod`` makes the devices).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from chronus_py.service.serve_process import free_port

BINARIES = (
    "munged",
    "munge",
    "slurmctld",
    "slurmd",
    "slurmrestd",
    "scontrol",
    "sinfo",
    "squeue",
    "sbatch",
    "scancel",
)


PREFIX_VARIABLE = "CHRONUS_TEST_SLURM"
"""A Slurm installation prefix (``PREFIX/sbin/slurmctld``, ...) to use instead of the system's."""


def default_prefix() -> Path | None:
    """The Slurm prefix from ``$CHRONUS_TEST_SLURM``, or None: the system's Slurm."""
    value = os.environ.get(PREFIX_VARIABLE)
    return Path(value) if value else None


def search_path(prefix: Path | None) -> str:
    """PATH with the prefix's programs first and the system's sbin last."""
    head = f"{prefix}/sbin:{prefix}/bin:" if prefix is not None else ""
    return head + os.environ.get("PATH", "") + ":/usr/sbin:/sbin"


def missing_binaries(prefix: Path | None = None) -> list[str]:
    """The Slurm/munge programs this machine lacks (empty: a lab can run here)."""
    paths = search_path(prefix or default_prefix())
    return [b for b in BINARIES if shutil.which(b, path=paths) is None]


def release(prefix: Path | None = None) -> str:
    """The Slurm release a lab would run, e.g. ``22.05.8`` (``slurmctld -V``)."""
    exe = shutil.which("slurmctld", path=search_path(prefix or default_prefix()))
    out = subprocess.run([exe, "-V"], capture_output=True, text=True, timeout=30).stdout
    return out.split()[-1] if out.split() else "unknown"


def why_not_here(prefix: Path | None = None) -> str | None:
    """Why a lab cannot run on this machine (with the Slurm under ``prefix``, default
    ``$CHRONUS_TEST_SLURM`` or the system's), or None if it can."""
    prefix = prefix or default_prefix()
    missing = missing_binaries(prefix)
    if missing:
        if prefix is not None:
            return f"{PREFIX_VARIABLE}={prefix} lacks {', '.join(missing)} (see .ci/slurm.sh)"
        return (
            f"Slurm is not installed (missing {', '.join(missing)}; on Debian: apt-get install "
            f"slurm-wlm slurmrestd munge slurm-wlm-jwt-plugin)"
        )
    if os.geteuid() != 0:
        return "a private Slurm cluster needs root (slurmd, mknod)"
    return None


def workload(seconds: int) -> str:
    """A batch script that works for ``seconds`` in 1-second steps and checkpoints after each
    one (in ``ckpt-$SLURM_JOB_ID``), so a requeued run resumes where the last
    one stopped (in the working directory); the checkpoint signal (USR1) is caught and logged,
    as a training job would. The checkpoint is replaced by a rename, so a run killed while
    writing it leaves the last whole one.

    Slurm signals every process of the job, and a child does not keep the shell's trap, so the
    script reads its checkpoint with the ``read`` builtin (a ``$(cat ...)`` the signal killed
    read as no progress, the loop test failed, and the script exited 0 having done nothing:
    COMPLETED in Slurm, a preempted job counted finished) and counts a step only when its
    ``sleep`` was not cut short. A signal before the trap is set kills the script (FAILED),
    which the backend requeues like any stopped job."""
    return f"""#!/bin/sh
ckpt="$PWD/ckpt-$SLURM_JOB_ID"
done=0
trap 'echo "checkpoint at $done"' USR1
if [ -f "$ckpt" ]; then read -r done < "$ckpt" || exit 1; fi
case "$done" in ''|*[!0-9]*) echo "unreadable checkpoint $ckpt: '$done'" >&2; exit 1;; esac
echo "start $(date +%s.%N)"
echo "run $SLURM_RESTART_COUNT on $SLURMD_NODENAME gpus $CUDA_VISIBLE_DEVICES from $done"
while [ "$done" -lt {int(seconds)} ]; do
    if sleep 1; then
        done=$((done + 1))
        echo "$done" > "$ckpt.new" && mv "$ckpt.new" "$ckpt"
    fi
done
"""


@dataclass
class SlurmLab:
    """One private cluster. ``start()`` brings every daemon up and waits until the nodes are idle
    and slurmrestd answers; ``stop()`` cancels every job and ends every daemon it started."""

    root: Path
    nodes: int = 2
    gpus_per_node: int = 4
    partition: str = "gpu"
    jwt: bool = False
    prefix: Path | None = field(default_factory=default_prefix)  # None: the system's Slurm
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        self.release = release(self.prefix)
        major_minor = tuple(int(x) for x in self.release.split(".")[:2] if x.isdigit())
        self.rest_plugin = "openapi/slurmctld" if major_minor >= (23, 11) else "openapi/v0.0.38"
        self.node_names = [f"n{i + 1}" for i in range(self.nodes)]
        self.ctld_port = free_port()
        self.node_ports = {n: free_port() for n in self.node_names}
        self.rest_port = free_port() if self.jwt else None
        self.socket = self.root / "run" / "slurmrestd.sock"
        self.munge_socket = self.root / "munge" / "munge.socket"
        self.conf = self.root / "etc" / "slurm.conf"
        self.jwt_key = self.root / "etc" / "jwt.key"
        self.env = {
            **os.environ,
            "SLURM_CONF": str(self.conf),
            "PATH": search_path(self.prefix),
        }

    # -- files -------------------------------------------------------------------------------------
    def _write_files(self) -> None:
        for sub in ("munge", "etc", "run", "log", "state", "dev", "spool", "jobs"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(self.root / "munge", 0o711)
        key = self.root / "munge" / "munge.key"
        key.write_bytes(secrets.token_bytes(1024))
        os.chmod(key, 0o400)
        for g in range(self.gpus_per_node):
            dev = self.root / "dev" / f"gpu{g}"
            if not dev.exists():
                os.mknod(dev, 0o666 | 0o020000, os.makedev(1, 3))
        names = ",".join(self.node_names)
        lab = self.root
        lines = [
            "ClusterName=chronuslab",
            "SlurmctldHost=localhost",
            f"SlurmctldPort={self.ctld_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            f"AuthInfo=socket={self.munge_socket}",
            f"StateSaveLocation={lab}/state",
            f"SlurmdSpoolDir={lab}/spool/%n",
            f"SlurmctldPidFile={lab}/run/slurmctld.pid",
            f"SlurmdPidFile={lab}/run/slurmd-%n.pid",
            f"SlurmctldLogFile={lab}/log/slurmctld.log",
            f"SlurmdLogFile={lab}/log/slurmd-%n.log",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "SchedulerType=sched/builtin",
            "SchedulerParameters=batch_sched_delay=0",
            "GresTypes=gpu",
            "JobRequeue=1",
            "ReturnToService=2",
            "SlurmdParameters=config_overrides",
            "KillWait=2",
            "MinJobAge=600",
            "MailProg=/bin/true",
            "SlurmctldTimeout=30",
            "SlurmdTimeout=60",
        ]
        if self.jwt:
            self.jwt_key.write_bytes(secrets.token_bytes(32))
            os.chmod(self.jwt_key, 0o600)
            lines += ["AuthAltTypes=auth/jwt", f"AuthAltParameters=jwt_key={self.jwt_key}"]
        lines.append(
            f"NodeName=DEFAULT CPUs=16 RealMemory=64000 Gres=gpu:{self.gpus_per_node} State=UNKNOWN"
        )
        for n in self.node_names:  # features: "gpu" on every node, "fast" on the first
            features = "gpu,fast" if n == self.node_names[0] else "gpu"
            lines.append(
                f"NodeName={n} NodeHostname=localhost NodeAddr=127.0.0.1 "
                f"Port={self.node_ports[n]} Features={features}"
            )
        lines.append(
            f"PartitionName={self.partition} Nodes={names} Default=YES MaxTime=INFINITE State=UP"
        )
        self.conf.write_text("\n".join(lines) + "\n")
        last = self.gpus_per_node - 1
        (self.root / "etc" / "gres.conf").write_text(
            f"AutoDetect=off\nNodeName={names} Name=gpu File={lab}/dev/gpu[0-{last}]\n"
        )

    # -- processes ---------------------------------------------------------------------------------
    def _spawn(self, name: str, argv: list[str], env: dict | None = None) -> subprocess.Popen:
        log = open(self.root / "log" / f"{name}.out", "ab")
        proc = subprocess.Popen(
            argv, env=env or self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        self.procs[name] = proc
        return proc

    def _wait(self, what: str, ok, timeout: float = 30.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if ok():
                return
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"{name} exited ({proc.returncode}) while waiting for "
                        f"{what}; see {self.root / 'log'}"
                    )
            time.sleep(0.1)
        raise RuntimeError(f"timed out waiting for {what}; see {self.root / 'log'}")

    def run(self, *argv: str, check: bool = True, timeout: float = 30) -> str:
        """Run a Slurm command against this cluster; its stdout."""
        out = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and out.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: {out.stderr.strip() or out.stdout.strip()}")
        return out.stdout

    def _ok(self, *argv: str) -> bool:
        try:
            return (
                subprocess.run(argv, env=self.env, capture_output=True, timeout=10).returncode == 0
            )
        except subprocess.TimeoutExpired:
            return False

    def start(self) -> "SlurmLab":
        self._write_files()
        m = self.root / "munge"
        self._spawn(
            "munged",
            [
                "munged",
                "-F",
                "--force",
                f"--socket={self.munge_socket}",
                f"--key-file={m}/munge.key",
                f"--log-file={m}/munged.log",
                f"--pid-file={m}/munged.pid",
                f"--seed-file={m}/munged.seed",
            ],
        )
        self._wait("munged", lambda: self._ok("munge", "-S", str(self.munge_socket), "-n"))
        self.start_slurmctld()
        for n in self.node_names:
            self._spawn(f"slurmd-{n}", ["slurmd", "-D", "-N", n])
        self._wait("idle nodes", self.all_idle)
        self.start_slurmrestd()
        return self

    def start_slurmctld(self) -> None:
        self._spawn("slurmctld", ["slurmctld", "-D", "-i"])
        self._wait("slurmctld", lambda: self._ok("scontrol", "ping"))

    def stop_slurmctld(self) -> None:
        self._terminate("slurmctld")

    def lose_state(self) -> None:
        """Restart slurmctld with its StateSaveLocation wiped, as a site that lost it (or
        brought up a new controller) would: every job is forgotten, job ids start again from
        ``FirstJobId``, and the jobs slurmd still runs are killed when it registers. The jobs'
        outputs and checkpoints, named by job id, are moved aside, so the new jobs with those
        ids neither append to nor resume from them."""
        self.stop_slurmctld()
        for path in (self.root / "state").iterdir():
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        jobs = self.root / "jobs"
        aside = jobs / f"lost-{time.monotonic_ns()}"
        aside.mkdir()
        for path in jobs.iterdir():
            if path.is_file() and (path.suffix == ".out" or "ckpt-" in path.name):
                path.rename(aside / path.name)
        self.start_slurmctld()
        self._wait("idle nodes", self.all_idle, timeout=60)

    def all_idle(self) -> bool:
        try:
            states = self.run("sinfo", "-h", "-N", "-o", "%N %T", check=False).split()
        except subprocess.TimeoutExpired:
            return False
        pairs = dict(zip(states[::2], states[1::2]))
        return all(pairs.get(n) == "idle" for n in self.node_names)

    def start_slurmrestd(self) -> None:
        if self.socket.exists():
            self.socket.unlink()
        env = {**self.env, "SLURMRESTD_SECURITY": "disable_user_check"}
        self._spawn(
            "slurmrestd",
            ["slurmrestd", "-a", "rest_auth/local", "-s", self.rest_plugin, f"unix:{self.socket}"],
            env,
        )
        self._wait("slurmrestd", lambda: self._rest_up())
        if self.jwt and "slurmrestd-jwt" not in self.procs:
            jenv = {**env, "SLURM_JWT": "daemon"}
            self._spawn(
                "slurmrestd-jwt",
                [
                    "slurmrestd",
                    "-a",
                    "rest_auth/jwt",
                    "-s",
                    self.rest_plugin,
                    f"127.0.0.1:{self.rest_port}",
                ],
                jenv,
            )
            self._wait("slurmrestd (jwt)", self._tcp_up)

    def stop_slurmrestd(self) -> None:
        self._terminate("slurmrestd")

    def start_other_slurmrestd(self, name: str, *args: str) -> Path:
        """Another slurmrestd on its own unix socket, started with ``args`` (e.g. ``-s
        openapi/v0.0.37``), as a misconfigured site would run it; its socket. Stop it with
        :meth:`stop_process`."""
        sock = self.root / "run" / f"{name}.sock"
        if sock.exists():
            sock.unlink()
        env = {**self.env, "SLURMRESTD_SECURITY": "disable_user_check"}
        self._spawn(name, ["slurmrestd", "-a", "rest_auth/local", *args, f"unix:{sock}"], env)
        self._wait(name, lambda: self._rest_up(sock))
        return sock

    def stop_process(self, name: str) -> None:
        self._terminate(name)

    def _rest_up(self, sock: Path | None = None) -> bool:
        sock = sock or self.socket
        if not sock.exists():
            return False
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(2)
                s.connect(str(sock))
                s.sendall(b"GET /openapi/v3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                return s.recv(64).startswith(b"HTTP/1.1 200")
        except OSError:
            return False

    def _tcp_up(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.rest_port), timeout=2):
                return True
        except OSError:
            return False

    def token(self, lifespan: int = 3600) -> str:
        """A JWT for the current user from ``scontrol token`` (only with ``jwt=True``)."""
        out = self.run("scontrol", "token", f"lifespan={lifespan}")
        return out.strip().split("=", 1)[1]

    def _terminate(self, name: str, timeout: float = 10.0) -> None:
        proc = self.procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    def cancel_all(self, timeout: float = 20.0) -> None:
        """scancel every job and wait until none runs (slurmstepd outlives a stopped slurmd)."""
        if "slurmctld" not in self.procs:
            return
        self.run("scancel", "--partition", self.partition, "-u", "root", check=False)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if not self.run("squeue", "-h", "-t", "R,CG,S", check=False).strip():
                return
            time.sleep(0.2)

    def stop(self) -> None:
        try:
            self.cancel_all()
        except Exception:  # noqa: BLE001 - stopping must go on whatever a command did
            pass
        for name in (
            ["slurmrestd-jwt", "slurmrestd"]
            + [f"slurmd-{n}" for n in self.node_names]
            + ["slurmctld", "munged"]
        ):
            self._terminate(name)
        for name in list(self.procs):
            self._terminate(name)

    def ensure_up(self) -> None:
        """Restart slurmctld or slurmrestd if a test stopped them."""
        if "slurmctld" not in self.procs:
            self.start_slurmctld()
        if "slurmrestd" not in self.procs:
            self.start_slurmrestd()

    def resume_nodes(self) -> None:
        """Undrain every node a test drained, and wait until each is idle and answering: a
        resumed node is NOT_RESPONDING until slurmctld pings it, and Slurm starts nothing there
        meanwhile (ReqNodeNotAvail), so the next test's start on it was held again."""
        self.run(
            "scontrol",
            "update",
            f"nodename={','.join(self.node_names)}",
            "state=resume",
            check=False,
        )
        self._wait("idle nodes", self.all_idle, timeout=60)

    def sbatch(self, *args: str, script: str = "#!/bin/sh\nsleep 5\n") -> int:
        """Submit a batch job as a user would; its id."""
        path = self.root / "jobs" / f"job-{time.monotonic_ns()}.sh"
        path.write_text(script)
        out = self.run(
            "sbatch",
            "--parsable",
            "--open-mode=append",
            f"--chdir={self.root / 'jobs'}",
            f"--output={self.root / 'jobs'}/%j.out",
            *args,
            str(path),
        )
        return int(out.strip().split(";")[0])

    def __enter__(self) -> "SlurmLab":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()
