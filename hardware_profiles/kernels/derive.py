"""Derive the small kernel-time tables in this folder from their public sources (PROVENANCE.md).

Run once, by hand, with the three source repositories checked out (their data files only are read):

    python hardware_profiles/kernels/derive.py DEEPBENCH_REPO VIDUR_REPO NEUSIGHT_REPO

It writes gemm_deepbench_v100.csv, conv_deepbench_v100.csv, gemm_vidur.csv and gemm_neusight_fp32.csv
here.  parsim never runs it: the committed CSVs are the data (parsim.profile.kernel_fit reads them).
"""

from __future__ import annotations

import csv
import re
import sys
import zipfile
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
_NS = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
_REL = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"


def xlsx_sheets(path: Path) -> dict[str, list[dict[str, str]]]:
    """Every sheet of an .xlsx file as a list of rows, each {column letter: cell text} (no openpyxl)."""
    z = zipfile.ZipFile(path)
    shared = []
    if "xl/sharedStrings.xml" in z.namelist():
        for si in ET.fromstring(z.read("xl/sharedStrings.xml")).iter(_NS + "si"):
            shared.append("".join(t.text or "" for t in si.iter(_NS + "t")))
    rels = {r.get("Id"): r.get("Target") for r in ET.fromstring(z.read("xl/_rels/workbook.xml.rels"))}
    out = {}
    for sheet in ET.fromstring(z.read("xl/workbook.xml")).iter(_NS + "sheet"):
        target = rels[sheet.get(_REL)]
        target = target if target.startswith("xl/") else "xl/" + target.lstrip("/")
        rows = []
        for row in ET.fromstring(z.read(target)).iter(_NS + "row"):
            cells = {}
            for c in row.iter(_NS + "c"):
                v = c.find(_NS + "v")
                if v is None or v.text is None:
                    continue
                cells[re.match(r"[A-Z]+", c.get("r")).group()] = shared[int(v.text)] if c.get("t") == "s" else v.text
            rows.append(cells)
        out[sheet.get("name")] = rows
    return out


def _us(ms: str | None) -> str:
    """A DeepBench time in ms as microseconds; "" where it has none ("N/A*": no algorithm ran)."""
    try:
        return f"{float(ms) * 1e3:.4g}"
    except (TypeError, ValueError):
        return ""


def _section(rows, title):
    """The data rows under the row whose column A is ``title``, up to the next titled row."""
    start = next(i for i, r in enumerate(rows) if r.get("A") == title)
    out = []
    for r in rows[start + 1:]:
        if r.get("A"):
            break
        out.append(r)
    return out


def deepbench(repo: Path) -> None:
    """DeepBench's V100 training results (DGX-1, CUDA 10.1, cuDNN 7.6): GEMMs and convolutions, fp32
    and fp16 inputs with fp32 accumulation (tensor cores)."""
    sheets = xlsx_sheets(repo / "results/train/DeepBench_NV_V100.xlsx")
    gemm, conv = [], []
    for sheet, dtype in (("Results FP32", "fp32"), ("Results - FP16 ip, Mixed math", "fp16")):
        rows = sheets[sheet]
        for r in _section(rows, "Dense Matrix Multiplication"):
            if not r.get("C", "").isdigit() or "I" not in r:
                continue
            gemm.append(dict(device="V100-SXM2", dtype=dtype, m=r["C"], n=r["D"], k=r["E"], a_t=r["F"], b_t=r["G"],
                             time_us=f"{float(r['I']) * 1e3:.4g}"))
        for r in _section(rows, "Convolution"):
            if not r.get("C", "").isdigit() or "N" not in r:
                continue
            conv.append(dict(device="V100-SXM2", dtype=dtype, w=r["C"], h=r["D"], c=r["E"], n=r["F"], k=r["G"],
                             s=r["H"], r=r["I"], pad_w=r["J"], pad_h=r["K"], stride_w=r["L"], stride_h=r["M"],
                             fwd_us=_us(r.get("N")), bwd_data_us=_us(r.get("O")), bwd_filter_us=_us(r.get("P")),
                             fwd_algo=r.get("X", "")))
    _write("gemm_deepbench_v100.csv", gemm)
    _write("conv_deepbench_v100.csv", conv)


