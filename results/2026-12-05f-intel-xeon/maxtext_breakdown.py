"""Where parsim's price of MaxText's five held-out A3 rows goes (diagnosis only: nothing is changed, fitted or
re-pinned on them).  For each row: the measured step and its growth over one VM; parsim's step, as busy time
plus exposed communication on the busiest rank, and its growth; and parsim's price of one all-reduce across
the VMs of one GPU's eighth of the bf16 gradients (HSDP's reduction across replicas: each of a VM's 8 GPUs runs
one such ring at once, on its share of the VM's NICs), which parsim overlaps with the backward: what it would
add if left exposed.  Prices with the shipped profiles (ibm-h100-800g: RDMA, where A3 High's VMs talk over
GPUDirect-TCPX).

    python results/2026-12-05f-intel-xeon/maxtext_breakdown.py
"""

from parsim.cost.comm import collective_time_s
from parsim.profile.published import figure_setup, load_figures
from parsim.sim import simulate

GPUS_PER_VM = 8


def main() -> None:
    first = None
    for f in load_figures("results/published/maxtext_a3_figures.yaml").figures:
        spec, cluster, compute, cfg = figure_setup(f)
        est = simulate(spec.graph, spec.training, cluster, cfg, compute, keep_timeline=False)
        rank = max(est.ranks, key=lambda r: r.busy_s + r.exposed_comm_s)
        vms = cfg.dp // GPUS_PER_VM
        shard_bytes = sum(layer.param_count for layer in spec.graph.layers) * 2 / GPUS_PER_VM
        ring_s = collective_time_s(cluster, [v * GPUS_PER_VM for v in range(vms)], shard_bytes)
        first = first or (f.measured, est.step_time_s)
        print(f"{f.id}: {vms} VM(s), measured {f.measured:.3f} s (+{f.measured - first[0]:.3f} s over one VM); "
              f"parsim {est.step_time_s:.3f} s = busy {rank.busy_s:.3f} + exposed {rank.exposed_comm_s:.3f} "
              f"(+{est.step_time_s - first[1]:.3f} s); the all-reduce across VMs, overlapped: {ring_s:.3f} s")


if __name__ == "__main__":
    main()
