"""How long ``veracity corpus build`` takes to read one HTML file, and how much memory.

Generates (in a temporary folder) the files of the issue -- 40,000 ``<p>`` paragraphs (~2.4 MB)
and, with ``--big``, a 37 MB page -- and times ``verifiers.facts.corpus.read_html`` on each in a
fresh subprocess (wall time, peak RSS from ``resource.getrusage``). ``--root`` selects the
checkout whose reader runs (the one before the linear reader, for comparison); a run that takes
longer than ``--timeout`` seconds is stopped and reported as such.

    python bench/corpus_html_bench.py --out bench/results/corpus-html.md
    python bench/corpus_html_bench.py --root /path/to/older/checkout --label before --big
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
from verifiers.facts.corpus import read_html, chunk
t = time.perf_counter()
(doc,) = read_html(Path(sys.argv[1]))
took = time.perf_counter() - t
n = len(chunk(doc.blocks))
print(json.dumps({"s": took, "blocks": len(doc.blocks), "passages": n,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def make_files(d: Path, big: bool) -> dict[str, Path]:
    out = {}
    p = d / "p40k.html"
    p.write_text("<html><head><title>Shipments</title></head><body>"
                 + "".join(f"<p>Depot {i} shipped <b>{i * 3}</b> parcels to the north.</p>\n" for i in range(40_000))
                 + "</body></html>", encoding="utf-8")
    out["40,000 <p>"] = p
    deep = d / "deep.html"
    deep.write_text("<body>" + "<div><span>Level text. " * 50_000 + "</span></div>" * 50_000 + "</body>")
    out["50,000 nested <div><span>"] = deep
    if big:
        b = d / "big.html"
        row = "<tr><td>Depot {i}</td><td>{j}</td></tr>"
        with b.open("w", encoding="utf-8") as f:
            f.write("<html><body>")
            i = 0
            while f.tell() < 37 * 1024 * 1024:
                f.write(f"<section><h2>Region {i}</h2>"
                        + "".join(f"<p>Paragraph {i}.{k} about depot {k}: {k * 7} parcels.</p>" for k in range(20))
                        + "<table>" + "".join(row.format(i=k, j=k * 3) for k in range(20)) + "</table></section>\n")
                i += 1
            f.write("</body></html>")
        out["37 MB page"] = b
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=str(HERE.parent))
    ap.add_argument("--label", default="after")
    ap.add_argument("--big", action="store_true", help="also the 37 MB page")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--out")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="corpus-html-") as d:
        for name, path in make_files(Path(d), args.big).items():
            t = time.perf_counter()
            try:
                r = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True,
                                   cwd=args.root, env={"PYTHONPATH": args.root, "PATH": "/usr/bin:/bin"},
                                   timeout=args.timeout)
                res = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {"error": r.stderr[-300:]}
            except subprocess.TimeoutExpired:
                res = {"error": f"stopped after {args.timeout:.0f} s"}
            rows.append((name, path.stat().st_size, res, time.perf_counter() - t))
    lines = [f"### {args.label} (`{Path(args.root).name}`, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", "",
             "| file | size | read_html s | blocks | passages | peak RSS MB |", "|---|---|---|---|---|---|"]
    for name, size, res, _ in rows:
        if "error" in res:
            lines.append(f"| {name} | {size:,} | {res['error']} | | | |")
        else:
            lines.append(f"| {name} | {size:,} | {res['s']:.2f} | {res['blocks']:,} | {res['passages']:,} | "
                         f"{res['rss_mb']:.0f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "a") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
