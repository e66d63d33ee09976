"""The executor's ring attention (parsim.exec.context_parallel) taken apart, on 2 local gloo
ranks with 1 thread each, at one attention layer of examples/gpt_small_local.yaml at cp=2
(batch 8, 8 heads of 32, 128 tokens: 64 per rank).  It is the measurement behind the cp=2
plan's miss in the GPT's validation set (`git show b68a234:README.md`, "Context parallelism (cp)").

Each round runs every case once on both ranks at once (a barrier before each), so that drifts
of the shared machine fall on every case alike; the figures are medians over the rounds:

- ``eager T=s / cp``: the zoo GPT's eager attention over the whole sequence, its time / cp:
  what the simulator prices per rank (the profiled layer's time / cp, parsim.cost.context);
- ``ring, no comm``: RingAttention with its transfers replaced by local copies: the ring's own
  compute (zigzag blocks, online-softmax merge, the backward's recomputed scores);
- ``ring, gloo``: RingAttention as the executor runs it, with the time its rank spends posting
  and waiting on its K,V and dK,dV messages (``TimedRing``);
- ``block, ...``: the same three inside a whole GPT block (norms, projections, MLP);
- the ring's transfer of one K,V chunk (2 x 8 x 8 x 64 x 32 fp32, 1 MiB) alone: posted then
  waited on (``idle``), and posted then followed by a ring step's blocks before the wait
  (``busy``: the forward's pattern), with the wait that follows the blocks.

    python benchmarks/bench_ring_attention.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from collections import defaultdict

import torch
import torch.distributed as dist

import two_ranks        # benchmarks/two_ranks.py, beside this script
from parsim.exec import context_parallel as cpx
from parsim.model.zoo.gpt import Block, GPTConfig

B, HEADS, SEQ, HEAD_DIM, CP = 8, 8, 128, 32, 2
ROUNDS = 15


class _Done:
    def wait(self) -> None:
        pass


class LocalRing(cpx.Ring):
    """The same ring, each transfer a local copy: the ring's compute without gloo."""

    def shift(self, send, tag):
        self.sent_bytes += send.numel() * send.element_size()
        return send.clone(), [_Done(), _Done()]


class _Timed:
    """A request whose wait is timed into ``into``."""

    def __init__(self, req, into: list):
        self.req, self.into = req, into

    def wait(self) -> None:
        t = time.perf_counter()
        self.req.wait()
        self.into[0] += time.perf_counter() - t


class TimedRing(cpx.Ring):
    """The gloo ring, timing how long its rank spends posting and waiting on each kind of
    message: K,V (tags below cp) and dK,dV (tags from cp on, RingAttention.backward)."""

    def __init__(self, ranks, rank):
        super().__init__(ranks, rank)
        self.clock = {k: [0.0] for k in ("K,V post", "K,V wait", "dK,dV post", "dK,dV wait")}

    def shift(self, send, tag):
        what = "K,V" if tag < self.cp else "dK,dV"
        t = time.perf_counter()
        recv, reqs = super().shift(send, tag)
        self.clock[f"{what} post"][0] += time.perf_counter() - t
        return recv, [_Timed(r, self.clock[f"{what} wait"]) for r in reqs]

    def take(self) -> dict[str, float]:
        out = {k: v[0] for k, v in self.clock.items()}
        for v in self.clock.values():
            v[0] = 0.0
        return out


def _fwd_bwd(f, args, grad, between=lambda: None) -> tuple[float, float]:
    t0 = time.perf_counter()
    y = f(*args)
    t1 = time.perf_counter()
    between()
    t2 = time.perf_counter()
    y.backward(grad)
    return t1 - t0, time.perf_counter() - t2


