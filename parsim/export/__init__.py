"""Launch a plan where users train, and price what they train with today.

``export_text(plan, spec, target)``: a plan.json as MindSpore's parallel settings, Megatron-LM's
arguments, torchtitan's TOML or DeepSpeed's JSON (one adapter module each).
``read_config(framework, path)``: a Megatron argument list or script, a torchtitan TOML, a DeepSpeed
JSON, a MindFormers YAML or an exported MindSpore fragment, as an ``Imported`` (the model.yaml
mapping, training fields and parallel configuration it runs), which ``imported_config`` completes
into a model and a ParallelConfig for the simulator and the planner.
"""

from __future__ import annotations

import json
import os

from parsim.errors import InputError
from parsim.export.common import Imported, parse_value, set_dotted
from parsim.plan import recompute_layers_text

TARGETS = ("mindspore", "megatron", "torchtitan", "deepspeed")
READERS = ("megatron", "torchtitan", "deepspeed", "mindformers", "mindspore")
SUFFIX = {"mindspore": ".py", "megatron": ".args", "torchtitan": ".toml", "deepspeed": ".json"}


def _header(plan, source: str, target: str) -> list[str]:
    c, est = plan.config, plan.estimate
    step = f", predicted {est['step_time_s']:.4g} s a step" if "step_time_s" in est else ""
    return [f"{target} settings from parsim's plan {source}: {plan.model_name} on {plan.cluster}",
            f"dp {c.dp} x pp {c.pp} x tp {c.tp} x cp {c.cp}, {c.microbatches} micro-batches, {c.schedule}, "
            f"zero {c.zero}{f' in shard groups of {c.dp_shard}' if c.hybrid_sharded else ''}, "
            f"recompute {c.recompute.value}"
            f"{f' ({part})' if (part := recompute_layers_text(c.recompute_layers, c.recompute_every)) else ''}{step}",
            f"(parsim export {source} --to {target}; `parsim simulate --from {target} FILE` reads it back)"]


def export_text(plan, spec, target: str, source: str) -> str:
    """The plan in ``target``'s own format."""
    c = plan.config
    # every target reduces each micro-batch's gradients under ZeRO-2/3, but beside a pipeline, where
    # torchtitan's FSDP2 stages reduce once a step anyway (ParallelConfig.grads_reduced_once)
    if c.no_sync and not (target == "torchtitan" and c.fsdp_beside_pipeline):
        from parsim.export.common import refuse

        raise refuse(source, "parallel.no_sync", True, target, "reduce-scatters every micro-batch's gradients "
                     "under ZeRO-2/3 (torchtitan's and Megatron's FSDP2, DeepSpeed, MindSpore); plan without --no-sync")
    header = _header(plan, source, target)
    if target == "megatron":
        from parsim.export import megatron

        return megatron.render(megatron.export_args(plan, spec, source), header)
    if target == "torchtitan":
        from parsim.export import torchtitan

        return torchtitan.render(torchtitan.export_config(plan, spec, source), header)
    if target == "deepspeed":
        from parsim.export import deepspeed

        return json.dumps(deepspeed.export_config(plan, spec, source), indent=2) + "\n"
    from parsim.export import mindspore

    return mindspore.render(mindspore.export_settings(plan, spec, source, _strategies(plan, spec)), header)


def _strategies(plan, spec) -> dict:
    """The plan's operator strategies for its tp group (none at tp = 1)."""
    c = plan.config
    if c.tp == 1:
        return {}
    from parsim.hardware import load_cluster
    from parsim.shard.prepare import auto_memory_bytes, layout_strategies

    cluster = load_cluster(plan.cluster)
    return layout_strategies(spec.graph, c.tp, c.tp_layout, spec.shard, cluster, spec.training,
                             c.microbatch_size(plan.global_batch_size), auto_memory_bytes(cluster, c.pp), c.etp)


def read_config(framework: str, path: str, sets: list[str] = (), names: tuple[str, ...] | None = None) -> Imported:
    """A framework's config file as what it runs; ``sets``: KEY=VALUE overrides (dotted keys for
    the TOML, JSON and YAML configs, flag names for Megatron's); ``names``: the --model's cut units
    (DeepSpeed's and MindSpore's configs name no model)."""
    from parsim.inputs import load_file, read_text

    overrides = []
    for item in sets:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise InputError(f"--set {item}: expected KEY=VALUE, e.g. training.local_batch_size=2")
        overrides.append((key.strip(), value.strip()))
    if framework == "megatron":
        from parsim.export import megatron

        text = read_text(path, "a Megatron argument list or launch script")
        text += "".join(f"\n--{k.lstrip('-')} {v}" for k, v in overrides)
        return megatron.import_args(text, path)
    if framework == "mindspore":
        from parsim.export import mindspore

        settings = mindspore.read_settings(read_text(path, "a MindSpore fragment from parsim export"), path)
        for k, v in overrides:
            settings[k] = parse_value(v)
        return mindspore.import_settings(settings, path, names or ())
    if framework == "torchtitan":
        from parsim.export import torchtitan

        raw = torchtitan.load_toml(path)
    else:
        raw = load_file(path, {"deepspeed": "a DeepSpeed JSON config", "mindformers": "a MindFormers YAML"}[framework])
        if not isinstance(raw, dict):
            raise InputError(f"{path}: top level: expected a mapping")
    for k, v in overrides:
        set_dotted(raw, k, parse_value(v), path)
    if framework == "torchtitan":
        return torchtitan.import_config(raw, path)
    if framework == "deepspeed":
        from parsim.export import deepspeed

        return deepspeed.import_config(raw, path, len(names) if names else None)
    from parsim.export import mindformers

    return mindformers.import_config(raw, path)


def default_output(plan_path: str, target: str) -> str:
    return os.path.splitext(plan_path)[0] + "." + target + SUFFIX[target]
