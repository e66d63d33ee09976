import os, time, torch, torch.distributed as dist, statistics, sys
sys.path.insert(0,'/work/main')
torch.set_num_threads(1)
dist.init_process_group("gloo")
r=dist.get_rank()
from parsim.model.spec import load_model, build_module
from parsim.model.extract import cut_units
from parsim.exec.objective import loss_fn
spec=load_model('/work/main/results/heldout/models/bert_mini.yaml')
torch.manual_seed(0)
m=torch.nn.Sequential(*[u for _,u in cut_units(build_module(spec.source, spec.path))])
x=torch.randint(0,2048,(6,64)); y=x.roll(-1,1)
params=list(m.parameters()); n=sum(p.numel() for p in params)
flat=torch.zeros(n)
rows=[]
for step in range(10):
    for p in params: p.grad=None
    dist.barrier()
    t0=time.perf_counter(); out=m(x); loss=loss_fn(out,y); t1=time.perf_counter(); loss.backward(); t2=time.perf_counter()
    i=0
    for p in params:
        k=p.numel(); flat[i:i+k].copy_(p.grad.view(-1)); i+=k
    t3=time.perf_counter()
    dist.all_reduce(flat); t4=time.perf_counter()
    rows.append((t1-t0,t2-t1,t3-t2,t4-t3))
    # alone
    dist.barrier(); t5=time.perf_counter(); dist.all_reduce(flat); t6=time.perf_counter()
    rows[-1]+= (t6-t5,)
med=[statistics.median(c[2:]) * 1e3 for c in zip(*rows)]
print(r, 'F %.1f B %.1f copy %.1f AR-after-B %.1f AR-alone %.1f' % tuple(med), 'bytes', n*4)
dist.destroy_process_group()