def _worker(rank: int, init: str, out: str, rounds: int = ROUNDS) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=CP)
    torch.manual_seed(rank)
    cfg = GPTConfig(layers=1, hidden=HEADS * HEAD_DIM, heads=HEADS, seq_len=SEQ, vocab=2048, dropout=0.0)
    eager = Block(cfg).attend
    gloo, local = TimedRing(list(range(CP)), rank), LocalRing(list(range(CP)), rank)

    def qkv(t: int) -> list[torch.Tensor]:
        return [torch.randn(B, HEADS, t, HEAD_DIM, requires_grad=True) for _ in range(3)]
    whole, part = qkv(SEQ), qkv(SEQ // CP)
    grad_whole, grad_part = torch.randn_like(whole[0]), torch.randn_like(part[0])

    def on_gloo(q, k, v):
        return cpx.RingAttention.apply(q, k, v, gloo)

    def on_local(q, k, v):
        return cpx.RingAttention.apply(q, k, v, local)
    block = Block(cfg)
    local_block, ring_block = Block(cfg), Block(cfg)
    for other, attend in ((local_block, on_local), (ring_block, on_gloo)):
        other.load_state_dict(block.state_dict())
        other.attend = attend
    x_whole = torch.randn(B, SEQ, HEADS * HEAD_DIM, requires_grad=True)
    x_part = torch.randn(B, SEQ // CP, HEADS * HEAD_DIM, requires_grad=True)
    cases = {
        "block, eager T=s / cp": (block, [x_whole], torch.randn_like(x_whole), CP),
        "block, ring no comm": (local_block, [x_part], torch.randn_like(x_part), 1),
        "block, ring gloo": (ring_block, [x_part], torch.randn_like(x_part), 1),
        "eager T=s / cp": (eager, whole, grad_whole, CP),
        "ring, no comm": (on_local, part, grad_part, 1),
        "ring, gloo": (on_gloo, part, grad_part, 1),
    }
    kv = torch.stack(part).detach().contiguous()[:2]            # one K,V chunk, 1 MiB
    # one forward ring step's blocks (two (s/2cp)^2 blocks and the merge), the compute a busy sender goes on with
    qs, ks, causal = cpx.step_blocks(gloo.rank, gloo.owner(1), SEQ // CP)
    q0 = part[0].detach()

    def step_blocks():
        o, l = cpx.block_attention(q0[:, :, qs], kv[0][:, :, ks], kv[1][:, :, ks], causal, 1.0)
        cpx.merge(o, l, o, l)

    times: dict[str, list[float]] = defaultdict(list)
    for r in range(rounds + 2):                                   # the first 2 rounds warm up
        keep = r >= 2
        for name, (f, args, g, per) in cases.items():
            dist.barrier()
            gloo.take()
            comm = []
            fwd, bwd = _fwd_bwd(f, args, g, lambda: comm.append(gloo.take()))
            if keep:
                times[f"{name}: forward"].append(fwd / per)
                if name == "ring, gloo":
                    times["  of which K,V post"].append(comm[0]["K,V post"])
                    times["  of which K,V wait"].append(comm[0]["K,V wait"])
                times[f"{name}: backward"].append(bwd / per)
                if name == "ring, gloo":
                    for k, v in gloo.take().items():
                        times[f"  of which {k} "].append(v)
        dist.barrier()
        t0 = time.perf_counter()
        step_blocks()
        if keep:
            times["a forward step's blocks"].append(time.perf_counter() - t0)
        dist.barrier()
        t0 = time.perf_counter()
        _, reqs = gloo.shift(kv, 0)
        cpx._wait(reqs)
        if keep:
            times["1 MiB shift, idle: post to done"].append(time.perf_counter() - t0)
        dist.barrier()
        t0 = time.perf_counter()
        _, reqs = gloo.shift(kv, 0)
        step_blocks()
        t1 = time.perf_counter()
        cpx._wait(reqs)
        if keep:
            times["1 MiB shift, busy: post to done"].append(time.perf_counter() - t0)
            times["1 MiB shift, busy: wait after the blocks"].append(time.perf_counter() - t1)
    med = torch.tensor([statistics.median(v) for v in times.values()], dtype=torch.float64)
    dist.all_reduce(med)                                          # the two ranks' mean
    if rank == 0:
        with open(out, "w") as f:
            f.write(f"one attention layer, batch {B}, {HEADS} heads of {HEAD_DIM}, {SEQ} tokens, cp={CP}; "
                    f"2 gloo ranks x 1 thread, median of {rounds} rounds, mean of the ranks:\n")
            for name, s in zip(times, med.tolist()):
                f.write(f"  {name:44s} {s / CP * 1e3:7.3f} ms\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=ROUNDS)
    sys.exit(two_ranks.main(functools.partial(_worker, rounds=p.parse_args().rounds)))
