"""The training stacks a plan may run on, and the committed table of which stack ran each public source.

parsim prices Megatron-Core-level kernels and collectives whatever the stack; a plan may still state its
stack (Training.stack), and its step's band then says how the public families on that stack ran against
parsim's out-of-sample prices (parsim.sim.band.stack_check).  ``results/published/harnesses.yaml`` labels
every family of the public benchmark with one of STACKS, read from the family's figures file, which cites the
source's own words for it; parsim.profile.harness prints the out-of-sample error per stack from it.  A label,
not a parameter: nothing is fitted to it.
"""

from __future__ import annotations

import os

from parsim.inputs import Fields, load_file

HARNESSES = "results/published/harnesses.yaml"
SCHEMA_VERSION = 1
# Megatron-LM and what is built on it; DeepSpeed's ZeRO or pipeline engine under the rows; torch's own FSDP;
# MindSpore; a stack of its own (results/published/harnesses.yaml's header says which sources each takes)
STACKS = ("megatron", "deepspeed", "torch-fsdp", "mindspore", "other")
# Whose schedules run the pipeline (Training.pipeline_runtime), which decides what its buffers hold
# (parsim.cost.memory).  "megatron", the default: Megatron-LM's (megatron/core/pipeline_parallel/schedules.py),
# which NeMo, Megatron-Bridge and MindSpeed run: what production pipeline training on GPU and Ascend runs.
# "torch": torch.distributed.pipelining's PipelineStage, which parsim's executor and torchtitan run; parsim
# validate prices the plans it executes with it (parsim.validation); a plan for parsim run states it.
PIPELINE_RUNTIMES = ("megatron", "torch")


def load_harnesses(path: str | os.PathLike = HARNESSES) -> dict[str, str]:
    """family -> stack, from the harness table; every error names the file and the field."""
    path = os.fspath(path)
    r = Fields(load_file(path, "a harness table YAML"), path)
    r.schema_version(SCHEMA_VERSION)
    fam = r.sub("families")
    stacks = {name: fam.choice(name, STACKS) for name in list(fam.data)}
    fam.done()
    r.done()
    return stacks
