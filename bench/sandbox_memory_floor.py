"""Measure the RLIMIT_AS floor of the sandbox runtime's scientific stack (docs/code.md, the sandbox runtime).

For each address-space limit (MiB, decreasing) it runs, in the bwrap sandbox with the given
runtime, (a) a plain program -- ``import numpy, pandas, sympy``, a small DataFrame filter and two BLAS/LAPACK
calls (``det``, a matrix product: OpenBLAS allocates its buffers at the first one) --
and (b) the code verifier on the pandas case of docs/code.md (its harness adds threads and a
namespace per block), and records how each run ended: ``ok`` / the check's outcome, or
``killed_by`` with the exit code. Below the floor the imports fail (``MemoryError`` /
``ImportError`` from a failed mmap) or spin until the CPU limit (SIGXCPU, exit 152).

    python bench/sandbox_memory_floor.py --runtime DIR [--limits 1024,768,512,...] [--out FILE.md]
    python bench/sandbox_memory_floor.py --rootfs DIR ...   # e.g. CI's debootstrap tree (Debian's stack)

Appends a Markdown table to --out (default bench/results/sandbox_memory_floor.md). A second
program adds what tests/verifiers/test_sandbox.py's stack test does: a thread (8 MiB stack reserved under
RLIMIT_AS), a forked process, a subprocess; a third is threaded data code (8 worker threads).
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
from verifiers.sandbox._bwrap import BwrapSandbox  # noqa: E402

PLAIN = """
import numpy as np, pandas as pd, sympy as sp
df = pd.DataFrame({'age': [10, 130, 40]})
print(int(df[(df['age'] > 0) & (df['age'] < 120)]['age'].sum()), sp.factor(sp.Symbol('x')**2 - 1))
print(float(np.linalg.det(np.eye(3) * 2)), float((np.ones((64, 64)) @ np.ones((64, 64)))[0, 0]))
"""

#: Ordinary threaded data code: 8 threads doing numpy matrix products and pandas queries (each
#: thread that calls BLAS gets an OpenBLAS buffer; each that mallocs may get a glibc arena).
POOL = """
import numpy as np, pandas as pd
from concurrent.futures import ThreadPoolExecutor
def work(i):
    a = np.random.default_rng(i).random((200, 200))
    return float((a @ a).sum() > 0) + len(pd.DataFrame({'x': range(1000)}).query('x > 5'))
with ThreadPoolExecutor(8) as ex:
    print(sum(ex.map(work, range(32))))
"""

THREADS = PLAIN + """
import multiprocessing, subprocess, threading
t = threading.Thread(target=print, args=('thread',)); t.start(); t.join()
a, b = multiprocessing.get_context('fork').Pipe()
p = multiprocessing.get_context('fork').Process(target=lambda: b.send(6)); p.start(); print(a.recv()); p.join()
print(subprocess.run(['python3', '-c', 'print(7)'], capture_output=True, text=True).stdout.strip())
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
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--runtime")
    src.add_argument("--rootfs")
    ap.add_argument("--limits", default="1024,768,640,512,448,384,352,320,288,256,224,192")
    ap.add_argument("--cpu-s", type=int, default=10)
    ap.add_argument("--label", default="", help="what else to say about the tree in the section title")
    ap.add_argument("--no-arena-max", action="store_true",
                    help="drop MALLOC_ARENA_MAX from the sandbox environment (to measure what it buys)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "sandbox_memory_floor.md"))
    args = ap.parse_args()
    box = BwrapSandbox(runtime=args.runtime) if args.runtime else BwrapSandbox(rootfs=args.rootfs, python="/usr/bin/python3")
    why = box.unavailable_reason()
    if why:
        print(f"bwrap unavailable: {why}", file=sys.stderr)
        return 2
    if args.no_arena_max:
        import verifiers.sandbox._bwrap as bw

        bw.SANDBOX_ENV.pop("MALLOC_ARENA_MAX", None)
    rows = []
    for mb in [int(x) for x in args.limits.split(",")]:
        lim = Limits(memory_mb=mb, cpu_s=args.cpu_s, timeout_s=60)
        t0 = time.monotonic()
        res = box.run(PLAIN, limits=lim)
        plain = _how(res, res.stdout.startswith("50"))
        plain_s = time.monotonic() - t0
        t0 = time.monotonic()
        res = box.run(THREADS, limits=lim)
        threads = _how(res, res.stdout.split()[-3:] == ["thread", "6", "7"])
        threads_s = time.monotonic() - t0
        t0 = time.monotonic()
        res = box.run(POOL, limits=lim)
        pool = _how(res, res.stdout.strip() == "31840.0")
        pool_s = time.monotonic() - t0
        t0 = time.monotonic()
        checks = code.check(PANDAS_CASE, sandbox=box, limits=lim)
        c = checks[0]
        verdict = f"{c.outcome}: {c.note[:70]}"
        rows.append((mb, plain, round(plain_s, 1), threads, round(threads_s, 1), pool, round(pool_s, 1),
                     verdict, round(time.monotonic() - t0, 1)))
        print(rows[-1], flush=True)
    res = box.run("import importlib.metadata as m, sys\nprint(sys.version.split()[0], *sorted(f'{d.metadata[\"Name\"]} {d.version}' "
                  "for d in m.distributions() if d.metadata['Name'] in ('numpy', 'pandas', 'sympy')), sep=', ')")
    new = not os.path.exists(args.out)
    with open(args.out, "a", encoding="utf-8") as fh:
        if new:
            fh.write("# Sandbox RLIMIT_AS floor of the scientific stack (bench/sandbox_memory_floor.py)\n")
        fh.write(f"\n## bwrap, {'runtime ' + args.runtime if args.runtime else 'rootfs ' + args.rootfs}"
                 f"{' (' + args.label + ')' if args.label else ''}\n\n"
                 f"Python {res.stdout.strip()}; {platform.machine()}, {os.cpu_count()} CPUs, cpu_s={args.cpu_s}, "
                 f"sandbox env: OPENBLAS_NUM_THREADS=1"
                 f"{'' if args.no_arena_max else ', MALLOC_ARENA_MAX=2'}.\n\n")
        fh.write("| RLIMIT_AS (MiB) | import numpy+pandas+sympy, DataFrame filter, det + matmul | wall s "
                 "| + thread, fork, subprocess | wall s | 8 threads: numpy matmul + pandas query | wall s "
                 "| code verifier on the pandas case | wall s |\n")
        fh.write("|---:|---|---:|---|---:|---|---:|---|---:|\n")
        for r in rows:
            fh.write("| " + " | ".join(str(x) for x in r) + " |\n")
    print(f"wrote {args.out}")
    return 0


def _how(res, good: bool) -> str:
    if res.ok and good:
        return "ok"
    last = (res.stderr.strip().splitlines() or [""])[-1][:70].replace("|", "/")
    return f"killed_by={res.killed_by} exit={res.exit_code} {last}".strip()


if __name__ == "__main__":
    sys.exit(main())
