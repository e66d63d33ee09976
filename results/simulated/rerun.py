"""Run every `$ ` command of the given results/simulated files again and write what each prints
under it now, the files' `#` header lines kept (say in the header why they were made again).  A
plan's search time is left out of its first line ("simulated N", not "simulated N in T s"): it is
this machine's, not the plan's.  The machines/ files are made by machines/regenerate.sh instead.
From the repository root:

    python results/simulated/rerun.py results/simulated/2026-11-30-options.txt ...
"""
import re
import subprocess
import sys

from parsim.fileio import write_text


def rerun(path: str) -> None:
    out, command = [], None
    for line in open(path).read().splitlines():
        if line.startswith("$ "):
            command = line[2:]
            out.append(line)
            printed = subprocess.run(command, shell=True, check=True, capture_output=True, text=True).stdout
            out.extend(re.sub(r"(simulated \d+) in [\d.]+ s", r"\1", x) for x in printed.rstrip("\n").splitlines())
        elif command is None:
            out.append(line)            # the header, before the first command
    write_text(path, "\n".join(out) + "\n")


if __name__ == "__main__":
    for path in sys.argv[1:]:
        rerun(path)
        print("wrote", path)
