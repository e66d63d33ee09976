"""plan() of MODEL on CLUSTER, N times in one process, printing search_time_s (for py-spy record):
    python results/2026-12-03c-amd-epyc/plan_runs.py MODEL CLUSTER [N]"""
import sys
from parsim.cost.compute import AnalyticalCompute
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.search.planner import plan
spec = load_model(sys.argv[1]); cluster = load_cluster(sys.argv[2])
compute = AnalyticalCompute.for_training(cluster.device, spec.training)
for i in range(int(sys.argv[3]) if len(sys.argv) > 3 else 1):
    r = plan(spec, cluster, compute, progress=False); print(r.search_time_s)
