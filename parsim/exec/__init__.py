"""The executor: run a plan with torch.distributed (gloo on CPU, nccl on CUDA, hccl on Ascend)
and measure it in the simulator's own terms.  Imports torch; nothing in parsim.sim imports this."""
