"""Built-in models.  Each is an ``nn.Sequential`` whose named children (expanded one level for
``layerN`` groups) are the pipeline cut units, so a stage is ``nn.Sequential(*units[a:b])``."""

from parsim.model.zoo.gpt import GPT_PRESETS, GPTConfig, gpt
from parsim.model.zoo.resnet import resnet50

__all__ = ["GPT_PRESETS", "GPTConfig", "gpt", "resnet50"]
