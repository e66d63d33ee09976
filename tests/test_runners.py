"""runners/: every script parses (bash -n), and slurm.sbatch reads the processes per node and the
rendezvous port from Slurm's environment (scontrol and srun replaced by stubs that print)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

RUNNERS = Path(__file__).resolve().parent.parent / "runners"
SCRIPTS = sorted(p for p in RUNNERS.iterdir() if p.suffix in (".sh", ".sbatch"))
BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="no bash")


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_parses(script):
    r = subprocess.run([BASH, "-n", str(script)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def _sbatch(tmp_path, **env):
    """Run slurm.sbatch with stub scontrol/srun on PATH; (returncode, srun's argv line, stderr)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "scontrol").write_text("#!/usr/bin/env bash\nprintf 'nodeA\\nnodeB\\n'\n")
    (bin_dir / "srun").write_text("#!/usr/bin/env bash\necho \"SRUN $*\"\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    base = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_ID": "123456", "SLURM_NNODES": "2",
            "SLURM_JOB_NODELIST": "node[A-B]"}
    r = subprocess.run([BASH, str(RUNNERS / "slurm.sbatch"), "plan.json"], capture_output=True, text=True,
                       env={**base, **env}, cwd=tmp_path)
    srun = next((line for line in r.stdout.splitlines() if line.startswith("SRUN ")), "")
    return r.returncode, srun, r.stderr


def test_slurm_reads_gpus_on_node_and_derives_the_port(tmp_path):
    rc, srun, err = _sbatch(tmp_path, SLURM_GPUS_ON_NODE="4")
    assert rc == 0, err
    assert "--nproc-per-node 4" in srun and "--nnodes 2" in srun
    assert f"--rdzv-endpoint nodeA:{20000 + 123456 % 10000}" in srun      # 23456
    assert "--rdzv-id 123456" in srun


def test_slurm_gpus_per_node_with_a_type_and_overrides(tmp_path):
    rc, srun, err = _sbatch(tmp_path, SLURM_GPUS_PER_NODE="a100:8")
    assert rc == 0, err
    assert "--nproc-per-node 8" in srun
    rc, srun, err = _sbatch(tmp_path, SLURM_GPUS_ON_NODE="8", NPROC_PER_NODE="2", RDZV_PORT="31000")
    assert rc == 0, err
    assert "--nproc-per-node 2" in srun and "--rdzv-endpoint nodeA:31000" in srun


def test_slurm_without_a_device_count_says_what_to_set(tmp_path):
    rc, srun, err = _sbatch(tmp_path)
    assert rc == 2 and not srun
    assert "NPROC_PER_NODE" in err and len(err.strip().splitlines()) == 1
