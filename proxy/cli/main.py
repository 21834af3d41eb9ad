"""The ``veracity`` command line (console script ``veracity = proxy.cli.main:main``).

Subcommands are registered with :func:`command`; adding one is a small, local edit::

    @command("index build", help="Build the citation index")
    def _index_build(p: argparse.ArgumentParser) -> Handler:
        p.add_argument("--out", default="index.sqlite3")

        def run(args: argparse.Namespace) -> int:
            from verifiers.citations.index import build   # import lazily: keep start-up fast
            build(args.out)
            return 0

        return run

A name with spaces ("index build") creates the group ``index`` with the subcommand ``build``.
The decorated function receives the subcommand's :class:`argparse.ArgumentParser`, adds its
arguments and returns the handler ``(args) -> int`` (the process exit status). Handlers import
their heavy modules themselves, so ``veracity --help`` stays instant.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

Handler = Callable[[argparse.Namespace], int]
Setup = Callable[[argparse.ArgumentParser], Handler]

#: Registered subcommands in registration order: (space-separated name, help, setup).
_COMMANDS: list[tuple[str, str, Setup]] = []


def command(name: str, *, help: str) -> Callable[[Setup], Setup]:
    """Register a subcommand ``name`` ("serve", or "index build" for a nested one).

    The decorated ``setup(parser) -> handler`` is called once when the parser is built.
    """

    def deco(setup: Setup) -> Setup:
        _COMMANDS.append((name, help, setup))
        return setup

    return deco


def build_parser() -> argparse.ArgumentParser:
    """The full argparse parser with every registered subcommand."""
    parser = argparse.ArgumentParser(
        prog="veracity",
        description="OpenAI-compatible gateway that verifies LLM answers.",
    )
    root = parser.add_subparsers(dest="command", metavar="COMMAND")
    groups: dict[str, argparse._SubParsersAction] = {"": root}
    for name, help_text, setup in _COMMANDS:
        parts = name.split()
        parent = ""
        for part in parts[:-1]:
            key = f"{parent} {part}".strip()
            if key not in groups:
                gp = groups[parent].add_parser(part, help=f"{part} commands")
                groups[key] = gp.add_subparsers(dest=f"{key.replace(' ', '_')}_command", metavar="COMMAND")
                gp.set_defaults(_group_parser=gp)
            parent = key
        sub = groups[parent].add_parser(parts[-1], help=help_text, description=help_text)
        sub.set_defaults(_handler=setup(sub))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: parse ``argv`` (default ``sys.argv[1:]``), run the handler, return its status.

    A reader that closes stdout early (``veracity review list | head``) ends the command quietly
    with status 141 (128 + SIGPIPE, what a shell reports for a command killed by it), without a
    traceback; the Python docs' recipe (library/signal.html, "Note on SIGPIPE"): stdout is
    pointed at devnull so the interpreter's final flush does not raise again."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "_handler", None)
    if handler is None:
        (getattr(args, "_group_parser", None) or parser).print_help()
        return 2
    try:
        return int(handler(args) or 0)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141


# --------------------------------------------------------------------------- built-in commands


@command("serve", help="Run the gateway (HTTP server).")
def _serve(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("--config", "-c", default=None,
                   help="YAML config file (default: $VERACITY_CONFIG, else ./veracity.yaml if present, "
                        "else OPENAI_API_KEY -> OpenAI, else demo mode)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--workers", type=int, default=1,
                   help="uvicorn worker processes (metrics use prometheus-client multiprocess mode)")
    p.add_argument("--log-level", default="info")

    def run(args: argparse.Namespace) -> int:
        from proxy.cli.serve import serve

        return serve(config_path=args.config, host=args.host, port=args.port,
                     workers=args.workers, log_level=args.log_level)

    return run


@command("mock-upstream", help="Run the scripted OpenAI-compatible upstream (tests, demos, rehearsals).")
def _mock_upstream(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("--script", default=None, help="YAML/JSON script of rules (default: the demo script)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8001, help="0 = let the OS pick (printed on start)")
    p.add_argument("--no-record", action="store_true", help="do not keep requests (benchmarks)")

    def run(args: argparse.Namespace) -> int:
        from proxy.upstreams import mock as mock_upstream

        argv: list[str] = ["--host", args.host, "--port", str(args.port)]
        if args.script:
            argv += ["--script", args.script]
        if args.no_record:
            argv.append("--no-record")
        return int(mock_upstream.main(argv) or 0)

    return run


@command("key hash", help="Print the sha256 hash of a virtual key for `keys[].hash` (reads the key from stdin).")
def _key_hash(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("--generate", action="store_true", help="generate a new random key and print key and hash")

    def run(args: argparse.Namespace) -> int:
        import secrets

        from proxy.config import hash_key

        if args.generate:
            key = "vk-" + secrets.token_urlsafe(32)
            print(f"key:  {key}")
        else:
            key = sys.stdin.readline().strip()
            if not key:
                print("veracity: give the key on stdin (or use --generate)", file=sys.stderr)
                return 2
        print(f"hash: {hash_key(key)}")
        return 0

    return run


@command("config check", help="Validate a config file and every policy file of its policy folder (exit "
                                "status 2 on any problem) and print the effective upstreams and policies.")
def _config_check(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("config")

    def run(args: argparse.Namespace) -> int:
        from proxy.config import ConfigError, load_config, policies_dir

        try:
            cfg = load_config(args.config)
        except ConfigError as exc:
            print(f"veracity: {exc}", file=sys.stderr)
            return 2
        for u in cfg.upstreams:
            print(f"upstream {u.name}: models={u.models} "
                  f"{'provider=' + u.provider if u.provider != 'openai' else 'base_url=' + str(u.base_url)}")
        print(f"keys: {len(cfg.keys)} ({'virtual keys' if cfg.keys else 'pass-through auth'})")
        print(f"policies: {policies_dir(cfg)}")  # relative paths are resolved against the file's folder
        # every policy file of the folder validates (on_failure, on_unverified, ...), not only the
        # keys' ones: a client may choose another with x-veracity-policy
        from proxy.policy import PolicyStore

        store = PolicyStore(policies_dir(cfg))
        for problem in store.errors.values():
            print(f"veracity: {problem}", file=sys.stderr)
        if store.errors:
            return 2
        print(f"policy names: {', '.join(store.names())}")
        return 0

    return run


@command("verify", help="Verify answers offline (no upstream): FILE is JSON {messages|question, answer}, "
                          "a JSON list or JSONL of those, or plain text (the answer); - reads stdin.")
def _verify(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("file")
    p.add_argument("--policy", default="default", help="policy name (in --policies) or a policy YAML file")
    p.add_argument("--policies", default=None, help="policy folder (default: $VERACITY_POLICIES or the shipped one)")
    p.add_argument("--question", default=None, help="the question, for a plain-text FILE")

    def run(args: argparse.Namespace) -> int:
        from proxy.cli.verify import verify_offline
        from proxy.stores.review import terminal_safe

        class _Out:
            """stdout for the JSON reports: the answers' and claims' control characters as JSON
            escapes (proxy.stores.review.terminal_safe), the same values."""

            def write(self, text: str) -> int:
                return sys.stdout.write(terminal_safe(text, json_text=True))

            def flush(self) -> None:
                sys.stdout.flush()

        return verify_offline(args.file, policy=args.policy, policies_dir=args.policies, question=args.question,
                              out=_Out())

    return run


@command("policy check", help="Validate policy files; prints file:line: field: problem, exits 1 on any.")
def _policy_check(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("files", nargs="+")

    def run(args: argparse.Namespace) -> int:
        from proxy.policy import check_file

        bad = 0
        for f in args.files:
            problems = check_file(f)
            bad += bool(problems)
            print("\n".join(problems) if problems else f"{f}: ok", file=sys.stderr if problems else sys.stdout)
        return 1 if bad else 0

    return run


@command("index build", help="Build the offline citation index (SQLite FTS5) from BibTeX, CSL-JSON and JSONL files.")
def _index_build(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("files", nargs="+", metavar="FILE", help=".bib, .json (CSL-JSON) or .jsonl record files")
    p.add_argument("--db", default="citations.sqlite3", help="index file to create or extend (default: %(default)s)")

    def run(args: argparse.Namespace) -> int:
        from verifiers.citations import LocalIndex, build_index

        try:
            added = build_index(args.files, args.db)
        except (OSError, ValueError) as exc:
            print(f"veracity: {exc}", file=sys.stderr)
            return 2
        print(f"{args.db}: {added} records added, {LocalIndex(args.db).count()} in total")
        return 0

    return run


@command("corpus build", help="Build the facts verifier's local search corpus (SQLite FTS5) from Markdown, HTML, "
                              "plain text, PDF and JSONL files.")
def _corpus_build(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("files", nargs="+", metavar="FILE",
                   help=".md/.markdown, .html/.htm, .txt/.text/.rst, .pdf or .jsonl (title/text/url/date per line); "
                        "a directory adds every such file under it")
    p.add_argument("--db", default="corpus.sqlite3", help="corpus file to create or extend (default: %(default)s); "
                   "point facts.backends.local.db at it")
    p.add_argument("--strict", action="store_true",
                   help="stop at the first file (or JSONL line) that cannot be read, exit 2; without it such "
                        "files are skipped, listed on stderr, and the exit is 2 only when nothing was indexed")

    def run(args: argparse.Namespace) -> int:
        from verifiers.facts.corpus import build_corpus

        try:
            st = build_corpus(args.files, args.db, strict=args.strict)
        except (OSError, ValueError) as exc:
            print(f"veracity: {exc}", file=sys.stderr)
            return 2
        for where, why in st.skipped:
            print(f"veracity: skipped {where}: {why}", file=sys.stderr)
        print(f"{args.db}: {st.files} files, {st.documents} documents, {st.passages} passages added; "
              f"{st.total_passages} passages in total" + (f"; {len(st.skipped)} skipped (listed on stderr)"
                                                         if st.skipped else ""))
        if st.documents == 0:
            print("veracity: nothing was indexed", file=sys.stderr)
            return 2
        return 0

    return run


@command("sandbox setup", help="Build the code sandbox's Python runtime (a virtualenv with numpy, pandas, sympy "
                                "from PyPI; no root, no container registry) and print the line that uses it.")
def _sandbox_setup(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("--packages", default=None,
                   help="comma-separated pip requirements (default: the docker sandbox image's set, "
                        "numpy>=1.26,<3,pandas>=2.1,<3,sympy>=1.12 -- a comma inside a specifier is kept)")
    p.add_argument("--path", default=None, help="directory to build in (default: $XDG_CACHE_HOME/veracity/"
                   "sandbox-runtime, ~/.cache/... when unset; /var/cache/veracity/sandbox-runtime under root)")
    p.add_argument("--python", default=None,
                   help="base interpreter of the virtualenv (default: /usr/bin/python3 if present, else this one)")

    def run(args: argparse.Namespace) -> int:
        import time

        from verifiers.sandbox import runtime as rt

        def log(msg: str) -> None:
            print(f"veracity: {msg}", file=sys.stderr, flush=True)

        t0 = time.monotonic()
        try:
            r = rt.build(args.path, _split_requirements(args.packages) if args.packages else None,
                         python=args.python, log=log)
        except rt.SandboxRuntimeError as exc:
            print(f"veracity: sandbox setup failed: {exc}", file=sys.stderr)
            return 1
        m = r.manifest
        log(f"built {r.path} in {time.monotonic() - t0:.0f} s: Python {m.get('python')}, "
            f"{m.get('size_bytes', 0) / 1e6:.0f} MB in {m.get('files')} files; "
            + ", ".join(f"{k} {v}" for k, v in m.get("packages", {}).items()))
        problem = _sandbox_runtime_check(r)
        if problem and not problem.startswith("not tried"):
            log(f"sandbox setup failed: {problem}")
            return 1
        if problem:
            log(problem)
        # the one line of configuration, alone on stdout: `eval "$(veracity sandbox setup)"`
        print(f"export {rt.ENV_VAR}={r.path}")
        if os.path.realpath(rt.default_path()) == r.path:
            log(f"(the gateway also finds a runtime at this default location without {rt.ENV_VAR})")
        return 0

    return run


def _split_requirements(text: str) -> list[str]:
    """Split ``--packages`` at commas that start a new requirement: ``numpy>=1.26,<3,pandas``
    -> ``["numpy>=1.26,<3", "pandas"]`` (a part starting with a version operator continues
    the previous specifier; PEP 508 names start with a letter or digit)."""
    out: list[str] = []
    for part in (x.strip() for x in text.split(",")):
        if not part:
            continue
        if out and part[0] in "<>=!~":
            out[-1] += "," + part
        else:
            out.append(part)
    return out


def _sandbox_runtime_check(r) -> str | None:
    """Import the stack inside a real bwrap sandbox with the runtime and the shipped limits;
    ``None`` when that worked, else what went wrong (or why it could not be tried)."""
    import json

    from verifiers.sandbox import Limits, runtime as rt
    from verifiers.sandbox import BwrapSandbox

    box = BwrapSandbox(Limits(timeout_s=60), runtime=r.path)
    why = box.unavailable_reason()
    if why is not None:
        return f"not tried in the bwrap sandbox: {why}"
    have = [m for m in rt.SCIENTIFIC_STACK if m in r.manifest.get("packages", {})]
    if have != list(rt.SCIENTIFIC_STACK):  # a custom package set: its scientific part must import
        res = box.run(f"import {', '.join(have) or 'sys'}\nprint('ok')")
        if res.ok and res.stdout.strip() == "ok":
            log_ok = "checked in the bwrap sandbox: " + (f"{', '.join(have)} import" if have else "the interpreter runs")
            print(f"veracity: {log_ok}", file=sys.stderr)
            return None
        return f"the runtime does not run in the bwrap sandbox (killed_by={res.killed_by}, " \
               f"exit {res.exit_code}): {res.stderr.strip()[-300:]}"
    res = box.run(rt.INFO_PROGRAM)
    try:
        info = json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return f"the runtime does not run in the bwrap sandbox (killed_by={res.killed_by}, " \
               f"exit {res.exit_code}): {res.stderr.strip()[-300:]}"
    if info.get("stack") != "ok":
        return f"in the bwrap sandbox the scientific stack does not work: {info.get('stack')}"
    print(f"veracity: checked in the bwrap sandbox: numpy, pandas and sympy import and work "
          f"({info.get('stack_s')} s, max RSS {info.get('maxrss_mb')} MB)", file=sys.stderr)
    return None


@command("sandbox info", help="Say which sandbox backend, interpreter, packages (with versions) and limits "
                               "the code verifier uses (runs one probe program in the sandbox).")
def _sandbox_info(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("--policy", default="default", help="policy whose verifiers.code.sandbox to show "
                   "(name in --policies or a YAML file; default: %(default)s)")
    p.add_argument("--policies", default=None, help="policy folder (default: $VERACITY_POLICIES or the shipped one)")
    p.add_argument("--json", action="store_true", help="one JSON object instead of text")

    def run(args: argparse.Namespace) -> int:
        import json

        from verifiers.sandbox.runtime import info as sandbox_info

        try:
            backend, limits = _policy_sandbox(args.policy, args.policies)
        except Exception as exc:  # noqa: BLE001 - a bad policy is the user's to fix
            print(f"veracity: {exc}", file=sys.stderr)
            return 2
        d = sandbox_info(backend, limits)
        d["policy"] = args.policy
        if args.json:
            print(json.dumps(d, indent=2))
        else:
            print(_format_sandbox_info(d))
        return 0 if d.get("available") else 1

    return run


def _policy_sandbox(policy: str, policies: str | None):
    """``(backend, Limits)`` of a policy's ``verifiers.code.sandbox``."""
    from pathlib import Path

    from proxy.policy import PolicyStore, load_file
    from verifiers.sandbox import Limits

    pol = (load_file(policy) if policy.endswith((".yaml", ".yml")) and Path(policy).is_file()
           else PolicyStore(policies).get(policy))
    sb = pol.verifiers.code.sandbox
    return sb.backend, Limits(**dict(sb.limits))


