"""Executor faults (issue 16, item 2): a damaged checkpoint on resume, a full disk while writing
one, a loss that is not finite, a rank that hangs.  The checkpoint and bookkeeping rules are
tested in-process; three runs of gpt-tiny on 2 gloo ranks (pp=2) check them end to end, faults
injected with the test hook PARSIM_FAULT (parsim/exec/faults.py).  About a minute together."""

import errno
import hashlib
import json
import os
import subprocess
import sys
import time

import pytest
import torch

from parsim.cli import main
from parsim.errors import InputError, RunError
from parsim.exec import checkpoint, faults, heartbeat
from parsim.exec.train import check_loss
from parsim.plan import ParallelConfig

SYNTH = "256"


def state(step):
    return {"step": step, "stages": [{"w": torch.full((64, 64), float(step))}], "optimizers": []}


def files(out):
    return sorted(os.listdir(checkpoint.folder(str(out))))


def test_checkpoints_keep_two_steps_each_with_its_sha256(tmp_path):
    for step in (1, 2, 3):
        checkpoint.save(str(tmp_path), 0, step, state(step))
    assert files(tmp_path) == ["rank0-step2.pt", "rank0-step2.pt.sha256", "rank0-step3.pt", "rank0-step3.pt.sha256"]
    path = checkpoint.path_for(str(tmp_path), 0, 3)
    digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
    assert open(path + ".sha256").read() == f"{digest}  rank0-step3.pt\n"        # sha256sum -c reads it
    assert checkpoint.load(str(tmp_path), 0)["step"] == 3
    torch.testing.assert_close(checkpoint.load(str(tmp_path), 0, 2)["stages"][0]["w"], torch.full((64, 64), 2.0))
    checkpoint.drop_after(str(tmp_path), 0, 2)                 # a resume from step 2 replaces step 3
    assert files(tmp_path) == ["rank0-step2.pt", "rank0-step2.pt.sha256"]


