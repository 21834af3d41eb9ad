"""Code verifier: find the code in an answer and check it in tiers, running it only in a sandbox.

    from verifiers import code, sandbox
    box = sandbox.get("auto")
    checks = code.check(answer_markdown, question, sandbox=box)          # blocking
    checks = await code.acheck(answer_markdown, question, sandbox=box)   # asyncio (gateway)

``check`` is synchronous and thread-safe (call it from a worker thread or a script);
``acheck`` is the same for an event loop: the sandbox runs in the sandbox's own thread pool,
so the loop never blocks. Both return ``list[Check]`` with ``verifier == "code"``.

Claims and tiers (docs/code.md):

- every fenced block: ```python / ```py / ``>>>`` sessions / unlabeled blocks that parse as
  Python (and are not just an output like ``6``). Blocks in other languages give one
  ``unknown`` check ("not checked").
- tier 1, syntax: ``ast.parse``; a SyntaxError is ``fail`` with line and column (template
  placeholders like ``<YOUR_KEY>`` and obvious fragments are ``unknown``).
- tier 2, static: pyflakes; definite errors only (undefined names that are near-misses of
  real ones or missing imports of conventional aliases, use-before-assignment, broken
  ``%``/``.format`` calls). Names bound in any block of the answer, by star imports, or
  ambient in notebooks never count; other unknown names (``df``) make the block ``unknown``.
- tier 3, in the sandbox: the blocks run in order in one namespace (smoke run, which also
  runs the answer's own ``assert``s). A block's clean run is a ``pass`` only when something
  about its behaviour was compared: its own top-level ``assert``s, an example or stated output
  of its own, a question example calling a function it defines, the question's stdin/stdout
  pairs. Code that merely ran, with nothing compared, is ``unknown`` ("ran without errors;
  nothing about its behaviour was compared"): running is not being right. Then the examples: doctests in the answer, stated
  outputs (``# Output: 6``, an "Output:" block after the code, "this prints `6`"), and the
  question's examples (doctest lines, ``f(x) -> y`` and cousins, "for input X the output is
  Y") against functions the answer defines; for a program that reads standard input, the
  question's input/output pairs are fed to it (one sandbox run each). A block the answer itself
  calls wrong ("Your code fails because...", "This raises...") may fail without a ``fail``
  check. Code that needs files, network, ``input()``,
  credentials or an uninstalled package is ``unknown``, never ``fail``; so are timeouts and
  outputs of code that uses randomness or the clock.

What a tier-3 ``pass`` rests on (docs/design.md "A verdict rests on what the checked content
cannot write"): comparisons happen here, in the gateway, on the bytes the sandbox captured; the
harness in the sandbox only frames the run, on a channel the answer's code cannot learn to write;
a run where the code tried to reach the harness, ended itself early or did not end normally can
show failures but no pass (``evidence["untrusted"]`` says why). The full design is the docstring
of :mod:`verifiers.code._harness`.

Each check's ``evidence`` carries ``tier``, ``block`` (1-based), ``line`` (the line in the whole
answer), ``block_line`` (the line inside the block, 1-based, where a finding has one; notes say
"block B, line L" with that line: what a reader counts in the code they see),
``exception`` (``type``, ``message``), ``traceback`` (trimmed to the answer's frames),
bounded ``stdout``/``stderr``, ``inputs`` (the example's call), ``sandbox`` (backend), and
``reason`` for ``unknown``.

Where it lives, a private module per concern: ``_extract`` (blocks and examples in the text),
``_static`` (tier-1/2 findings), ``_plan`` (tiers 1-2 and the program to run; ``_state`` the
plan every step reads), ``_harness`` (what runs in the sandbox), ``_interpret`` (tier 3, the
run's records as checks), ``_examples`` (one check per example and stdin pair), ``_compare``
(values and outputs compared), ``_compared`` (when a clean run counts as a behaviour check),
``_trust`` (which runs may grant a pass), ``_evidence`` (where, tracebacks, errors classified),
``_entry`` (:func:`check`, :func:`acheck`).
"""

from verifiers.code._entry import acheck, check
from verifiers.code._plan import DEFAULT_LIMITS

# Also importable from here as before, outside the stated surface (tests and benchmarks use
# ``plan`` and ``MAX_BLOCKS``):
from verifiers.code._compared import RAN_ONLY
from verifiers.code._evidence import ENV_EXCEPTIONS, STD_BOUND, VERIFIER
from verifiers.code._interpret import interpret
from verifiers.code._plan import MAX_BLOCKS, plan


__all__ = ["check", "acheck", "DEFAULT_LIMITS"]
