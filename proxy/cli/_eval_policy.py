"""What a ``veracity eval`` run checks with (:mod:`proxy.cli.evaluation`): the policy with
eval's overrides (an offline citation index, the verifiers kept, the sandbox, the grounding
policy for answers with a source text), and the preflight that says before the run what cannot
be checked from here (unreachable citation sources or verifier model) and adjusts the policy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def load_policy(name_or_path: str | None, *, citations_index: str | None = None, verifiers: list[str] | None = None,
                sandbox: str | None = None, model_name: str | None = None, risk_threshold: float | None = None,
                citation_sources: list[str] | None = None, grounding: bool = False,
                grounding_model: bool = False, grounding_statements: bool = False, index_partial: bool = False) -> Any:
    """A :class:`proxy.policy.Policy` from a shipped name (``policies/NAME.yaml``) or a file,
    with eval's overrides: ``citations_index`` (the citation verifier looks up only this offline
    index, no cache -- what ``bench/citations_bench.py`` does; with ``index_partial`` the index is a
    partial library, ``local_index.authoritative: false``: a reference it lacks is ``unknown``, not
    NOT_FOUND), ``citation_sources`` (the network
    sources kept, :func:`preflight`), ``verifiers`` (only these stay enabled), ``sandbox`` (the
    code verifier's backend), ``risk_threshold`` (0: every answer the risk score sends to a
    verifier is checked, whatever its score), ``grounding`` (the policy for grounding cases: the
    facts verifier enabled with the ``context`` backend among its backends, its model tier only
    with ``grounding_model``; with ``grounding_statements`` its ``grounding`` option on unless the
    policy sets it: every statement sentence checked against the source, and one naming a
    number, date or name the source does not hold fails, as under the ``rag`` policy -- for
    answers meant to rest on the source alone, the ``grounding`` family). Raises
    PolicyError / FileNotFoundError."""
    import yaml

    from proxy.policy import _parse, default_policies_dir

    name = name_or_path or "default"
    p = Path(name)
    if not p.suffix:
        p = default_policies_dir() / f"{name}.yaml"
    if not p.is_file():
        raise FileNotFoundError(f"policy {name!r}: no file {p}")
    doc = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    doc.setdefault("name", p.stem)
    v = doc.setdefault("verifiers", {})
    if citations_index:
        c = v.setdefault("citations", {})
        c["enabled"] = True
        c["sources"] = {"use": [], "local_index": {"path": str(citations_index), "authoritative": not index_partial},
                        "cache": {"backend": "none"}}
    elif citation_sources is not None:
        c = v.setdefault("citations", {})
        c["sources"] = dict(c.get("sources") or {}, use=list(citation_sources))
    if verifiers is not None:
        for n in list(v):
            if isinstance(v[n], dict):
                v[n]["enabled"] = n in verifiers
        for n in verifiers:
            v.setdefault(n, {})["enabled"] = True
    if sandbox:
        v.setdefault("code", {}).setdefault("sandbox", {})["backend"] = sandbox
    if risk_threshold is not None:
        doc.setdefault("risk", {})["threshold"] = risk_threshold
    if model_name:
        doc.setdefault("verification", {})["model"] = model_name
    if grounding:
        f = v.setdefault("facts", {})
        f["enabled"] = True
        use = list((f.get("backends") or {}).get("use") or [])
        f["backends"] = dict(f.get("backends") or {}, use=use if "context" in use else ["context", *use])
        f["use_model"] = bool(grounding_model)
        if grounding_statements:
            # the labels are about attribution to the source (a consistent summary, an attributable
            # response): every statement sentence is a claim, and one naming what the source does not
            # is ungrounded (the rag policy's setting, docs/facts.md step 5), unless the policy says
            f["options"] = dict(f.get("options") or {})
            f["options"].setdefault("grounding", True)
    return _parse(yaml.safe_dump(doc), str(p))


def _source_urls(sources: dict[str, Any]) -> dict[str, str]:
    # where each enabled network citation source is looked up (its base_url), for the probe
    from verifiers.citations import Sources

    cfg = Sources.from_dict(sources)
    return {n: getattr(cfg, n).base_url for n in cfg.enabled if n != "local"}


def reachable(urls: list[str], timeout: float = 3.0) -> dict[str, bool]:
    """Whether a TCP connection to each URL's host and port opens within ``timeout`` seconds
    (all probed at once, so the probe costs at most ``timeout``). Behind an HTTP(S) proxy
    (``urllib.request.getproxies``) the proxy is what is probed. Touches the network."""
    import socket
    import urllib.parse
    import urllib.request
    from concurrent.futures import ThreadPoolExecutor

    proxies = urllib.request.getproxies()

    def one(url: str) -> bool:
        u = urllib.parse.urlsplit(url)
        via = proxies.get(u.scheme)
        if via and not urllib.request.proxy_bypass(u.hostname or ""):
            u = urllib.parse.urlsplit(via)
        port = u.port or (443 if u.scheme == "https" else 80)
        try:
            socket.create_connection((u.hostname, port), timeout=timeout).close()
            return True
        except OSError:
            return False

    if not urls:
        return {}
    with ThreadPoolExecutor(max_workers=len(urls)) as ex:
        return dict(zip(urls, ex.map(one, urls)))


def preflight(items: list[dict[str, Any]], policy: Any, *, citations_index: str | None = None,
              model_url: str | None = None, probe: Any = reachable) -> tuple[list[str], dict[str, Any]]:
    """What cannot be checked here, said before the run instead of learnt from timeouts.

    Returns ``(notices, overrides)``: one sentence per limit (each naming the flag that lifts
    it), and the :func:`load_policy` arguments that make the run match them:

    * citations enabled, no ``citations_index``, and some answer the risk score sends to the
      citation verifier (``verifiers.risk.score``, as the pipeline decides): the policy's network
      sources are probed (``probe(urls) -> {url: bool}``, :func:`reachable`); unreachable ones are left out
      (``citation_sources``), so their references come back ``unknown`` at once ("no source
      configured") rather than after each source's timeouts and retries;
    * items with a ``context`` (grounding and relevance cases): the facts verifier with the
      ``context`` backend runs on them (``grounding``); without ``model_url`` its deterministic
      tier only (``grounding_model`` False): what the rules cannot prove from the text is ``unknown``;
    * ``model_url`` unreachable: said (the model tiers will end in ``unknown`` / ``error``)."""
    notices: list[str] = []
    over: dict[str, Any] = {}
    v = policy.verifiers
    citing = 0
    if v.citations.enabled and not citations_index:
        from verifiers import risk as risk_mod

        citing = sum(1 for it in items if "citations" in risk_mod.score(it.get("question"), it["answer"]).verifiers)
    if citing:
        urls = _source_urls(v.citations.sources)
        ok = probe(sorted(set(urls.values()))) if urls else {}
        down = [n for n, u in urls.items() if not ok.get(u)]
        if down:
            over["citation_sources"] = [n for n in urls if n not in down]
            if len(down) == len(urls):
                notices.append(
                    f"citations: {citing} answers cite references, but no citation source answers from here "
                    f"({', '.join(down)}: no connection) and no "
                    "--citations-index was given, so references are not looked up: each one is `unknown` ('no "
                    "source configured') instead of waiting on timeouts. Pass --citations-index FILE (an offline "
                    "index, `veracity index build`) to check them here.")
            else:
                notices.append(f"citations: {', '.join(down)} unreachable from here, left out; references are "
                               f"looked up in {', '.join(over['citation_sources'])} only (or pass --citations-index "
                               "FILE).")
    grounded = sum(1 for it in items if it.get("context"))
    if grounded:
        over["grounding"] = True
        over["grounding_model"] = bool(model_url)
        if not model_url:
            notices.append(
                f"grounding: {grounded} answers with a source text (grounding/, relevance/) are checked by the facts "
                "verifier's deterministic tier only: a claim it cannot prove or refute from the text is `unknown`. "
                "Pass --model URL (an OpenAI-compatible verifier model) for the model tier.")
    if model_url and not probe([model_url]).get(model_url):
        notices.append(f"model: {model_url} does not answer from here: the model tiers will end in `unknown` or "
                       "`error` (check --model).")
    return notices, over
