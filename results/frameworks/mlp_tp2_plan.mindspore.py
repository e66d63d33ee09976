# mindspore settings from parsim's plan results/frameworks/mlp_tp2_plan.json: mlp-semi-auto on local-cpu:2x2
# dp 2 x pp 1 x tp 2 x cp 1, 2 micro-batches, 1f1b, zero 0, recompute none, predicted 0.005024 s a step
# (parsim export results/frameworks/mlp_tp2_plan.json --to mindspore; `parsim simulate --from mindspore FILE` reads it back)
PARALLEL_CONTEXT = {'parallel_mode': 'semi_auto_parallel', 'device_num': 4, 'gradients_mean': True}
BATCH_SIZE = 32
MICRO_SIZE = 2
AMP_LEVEL = 'O0'
SHARD = {'1': ((2, 1), (1, 2)), '3': ((2, 2), (2, 1))}


def apply_plan(net, loss_fn):
    """Set the parallel context and the cells' stages on the network: call it after
    mindspore.communication.init() and before building the Model; returns the cell to train."""
    import mindspore as ms
    from mindspore import nn

    ms.set_auto_parallel_context(**PARALLEL_CONTEXT)
    cells = dict(net.cells_and_names())
    for name, stage in globals().get("PIPELINE_STAGE", {}).items():
        cells[name].pipeline_stage = stage
    for name, segment in globals().get("PIPELINE_SEGMENT", {}).items():
        cells[name].pipeline_segment = segment
    for name in globals().get("RECOMPUTE", []):
        cells[name].recompute()
    for pattern, strategy in globals().get("SHARD", {}).items():
        # a Dense runs MatMul(transpose_b=True): W is [n, k], so W^T's (k, n) splits are given reversed
        layer, _, module = pattern.partition("/")
        for name, cell in cells.items():
            if isinstance(cell, nn.Dense) and _matches(name, layer, module):
                cell.matmul.shard((strategy[0], tuple(reversed(strategy[1]))))
    with_loss = nn.WithLossCell(net, loss_fn)
    if "PIPELINE_STAGE" in globals():
        return nn.PipelineCell(with_loss, micro_size=MICRO_SIZE)
    return with_loss


def _matches(name, layer, module):
    import fnmatch

    return fnmatch.fnmatch(name, layer + "." + module if module else layer)