def _format_sandbox_info(d: dict) -> str:
    lines = [f"policy:      {d['policy']}",
             f"backend:     {d['backend']}" + ("" if d.get("available") else f" (cannot run code: {d.get('reason')})")]
    for k, label in (("interpreter", "interpreter"), ("runtime", "runtime"), ("rootfs", "rootfs"),
                     ("image", "image"), ("python_version", "python"), ("seccomp", "seccomp"), ("memory", "memory")):
        if d.get(k):
            lines.append(f"{label + ':':<12} {d[k]}")
    lim = d.get("limits", {})
    lines.append("limits:      " + ", ".join(f"{k}={v}" for k, v in lim.items()))
    if "stack" in d:
        took = f" (import numpy, pandas, sympy + a DataFrame filter under these limits: {d['stack_s']} s, " \
               f"max RSS {d['maxrss_mb']} MB)" if d.get("stack") == "ok" and d.get("stack_s") is not None else ""
        lines.append(f"stack:       {d['stack']}{took}")
    pk = d.get("packages") or {}
    if pk:
        lines.append(f"packages:    {len(pk)}")
        lines += [f"  {k} {v}" for k, v in pk.items()]
    if d.get("hint"):
        lines.append(f"hint:        {d['hint']}")
    return "\n".join(lines)


