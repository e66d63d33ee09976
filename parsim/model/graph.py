"""LayerGraph: the ordered list of cut units of a model, with per-sample costs.

Conventions (stated once for the whole package):
- Every ``_flops`` is floating-point operations, FLOPs = 2 x MACs, as counted by
  ``torch.utils.flop_counter.FlopCounterMode`` (matmul, conv and attention kernels only).
- Every per-sample quantity is for one sample of the model's input (one image, one sequence).
- ``*_mem_bytes`` are bytes read plus written by memory-bound operators (BatchNorm, ReLU,
  residual adds, softmax, ...), the operators FlopCounterMode does not count.  A roofline
  prices them by bytes, not FLOPs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Iterable, Sequence

DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}


@dataclass(frozen=True)
class OpInfo:
    """One operator that matters for sharding, as recorded in the forward pass on the meta device.
    Shapes include the extraction batch (LayerGraph.extraction_batch samples)."""

    kind: str                                   # MatMul | BatchMatMul | Conv2d | ElementWise | BatchNorm | LayerNorm | Softmax
    aten: str                                   # the aten operator, e.g. "addmm"
    input_shapes: tuple[tuple[int, ...], ...]   # tensor inputs that matter (e.g. addmm: mat1, mat2)
    output_shape: tuple[int, ...]
    dtype: str
    param_inputs: tuple[bool, ...]              # which of those inputs are (views of) parameters


@dataclass(frozen=True)
class Layer:
    """One cut unit (ResNet: the stem, one Bottleneck, the head; GPT: one decoder block)."""

    name: str
    fwd_flops: float            # per sample
    bwd_flops: float            # per sample (grad of inputs and of weights)
    param_count: int            # parameters first owned by this layer (tied weights count once)
    param_bytes: int            # in the extraction dtype
    output_bytes: float         # per sample: the activation that crosses a stage boundary
    saved_bytes: float          # per sample: tensors autograd keeps for backward
    fwd_mem_bytes: float = 0.0  # per sample, memory-bound operators, forward
    bwd_mem_bytes: float = 0.0  # per sample, memory-bound operators, backward
    max_param_bytes: int = 0    # largest single parameter: its gradient's temporary in backward
    # Operator view for operator-level sharding (OpInfo per operator, forward order); empty if unknown.
    ops: tuple = field(default=(), compare=False, repr=False)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("ops")
        return d


@dataclass(frozen=True)
class LayerGraph:
    name: str
    layers: tuple[Layer, ...]
    dtype: str = "fp32"          # dtype the byte counts were taken in
    input_bytes: float = 0.0     # per sample, what the first stage reads
    # Smallest trainable micro-batch: 2 when a BatchNorm sees one value per channel per sample
    # (e.g. ResNet-50's layer4 at 32x32 input), since training-mode BatchNorm needs two.
    min_microbatch: int = 1
    min_microbatch_reason: str = ""
    extraction_batch: int = 2    # samples in the shapes of Layer.ops

    def __post_init__(self):
        names = [layer.name for layer in self.layers]
        if len(set(names)) != len(names):
            raise ValueError(f"layer names must be unique: {names}")

    def __len__(self) -> int:
        return len(self.layers)

    @property
    def names(self) -> list[str]:
        return [layer.name for layer in self.layers]

    def index(self, name: str) -> int:
        return self.names.index(name)

    @property
    def param_count(self) -> int:
        return sum(layer.param_count for layer in self.layers)

    @property
    def param_bytes(self) -> int:
        return sum(layer.param_bytes for layer in self.layers)

    @property
    def fwd_flops(self) -> float:
        return sum(layer.fwd_flops for layer in self.layers)

    @property
    def bwd_flops(self) -> float:
        return sum(layer.bwd_flops for layer in self.layers)

    @property
    def saved_bytes(self) -> float:
        return sum(layer.saved_bytes for layer in self.layers)

    def slice(self, start: int, stop: int) -> Sequence[Layer]:
        return self.layers[start:stop]

    def to_dict(self) -> dict:
        return {"name": self.name, "dtype": self.dtype, "input_bytes": self.input_bytes,
                "min_microbatch": self.min_microbatch, "layers": [layer.to_dict() for layer in self.layers]}

    @classmethod
    def from_dict(cls, d: dict) -> "LayerGraph":
        keys = {f.name for f in fields(Layer)} - {"ops"}
        layers = tuple(Layer(**{k: v for k, v in row.items() if k in keys}) for row in d["layers"])
        return cls(d["name"], layers, d.get("dtype", "fp32"), d.get("input_bytes", 0.0), d.get("min_microbatch", 1))

    def table(self):
        """A pandas DataFrame, one row per layer."""
        import pandas as pd

        return pd.DataFrame([layer.to_dict() for layer in self.layers])

    def totals(self) -> dict:
        return {"layers": len(self), "param_count": self.param_count, "param_bytes": self.param_bytes,
                "fwd_flops_per_sample": self.fwd_flops, "bwd_flops_per_sample": self.bwd_flops,
                "saved_bytes_per_sample": self.saved_bytes,
                "output_bytes_per_sample": sum(layer.output_bytes for layer in self.layers)}


def stage_ranges(assignment: Iterable[int]) -> list[tuple[int, int]]:
    """[0,0,1,1,1] -> [(0,2),(2,5)]: half-open layer ranges per stage, from a stage per layer."""
    assignment = list(assignment)
    ranges, start = [], 0
    for i in range(1, len(assignment) + 1):
        if i == len(assignment) or assignment[i] != assignment[start]:
            ranges.append((start, i))
            start = i
    return ranges
