"""parsim: simulate and plan data, pipeline and operator parallelism for training.

Data moves one way (see docs/concepts.md):

    model.yaml -> LayerGraph --+
    cluster    -> Cluster   ---+-> schedule (actions per rank) -> simulator + cost model -> Estimate

Units are in the names: ``_bytes``, ``_s``, ``_flops``.  FLOPs = 2 x MACs everywhere
(one multiply-accumulate is two floating-point operations), as torch's FlopCounterMode counts.
"""

__version__ = "0.1.0"