def _review_store(config: str | None):
    """The review store of ``--config`` (else ``$VERACITY_CONFIG``, else ./veracity.yaml, else
    the default ``.veracity/reviews.sqlite3`` in the working folder), or a message."""
    from proxy.stores import review
    from proxy.config import ConfigError, resolve_config

    try:
        cfg = resolve_config(config)
    except ConfigError as exc:
        raise SystemExit(f"veracity: {exc}") from None
    return review.open_store(cfg)


def _review_run(config: str | None, work) -> int:
    """Run ``work(store) -> int`` on the configured store (asyncio), closing it after."""
    import asyncio

    async def go() -> int:
        store = _review_store(config)
        try:
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(go())


def _config_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", "-c", default=None, help="gateway config whose review store to read "
                   "(default: $VERACITY_CONFIG, else ./veracity.yaml, else ./.veracity/reviews.sqlite3)")


@command("review list", help="List reviews (oldest first): id, created, reason, status, verdict, model, team.")
def _review_list(p: argparse.ArgumentParser) -> Handler:
    _config_arg(p)
    p.add_argument("--status", choices=["open", "resolved", "all"], default="open")
    p.add_argument("--limit", type=int, default=100)
    p.add_argument("--json", action="store_true", help="one JSON review per line instead of a table")

    def run(args: argparse.Namespace) -> int:
        import datetime as dt

        from proxy.stores.review import terminal_json, terminal_safe as safe

        async def work(store) -> int:
            rows, _ = await store.list(None if args.status == "all" else args.status, args.limit)
            for r in rows:
                if args.json:
                    print(terminal_json(r))
                    continue
                when = dt.datetime.fromtimestamp(r["created"], dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
                verdict = (r.get("resolution") or {}).get("verdict") or "-"
                # every field may come from a model or a key's owner: escaped (proxy.stores.review.terminal_safe)
                print(f"{safe(r['id'])}  {when}  {safe(r['reason']):<18} {safe(r['status']):<8} "
                      f"{safe(verdict):<17} {safe(r.get('model'))}  {safe(r.get('team'))}")
            return 0

        return _review_run(args.config, work)

    return run


@command("review show", help="Print one review as JSON (question, drafts, checks, evidence, resolution).")
def _review_show(p: argparse.ArgumentParser) -> Handler:
    _config_arg(p)
    p.add_argument("id")

    def run(args: argparse.Namespace) -> int:
        from proxy.stores.review import ReviewNotFound, terminal_json, terminal_safe

        async def work(store) -> int:
            try:
                r = await store.get(args.id)
            except ReviewNotFound:
                print(f"veracity: no review {terminal_safe(args.id)}", file=sys.stderr)
                return 1
            print(terminal_json(r, indent=2))   # answer, claims, notes: escaped, the same JSON values
            return 0

        return _review_run(args.config, work)

    return run


@command("review resolve", help="Resolve a review with a verdict on the answer and a note.")
def _review_resolve(p: argparse.ArgumentParser) -> Handler:
    _config_arg(p)
    p.add_argument("id")
    p.add_argument("--verdict", required=True,
                   help="the verdict on the answer: correct, incorrect, partially_correct or cannot_tell")
    p.add_argument("--note", default="")
    p.add_argument("--reviewer", default=None, help="who resolves (default: $USER)")

    def run(args: argparse.Namespace) -> int:
        import os

        from proxy.stores.review import ReviewConflict, ReviewNotFound, terminal_safe as safe

        async def work(store) -> int:
            try:
                r = await store.resolve(args.id, args.verdict, args.note,
                                        args.reviewer or os.environ.get("USER") or "cli")
            except ReviewNotFound:
                print(f"veracity: no review {safe(args.id)}", file=sys.stderr)
                return 1
            except ReviewConflict:
                print(f"veracity: review {safe(args.id)} is already resolved", file=sys.stderr)
                return 1
            except ValueError as exc:
                print(f"veracity: {safe(exc)}", file=sys.stderr)
                return 2
            print(f"{safe(r['id'])}: resolved as {safe(r['resolution']['verdict'])}")
            return 0

        return _review_run(args.config, work)

    return run


@command("review export", help="Write reviews as labelled JSONL for evaluation (one case per line; "
                               "see proxy.stores.review.export_line for the shape).")
def _review_export(p: argparse.ArgumentParser) -> Handler:
    _config_arg(p)
    p.add_argument("--out", required=True, help="JSONL file to write (- = stdout)")
    p.add_argument("--status", choices=["open", "resolved", "all"], default="resolved",
                   help="which reviews (default: resolved, i.e. labelled)")

    def run(args: argparse.Namespace) -> int:
        import json

        from proxy.stores.review import export_line, terminal_json, terminal_safe

        # to a terminal (``--out -``) control characters go out as JSON escapes (the same values)
        dumps = terminal_json if args.out == "-" else (lambda obj: json.dumps(obj, ensure_ascii=False))

        async def work(store) -> int:
            lines, after = [], None
            while True:
                page, more = await store.list(None if args.status == "all" else args.status, 500, after)
                lines += [dumps(export_line(r)) for r in page]
                if not more or not page:
                    break
                after = page[-1]["id"]
            text = "".join(line + "\n" for line in lines)
            if args.out == "-":
                sys.stdout.write(text)
            else:
                with open(args.out, "w", encoding="utf-8") as fh:
                    fh.write(text)
                print(f"{terminal_safe(args.out)}: {len(lines)} reviews", file=sys.stderr)
            return 0

        return _review_run(args.config, work)

    return run


def _version() -> str:
    """This checkout's version: the package version and, in a git checkout, its commit."""
    import subprocess
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version("veracity")
    except PackageNotFoundError:
        v = "unknown"
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=os.path.dirname(os.path.abspath(__file__)),
                              capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        head = ""
    return f"{v} ({head})" if head else v


@command("eval", help="Evaluate the checks on labelled answers (JSONL: question, answer, label; a review export; "
                      "a ../shared/cases file or folder): precision/recall/F1, confusion, calibration (ECE, "
                      "reliability diagrams), cost and latency, misjudged items -> --out DIR.")
def _eval(p: argparse.ArgumentParser) -> Handler:
    p.add_argument("data", metavar="DATA", help="labelled JSONL / case file, or a folder of case files")
    p.add_argument("--out", required=True, help="output folder (metrics.json, report.html, PNGs, misjudged.jsonl)")
    p.add_argument("--policy", default=None, help="policy name (policies/NAME.yaml) or file; default: default")
    p.add_argument("--gateway", default=None, help="base URL of a running gateway (.../v1): check through its "
                                                   "POST /v1/veracity/verify with the openai SDK instead of in-process")
    p.add_argument("--api-key", default=os.environ.get("VERACITY_API_KEY", "sk-none"),
                   help="key for --gateway (default $VERACITY_API_KEY)")
    p.add_argument("--model", default=None, help="in-process: base URL of an OpenAI-compatible verifier model for "
                                                 "model-driven verifiers (planner, facts, citation relevance)")
    p.add_argument("--model-name", default="default", help="the verifier model's name (with --model)")
    p.add_argument("--model-key", default=os.environ.get("VERACITY_MODEL_KEY"), help="bearer key for --model")
    p.add_argument("--citations-index", default=None, help="in-process: look citations up only in this offline "
                                                           "index (veracity index build), no network")
    p.add_argument("--index-partial", action="store_true",
                   help="with --citations-index: the index is a partial library, a reference it lacks is `unknown` "
                        "(local_index.authoritative: false) rather than NOT_FOUND")
    p.add_argument("--verifiers", default=None, help="in-process: comma-separated verifiers to keep enabled")
    p.add_argument("--sandbox", default=None, help="in-process: the code verifier's sandbox backend")
    p.add_argument("--risk-threshold", type=float, default=None,
                   help="in-process: override the policy's risk threshold (0: check whatever the risk score)")
    p.add_argument("--styles", default=",".join(("apa", "ieee", "mla", "harvard", "bibtex")),
                   help="citation cases: reference styles each entry is rendered in")
    p.add_argument("--limit", type=int, default=None, help="records read per file")
    p.add_argument("--bins", type=int, default=10, help="equal-width calibration bins (default 10)")
    p.add_argument("--concurrency", type=int, default=4, help="--gateway: requests in flight")
    p.add_argument("--answer-timeout", type=float, default=60.0,
                   help="seconds an answer may take before it counts as an evaluation error (default 60; 0: none)")
    p.add_argument("--progress-every", type=float, default=10.0,
                   help="not on a terminal: a progress line every this many seconds (default 10; 0: every answer)")

    def run(args: argparse.Namespace) -> int:
        import datetime
        import json

        try:
            import matplotlib  # noqa: F401
            import numpy  # noqa: F401
        except ImportError:
            # the eval extra of this checkout: there is no `veracity` package on PyPI to take it from
            print("veracity eval needs matplotlib (the eval extra): .venv/bin/pip install -e '.[eval]' in "
                  "the checkout, or pip install matplotlib into the gateway's environment", file=sys.stderr)
            return 2
        from proxy.cli import cases
        from proxy.cli import evaluation

        skipped: dict[str, int] = {}
        try:
            items = cases.read(args.data, styles=tuple(s for s in args.styles.split(",") if s), limit=args.limit,
                               skipped=skipped)
        except (OSError, ValueError) as exc:
            print(f"veracity eval: {exc}", file=sys.stderr)
            return 2
        if not items:
            why = ""
            if skipped.get("review_without_text"):  # a policy with review.include_text: false keeps none
                why = (f" ({skipped['review_without_text']} review(s) without answer text skipped: reviews keep "
                       "the question and answer unless the policy's review.include_text is false)")
            print(f"veracity eval: {args.data}: no labelled answer{why}", file=sys.stderr)
            return 2
        model = None
        policy = grounding_policy = None
        notices: list[str] = []
        if not args.gateway:
            from proxy.policy import PolicyError

            common = dict(citations_index=args.citations_index, index_partial=args.index_partial,
                          verifiers=args.verifiers.split(",") if args.verifiers else None,
                          sandbox=args.sandbox, risk_threshold=args.risk_threshold)
            try:
                policy = evaluation.load_policy(args.policy, **common)
                # what cannot be checked here, said now rather than learnt from timeouts
                notices, over = evaluation.preflight(items, policy, citations_index=args.citations_index,
                                                     model_url=args.model)
                if "citation_sources" in over:
                    policy = evaluation.load_policy(args.policy, citation_sources=over["citation_sources"], **common)
                if over.get("grounding"):
                    # answers meant to rest on their source alone (grounding/) get every statement
                    # grounded; a claim judged against the abstract it cites (relevance/) does not:
                    # such a claim paraphrases its finding (docs/eval.md)
                    grounding_policy = {
                        fam: evaluation.load_policy(
                            args.policy, citation_sources=over.get("citation_sources"), grounding=True,
                            grounding_model=over["grounding_model"], grounding_statements=fam == "grounding",
                            **common)
                        for fam in ("grounding", None)}
            except (OSError, PolicyError) as exc:
                print(f"veracity eval: {exc}", file=sys.stderr)
                return 2
            if args.model:
                from proxy.pipeline.verifier_model import OpenAIChatModel

                model = OpenAIChatModel(args.model, args.model_name, args.model_key,
                                        max_tokens=policy.verification.max_tokens)
        for n in notices:
            print(f"veracity eval: cannot check here: {n}", file=sys.stderr)
        sets = {}
        for it in items:
            sets[it.get("set")] = sets.get(it.get("set"), 0) + 1
        print(f"veracity eval: {len(items)} answers from {len(sets)} sets ({', '.join(f'{k} {v}' for k, v in sets.items())})"
              f"; policy {args.policy or 'default'}" + (f" via {args.gateway}" if args.gateway else " in-process"),
              file=sys.stderr)
        t0 = datetime.datetime.now(datetime.timezone.utc)
        progress = evaluation.Progress(len(items), every_s=args.progress_every)
        try:
            results = evaluation.run_items(items, policy=policy, gateway=args.gateway, api_key=args.api_key,
                                           policy_name=args.policy, model=model, concurrency=args.concurrency,
                                           grounding_policy=grounding_policy,
                                           answer_timeout=args.answer_timeout or None, progress=progress.update)
        finally:
            progress.close()
        metrics = evaluation.compute(items, results, bins=args.bins)
        prov = {"data": str(args.data), "policy": args.policy or "default", "gateway": args.gateway,
                "model": args.model and f"{args.model_name} at {args.model}", "citations_index": args.citations_index and (
                    args.citations_index + (" (partial: a miss is unknown)" if args.index_partial else
                                            " (authoritative: a miss is NOT_FOUND)")),
                "verifiers": args.verifiers, "risk_threshold": args.risk_threshold, "styles": args.styles, "limit": args.limit, "skipped": skipped,
                "answer_timeout_s": args.answer_timeout or None, "version": _version(),
                "not_checked": notices,
                "started": t0.isoformat(timespec="seconds"),
                "seconds": round((datetime.datetime.now(datetime.timezone.utc) - t0).total_seconds(), 1)}
        files = evaluation.write(metrics, args.out, title=f"veracity eval: {args.data}", provenance=prov)
        a = metrics["answers"]
        # per family what could be checked here, recall and false alarms over it, what was unknown
        for line in evaluation.summary_lines(metrics):
            print(f"veracity eval: {line}", file=sys.stderr)
        print(json.dumps({"answers": a["n"], "precision": a["precision"], "recall": a["recall"], "f1": a["f1"],
                          "false_alarms": a["fp"], "checkable": a["checkable"],
                          "unknown": {k: a["unknown"][k] for k in ("wrong", "right")},
                          "families": {k: {"checkable": g["checkable"],
                                           "unknown": {x: g["unknown"][x] for x in ("wrong", "right")}}
                                       for k, g in metrics["families"].items()},
                          "ece": {v: d["calibration"]["ece"] for v, d in metrics["per_verifier"].items()},
                          "files": sorted(files)}))
        return 0

    return run


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
