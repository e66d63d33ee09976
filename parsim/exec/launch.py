"""A local launcher for ``parsim run --nproc N``: N processes of ``python -m parsim.run`` (or
another worker module, e.g. ``parsim.profile.comm``) with
torchrun's environment variables, one thread each.  When a rank fails, the others get the
collective timeout to notice and stop on their own, then they are killed; the launcher prints
the failing rank's own one-line message and exits non-zero.  When the failure is a rank that
timed out waiting for a peer that hung (alive, but silent), the ranks' progress beats
(parsim.exec.heartbeat) name the hung rank, which is killed at once.  Each rank's stderr is kept
in a temporary folder (rank<r>.err), with faulthandler's Python stacks if a rank crashes
(PYTHONFAULTHANDLER); the folder is removed when every rank succeeds, and kept and named when one
is killed by a signal.  On a cluster, use torchrun (see runners/), which sets the same variables.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from parsim.exec import heartbeat


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tee(pipe, path: str, echo: bool = True) -> None:
    with open(path, "w") as log:
        for raw in iter(pipe.readline, b""):
            line = raw.decode(errors="replace")
            if echo:
                sys.stderr.write(line)
                sys.stderr.flush()
            log.write(line)
            log.flush()


def _last_line(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            lines = [ln.strip() for ln in f if ln.strip()]
    except OSError:
        return ""
    errors = [ln for ln in lines if ln.startswith("parsim: error")]
    return (errors or lines or [""])[-1]


def _cause(codes: list[tuple[int, int | None]]) -> tuple[int, int] | None:
    """Of (rank, exit code or None while it runs), the failure that caused the others: the first failure
    is the cause, and of failures seen together a rank killed by a signal comes before ranks that exited
    because a peer vanished (gloo's "connection closed"), then the lowest rank.  None where none failed."""
    down = [(r, code) for r, code in codes if code not in (None, 0)]
    return min(down, key=lambda rc: (rc[1] >= 0, rc[0])) if down else None


def _same(a: str, b: str) -> bool:
    """Two ranks' lines that say the same thing (every rank stops on a NaN loss with one message)."""
    def strip(line):
        rest = line.removeprefix("parsim: error: ")
        return rest.split(": ", 1)[1] if rest.startswith("rank ") and ": " in rest else rest
    return strip(a) == strip(b)


def launch(worker_args: list[str], nproc: int, timeout_s: float, threads: int = 1,
           module: str = "parsim.run", quiet: bool = False) -> int:
    """Run ``module`` on ``nproc`` local ranks; returns the exit code.  ``quiet``: rank 0's output
    goes to the log only (a driver such as ``parsim validate`` prints its own)."""
    from parsim.model.extracted import EXTRACTED_ENV, save_extracted

    port = free_port()
    logdir = tempfile.mkdtemp(prefix="parsim-run-")
    # the graphs this process extracted (the plan's model, checked before any rank starts), so
    # that no rank extracts it again (parsim.model.extracted)
    graphs = os.path.join(logdir, "extracted.pkl")
    inherited = {EXTRACTED_ENV: graphs} if save_extracted(graphs) else {}
    started_s = time.time()
    procs, errs = [], []
    for r in range(nproc):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(nproc), LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(nproc),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS=str(threads),
                   PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1", **{heartbeat.ENV: logdir}, **inherited)
        err = os.path.join(logdir, f"rank{r}.err")
        errs.append(err)
        stdout = None if r == 0 and not quiet else subprocess.DEVNULL
        # rank 0 speaks to the user (stdout and stderr, live); every rank's stderr is also kept
        stderr = subprocess.PIPE if r == 0 else open(err, "w")
        procs.append(subprocess.Popen([sys.executable, "-m", module, *worker_args], env=env,
                                      stdout=stdout, stderr=stderr))
        if r == 0:
            threading.Thread(target=_tee, args=(procs[0].stderr, err, not quiet), daemon=True).start()
    failed = None          # (rank, code, time)
    hung = None            # (rank, its last beat, seconds since it)
    try:
        while any(p.poll() is None for p in procs):
            if failed is None:
                cause = _cause([(r, p.poll()) for r, p in enumerate(procs)])
                if cause is not None:
                    failed = (*cause, time.monotonic())
            if failed and hung is None:
                beats = {r: heartbeat.read(logdir, r) for r in range(nproc)}
                h = heartbeat.laggard(beats, failed[0], [r for r, p in enumerate(procs) if p.poll() is None],
                                      time.time(), timeout_s, started_s)
                if h is not None:
                    hung = (h, beats[h], time.time() - (beats[h].time_s if beats[h] else started_s))
                    procs[h].kill()
            if failed and time.monotonic() - failed[2] > timeout_s:
                for p in procs:
                    if p.poll() is None:
                        p.kill()
            time.sleep(0.05)
    except KeyboardInterrupt:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in procs:
            p.wait()
        print("parsim: interrupted", file=sys.stderr)
        return 130
    time.sleep(0.1)                       # let the tee thread drain rank 0's last lines
    if failed is None:            # every rank ended within one poll round's sleep
        cause = _cause([(r, p.returncode) for r, p in enumerate(procs)])
        failed = None if cause is None else (*cause, 0.0)
    if failed is None:
        shutil.rmtree(logdir, ignore_errors=True)
        return 0
    r, code, _ = failed
    own = _last_line(errs[r])
    if code < 0:
        what = f"rank {r} was killed by signal {-code} (its stderr, with the Python stack of a crash: {errs[r]})"
    else:
        what = own if own.startswith("parsim: error") else f"rank {r} exited with code {code}: {own}"
    # rank 0's stderr reached the terminal live (unless quiet): the cause, or the same message
    shown = not quiet and code >= 0 and (r == 0 or _same(_last_line(errs[0]), what))
    if hung is not None:
        h, beat, age_s = hung
        since = f"since it reached {beat.what}" if beat else "since it started"
        print(f"parsim: error: rank {h} hung: no progress for {age_s:.0f} s {since}; rank {r} gave up waiting for "
              f"it after --timeout {timeout_s:g} s", file=sys.stderr)
    elif not shown:
        print(what if what.startswith("parsim: error") else f"parsim: error: {what}", file=sys.stderr)
    others = []
    for i, e in enumerate(errs):
        line = _last_line(e)
        if procs[i].returncode in (0, None) or not line or (i == r and (shown or hung is None)):
            continue                      # no message, or the cause's own, already printed
        if hung is None and _same(line, what):
            continue                      # every rank stopping with the same message (a NaN loss)
        others.append(f"rank {i}: {line}")
    if others:
        print("parsim: then " + "; ".join(others[:3]), file=sys.stderr)
    return code if code > 0 else 1