@pytest.mark.parametrize("damage", ["truncate", "flip a byte", "lose the checksum"])
def test_a_damaged_newest_checkpoint_falls_back_to_the_step_every_rank_has(tmp_path, damage):
    out = str(tmp_path)
    for rank in (0, 1):
        for step in (2, 4):
            checkpoint.save(out, rank, step, state(step))
    path = checkpoint.path_for(out, 1, 4)
    data = open(path, "rb").read()
    if damage == "truncate":
        open(path, "wb").write(data[:len(data) // 2])
    elif damage == "flip a byte":
        open(path, "wb").write(data[:100] + bytes([data[100] ^ 1]) + data[101:])
    else:
        os.unlink(path + ".sha256")
    scans = [checkpoint.scan(out, rank) for rank in (0, 1)]
    assert scans[0].valid == (4, 2) and scans[1].valid == (2,)
    step, line = checkpoint.agree(scans, out)
    assert step == 2
    reason = ("no checksum beside it (its write did not finish)" if damage == "lose the checksum" else
              "corrupt or truncated (its SHA-256 does not match)")
    assert line == f"{path}: {reason}; resuming every rank from step 2"
    assert "\n" not in line
    with pytest.raises(InputError, match="rank1-step4.pt: "):
        checkpoint.load(out, 1, 4)                               # nothing unverified is ever loaded
    assert checkpoint.agree([checkpoint.scan(out, 0)], out) == (4, None)


def test_resume_refuses_when_no_step_verifies_on_every_rank(tmp_path):
    out = str(tmp_path)
    checkpoint.save(out, 0, 2, state(2))
    checkpoint.save(out, 1, 4, state(4))
    with pytest.raises(InputError) as e:
        checkpoint.agree([checkpoint.scan(out, r) for r in (0, 1)], out)
    assert str(e.value) == (f"--resume: no step has a checkpoint that verifies on every rank "
                            f"({checkpoint.path_for(out, 0, 4)}: missing; {checkpoint.path_for(out, 1, 2)}: missing); "
                            "run without --resume, or check --out")
    with pytest.raises(InputError, match="no checkpoint in"):
        checkpoint.agree([checkpoint.scan(str(tmp_path / "empty"), 0)], str(tmp_path / "empty"))


@pytest.mark.parametrize("fails_in,room_bytes", [(".pt", 1000), (".sha256", 40)])
def test_a_full_disk_leaves_the_previous_checkpoint_intact(tmp_path, monkeypatch, fails_in, room_bytes):
    """write(2) fills the disk part-way through the data (or its checksum file): the new step is
    not left behind, the old one and its checksum keep their bytes, and the error is one line."""
    out = str(tmp_path)
    checkpoint.save(out, 0, 1, state(1))
    before = {name: open(os.path.join(checkpoint.folder(out), name), "rb").read() for name in files(out)}
    real_write, written = os.write, [0]

    def full_disk(fd, data):
        if not os.readlink(f"/proc/self/fd/{fd}").endswith(fails_in):
            return real_write(fd, data)
        if written[0] >= room_bytes:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = real_write(fd, data[:room_bytes - written[0]])  # a short write, then the disk is full
        written[0] += n
        return n

    monkeypatch.setattr(checkpoint, "_CHUNK_BYTES", 512)
    monkeypatch.setattr(os, "write", full_disk)
    with pytest.raises(RunError) as e:
        checkpoint.save(out, 0, 2, state(2))
    monkeypatch.undo()
    assert written[0] == room_bytes                            # the fault struck mid-write
    assert str(e.value) == (f"{checkpoint.path_for(out, 0, 2)}: cannot write the checkpoint of step 2: the disk is "
                            f"full; the checkpoint of step 1 is kept. Free space in {checkpoint.folder(out)} (or "
                            "choose another --out) and continue with --resume")
    assert e.value.exit_code == 1
    assert {name: open(os.path.join(checkpoint.folder(out), name), "rb").read() for name in files(out)} == before
    assert checkpoint.load(out, 0)["step"] == 1


def test_a_loss_that_is_not_finite_names_the_step_and_the_rank():
    cfg = ParallelConfig(dp=2, pp=2, microbatches=2, placement="dp-inner")   # ranks 2, 3: the last stage
    check_loss(5, [0.0, 0.0, 0.0, 0.0], cfg, 4)                # finite: nothing happens
    with pytest.raises(RunError) as e:
        check_loss(7, [0.0, 0.0, 0.0, 2.0], cfg, 6)
    assert str(e.value) == ("step 7: the loss is inf on rank 3, the last pipeline stage (pipeline rank 1) of "
                            "replica 1; the run stopped before saving the step: the checkpoint of step 6 is the last "
                            "one, --resume continues from it")
    with pytest.raises(RunError) as e:
        check_loss(1, [0.0, 0.0, 1.0, 1.0], cfg, 0)
    assert str(e.value).startswith("step 1: the loss is nan on rank 2 (and on rank 3), the last pipeline stage "
                                   "(pipeline rank 1) of replica 0; ")
    assert str(e.value).endswith("no checkpoint was written before it (--checkpoint-every N keeps one every N steps)")


def test_the_hung_rank_is_the_one_behind_and_silent_for_a_whole_timeout():
    beats = {0: heartbeat.Beat(9, 100.0, "step 3's barrier"), 1: heartbeat.Beat(8, 84.0, "step 2's loss all-reduce"),
             2: heartbeat.Beat(9, 99.0, "step 3's barrier"), 3: None}
    # rank 0 timed out at t=115 after --timeout 15: rank 1 never reached the barrier it waited in
    assert heartbeat.laggard(beats, 0, [1, 2], 115.0, 15.0, 0.0) == 1
    assert heartbeat.laggard(beats, 0, [2], 115.0, 15.0, 0.0) is None       # level with it: waiting too
    assert heartbeat.laggard(beats, 0, [1, 2], 98.0, 15.0, 0.0) is None     # behind, but not silent that long
    assert heartbeat.laggard(beats, 0, [1, 3], 115.0, 15.0, 0.0) == 3       # never beat: stuck since start-up
    assert heartbeat.laggard(beats, 0, [1, 3], 115.0, 15.0, 110.0) == 1     # ... or not yet started for long


def test_the_fault_hook_reads_one_spec(monkeypatch):
    monkeypatch.delenv("PARSIM_FAULT", raising=False)
    assert not faults.injected("hang", 2, 1)
    monkeypatch.setenv("PARSIM_FAULT", "hang@rank=1@step=2")
    assert faults.injected("hang", 2, 1)
    assert not any([faults.injected("hang", 2, 0), faults.injected("hang", 3, 1), faults.injected("nan", 2, 1)])
    monkeypatch.setenv("PARSIM_FAULT", "nan@step=3")
    assert faults.injected("nan", 3, 0) and faults.injected("nan", 3, 5) and not faults.injected("nan", 2, 0)
    monkeypatch.setenv("PARSIM_FAULT", "hang@rank=one")
    with pytest.raises(InputError, match="PARSIM_FAULT=hang@rank=one: expected one of hang, nan"):
        faults.injected("hang", 2, 1)


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("plan") / "gpt-pp2.json")
    assert main(["simulate", "examples/gpt_tiny_local.yaml", "--cluster", "local-cpu", "--dp", "1", "--pp", "2",
                 "--microbatches", "2", "-o", path, "--json"]) == 0
    return path


def run(plan, out, *flags):
    return main(["run", plan, "--out", str(out), "--synthetic-size", SYNTH, "--timeout", "15", *flags])


def test_resume_passes_over_a_truncated_checkpoint(tmp_path, capfd, plan):
    out = tmp_path / "run"
    assert run(plan, out, "--steps", "2", "--checkpoint-every", "1") == 0
    first = json.loads((out / "measured.json").read_text())["loss"]
    damaged = checkpoint.path_for(str(out), 1, 2)
    os.truncate(damaged, os.path.getsize(damaged) // 2)
    capfd.readouterr()
    assert run(plan, out, "--steps", "3", "--warmup", "1", "--resume") == 0
    err = capfd.readouterr().err
    assert [ln for ln in err.splitlines() if ln.startswith("parsim:")] == [
        f"parsim: warning: {damaged}: corrupt or truncated (its SHA-256 does not match); "
        "resuming every rank from step 1"]
    resumed = json.loads((out / "measured.json").read_text())
    assert resumed["first_step"] == 1 and resumed["loss"][0] == first[1]      # step 2 again, bit for bit
    assert files(out) == [f"rank{r}-step{s}.pt{x}" for r in (0, 1) for s in (1, 3) for x in ("", ".sha256")]


def test_a_nan_loss_stops_every_rank_naming_the_step_and_the_rank(tmp_path, capfd, plan, monkeypatch):
    """NaN parameters on rank 0 (the first stage) reach the loss on rank 1 (the last)."""
    out = tmp_path / "run"
    monkeypatch.setenv("PARSIM_FAULT", "nan@rank=0@step=2")
    assert run(plan, out, "--steps", "4", "--checkpoint-every", "1") == 1
    captured = capfd.readouterr()
    assert "epoch: 1 step: 2, loss is nan" in captured.out and "step: 3" not in captured.out
    assert [ln for ln in captured.err.splitlines() if ln.startswith("parsim:")] == [
        "parsim: error: rank 0: step 2: the loss is nan on rank 1, the last pipeline stage (pipeline rank 1) of "
        "replica 0; the run stopped before saving the step: the checkpoint of step 1 is the last one, --resume "
        "continues from it"]
    assert "Traceback" not in captured.err
    assert files(out) == [f"rank{r}-step1.pt{x}" for r in (0, 1) for x in ("", ".sha256")]
    assert all(torch.isfinite(t).all() for r in (0, 1) for t in checkpoint.load(str(out), r)["stages"][0].values()
               if t.is_floating_point())
    assert not (out / "measured.json").exists()


def test_a_hung_rank_ends_the_run_within_the_timeout_and_is_named(tmp_path, plan):
    timeout = 15
    env = dict(os.environ, PARSIM_FAULT="hang@rank=1@step=2")
    proc = subprocess.Popen([sys.executable, "-m", "parsim.cli", "run", plan, "--steps", "4", "--timeout", str(timeout),
                             "--out", str(tmp_path / "run"), "--synthetic-size", SYNTH],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    for line in proc.stdout:
        if "step: 1," in line:                  # step 1 done: rank 1 hangs before step 2's barrier
            break
    t = time.monotonic()
    _, err = proc.communicate(timeout=3 * timeout)
    elapsed = time.monotonic() - t
    assert proc.returncode == 1
    # rank 0 times out after --timeout, and the launcher kills rank 1 at once (not a second timeout later)
    assert timeout <= elapsed < timeout + 8, elapsed
    hung = [ln for ln in err.splitlines() if "hung" in ln]
    assert len(hung) == 1 and hung[0].startswith(
        "parsim: error: rank 1 hung: no progress for ") and hung[0].endswith(
        " s since it reached step 1's loss all-reduce; rank 0 gave up waiting for it after --timeout 15 s")
    assert "Traceback" not in err
