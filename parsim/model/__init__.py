"""Model graphs: the ordered layers at which a pipeline may be cut (no hardware here)."""

from parsim.model.graph import Layer, LayerGraph

__all__ = ["Layer", "LayerGraph"]
