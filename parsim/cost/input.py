"""The input pipeline as a resource: what loading one micro-batch's samples costs the ranks that
read input (pipeline stage 0 of every replica; tensor-parallel ranks of stage 0 each read it too).

Two kinds of loader (``InputPipeline.overlap``):

- inline (overlap false): the training process reads, decodes and augments on its own compute
  stream before the micro-batch's first forward, ``b x per_sample_s`` per micro-batch of b
  samples (as ``parsim run`` does: parsim/exec/data.py, DataLoader num_workers=0);
- loader workers (overlap true): a per-node loader delivers ``host_samples_per_s`` in total,
  shared by the node's input-reading ranks, running ahead of the step (prefetch).  Replicas are
  symmetric, so one rank's micro-batch takes ``readers_on_node x b / host_samples_per_s`` of the
  node's loader; the step waits only where the loader is slower than compute.  In steady state
  the loader-bound step is ``microbatches x that``, i.e. max(compute, load).
"""

from __future__ import annotations

from dataclasses import dataclass

from parsim.hardware.cluster import Cluster, InputPipeline


@dataclass(frozen=True)
class InputCost:
    overlap: bool
    microbatch_s: float        # inline: on the reader's compute stream; overlap: of the node's loader stream
    readers_on_node: int       # input-reading ranks sharing the node's loader (replica 0's node)


def input_cost(pipeline: InputPipeline | None, cluster: Cluster, reader_ranks: list[int],
               microbatch_size: int, sample_elements: int = 0) -> InputCost | None:
    """``reader_ranks``: the global ranks that read input, replica 0's first; ``sample_elements``:
    the model's input per sample.  None when the profile has no input_pipeline section, or one
    measured for another input (loading is then not priced, as before the section existed)."""
    if pipeline is None or (pipeline.sample_elements and pipeline.sample_elements != sample_elements):
        return None
    node = cluster.node_of(reader_ranks[0])
    readers = sum(1 for r in reader_ranks if cluster.node_of(r) == node)
    if pipeline.overlap:
        return InputCost(True, readers * microbatch_size / pipeline.host_samples_per_s, readers)
    return InputCost(False, microbatch_size * pipeline.per_sample_s, readers)


def loader_ready_s(load_s: float, microbatches: int, first_forward_s: list[float], step_s: float) -> list[float]:
    """When the overlapped loader has micro-batch k ready, in the step's time frame.

    ``first_forward_s`` and ``step_s`` come from the step run with every input ready at 0.  If
    the loader keeps up (microbatches x load_s <= step_s) it has the whole step buffered ahead
    (a prefetch depth of one step, assumed) and nothing waits.  Otherwise it is busy all the time
    and the step repeats every microbatches x load_s: micro-batch k is ready at
    (k + 1) x load_s - head, where head is what the loader got ahead during the previous step's
    tail (from the last micro-batch's first forward to the step's end), so that the step ends at
    microbatches x load_s."""
    if microbatches * load_s <= step_s:
        return [0.0] * microbatches
    head = step_s - first_forward_s[microbatches - 1]
    return [(k + 1) * load_s - head for k in range(microbatches)]