# Vidur's profiled transformer linears: (n_head, n_kv_head, n_embd, n_expanded_embd, gated MLP) per model
VIDUR_MODELS = ("meta-llama/Llama-2-7b-hf", "meta-llama/Llama-2-70b-hf", "microsoft/phi-2", "Qwen/Qwen-72B",
                "codellama/CodeLlama-34b-Instruct-hf", "internlm/internlm-20b")
VIDUR_TOKENS = (1, 8, 32, 40, 128, 136, 512, 520, 1024, 1040, 2048, 4096)
VIDUR_DEVICES = {"a100": "A100-SXM4-80GB", "h100": "H100-SXM5-80GB"}


def vidur(repo: Path) -> None:
    """Vidur's fp16 linear layers (median of the profiled kernel time), as GEMMs of M = tokens rows."""
    out = {}
    for sub, device in VIDUR_DEVICES.items():
        for model in VIDUR_MODELS:
            with open(repo / "data/profiling/compute" / sub / model / "mlp.csv") as f:
                for r in csv.DictReader(f):
                    tokens, tp = int(r["num_tokens"]), int(r["num_tensor_parallel_workers"])
                    if tokens not in VIDUR_TOKENS:
                        continue
                    h, kv, e, x = int(r["n_head"]), int(r["n_kv_head"]), int(r["n_embd"]), int(r["n_expanded_embd"])
                    gated = r["use_gated_mlp"] == "True"
                    shapes = {"attn_pre_proj": (e, (h + 2 * kv) * (e // h) // tp),   # (K, N)
                              "attn_post_proj": (e // tp, e),
                              "mlp_up_proj": (e, (2 if gated else 1) * x // tp),
                              "mlp_down_proj": (x // tp, e)}
                    for op, (k, n) in shapes.items():
                        key = (device, tokens, n, k)
                        t_us = float(r[f"time_stats.{op}.median"]) * 1e3
                        out.setdefault(key, []).append(t_us)
    rows = [dict(device=d, dtype="fp16", m=m, n=n, k=k, time_us=f"{sorted(ts)[len(ts) // 2]:.4g}")
            for (d, m, n, k), ts in sorted(out.items())]
    _write("gemm_vidur.csv", rows)


NEUSIGHT_DEVICES = {"Tesla V100-PCIE-32GB": "V100-PCIE-32GB", "NVIDIA A100-PCIE-40GB": "A100-PCIE-40GB",
                    "NVIDIA H100 80GB HBM3": "H100-SXM5-80GB"}


def _tile(kernel_name: str) -> str:
    """The output tile a kernel's name states (``ampere_sgemm_128x64_tn``, ``..._tilesize128x128x8_...``)."""
    m = re.search(r"(\d+)x(\d+)", kernel_name)
    return f"{m.group(1)}x{m.group(2)}" if m else ""


def neusight(repo: Path, every: int = 4) -> None:
    """NeuSight's held-out fp32 linear layers (torch 2.1, TF32 off: CUDA-core SGEMM), every
    ``every``-th row of each device in file order."""
    rows, seen = [], {}
    with open(repo / "scripts/asplos/data/dataset/test/linear.csv") as f:
        for r in csv.DictReader(f):
            device = NEUSIGHT_DEVICES.get(r["Device"])
            if device is None:
                continue
            i = seen[device] = seen.get(device, -1) + 1
            if i % every:
                continue
            rows.append(dict(device=device, dtype="fp32", batch=r["B"], m=r["M"], n=r["N"], k=r["K"],
                             time_us=f"{float(r['Latency']) * 1e3:.4g}", tile=_tile(r["Kernel Name"])))
    _write("gemm_neusight_fp32.csv", rows)


def _write(name: str, rows: list[dict]) -> None:
    with open(HERE / name, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"{name}: {len(rows)} rows")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: derive.py DEEPBENCH_REPO VIDUR_REPO NEUSIGHT_REPO")
    deepbench(Path(sys.argv[1]))
    vidur(Path(sys.argv[2]))
    neusight(Path(sys.argv[3]))
