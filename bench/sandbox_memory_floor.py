"""Measure the RLIMIT_AS floor of the sandbox runtime's scientific stack (issue 15).

For each address-space limit (MiB, decreasing) it runs, in the bwrap sandbox with the given
runtime, (a) a plain program -- ``import numpy, pandas, sympy`` and a small DataFrame filter --
and (b) the code verifier on the design's pandas case (its harness adds threads and a
namespace per block), and records how each run ended: ``ok`` / the check's outcome, or
``killed_by`` with the exit code. Below the floor the imports fail (``MemoryError`` /
``ImportError`` from a failed mmap) or spin until the CPU limit (SIGXCPU, exit 152).

    python bench/sandbox_memory_floor.py --runtime DIR [--limits 1024,768,512,...] [--out FILE.md]

Writes a Markdown table (default bench/results/sandbox_memory_floor.md).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from verifiers import code  # noqa: E402
from verifiers.sandbox import Limits  # noqa: E402
from verifiers.sandbox.bwrap import BwrapSandbox  # noqa: E402

PLAIN = """
import numpy as np, pandas as pd, sympy as sp
df = pd.DataFrame({'age': [10, 130, 40]})
print(int(df[(df['age'] > 0) & (df['age'] < 120)]['age'].sum()), sp.factor(sp.Symbol('x')**2 - 1))
"""

PANDAS_CASE = """To keep the plausible ages:

```python
import pandas as pd
df = pd.DataFrame({'Name': ['Ann', 'Bob', 'Cy'], 'Age': [34, -1, 150]})
clean = df[(df['Age'] > 0) and (df['Age'] < 120)]
print(clean)
```
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runtime", required=True)
    ap.add_argument("--limits", default="1024,768,640,512,448,384,352,320,288,256,224,192")
    ap.add_argument("--cpu-s", type=int, default=10)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "sandbox_memory_floor.md"))
    args = ap.parse_args()
    box = BwrapSandbox(runtime=args.runtime)
    why = box.unavailable_reason()
    if why:
        print(f"bwrap unavailable: {why}", file=sys.stderr)
        return 2
    rows = []
    for mb in [int(x) for x in args.limits.split(",")]:
        lim = Limits(memory_mb=mb, cpu_s=args.cpu_s, timeout_s=60)
        t0 = time.monotonic()
        res = box.run(PLAIN, limits=lim)
        plain = "ok" if res.ok and res.stdout.startswith("50") else \
            f"killed_by={res.killed_by} exit={res.exit_code} {(res.stderr.strip().splitlines() or [''])[-1][:60]}"
        plain_s = time.monotonic() - t0
        t0 = time.monotonic()
        checks = code.check(PANDAS_CASE, sandbox=box, limits=lim)
        c = checks[0]
        verdict = f"{c.outcome}: {c.note[:70]}"
        rows.append((mb, plain, round(plain_s, 1), verdict, round(time.monotonic() - t0, 1)))
        print(rows[-1], flush=True)
    m = box.runtime.manifest if box.runtime else {}
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.write("# Sandbox RLIMIT_AS floor of the scientific stack (bench/sandbox_memory_floor.py)\n\n")
        fh.write(f"bwrap, runtime {box.python} (Python {m.get('python')}; "
                 + ", ".join(f"{k} {v}" for k, v in m.get("packages", {}).items())
                 + f"), {platform.machine()}, {os.cpu_count()} CPUs, cpu_s={args.cpu_s}, "
                 f"OPENBLAS_NUM_THREADS=1.\n\n")
        fh.write("| RLIMIT_AS (MiB) | import numpy+pandas+sympy, DataFrame filter | wall s | code verifier on the pandas case | wall s |\n")
        fh.write("|---:|---|---:|---|---:|\n")
        for r in rows:
            fh.write(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} |\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
