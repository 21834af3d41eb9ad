"""Policies: the shipped files validate, errors name file:line:field, reload on change,
selection and overrides stay within what the key allows."""

import os
from pathlib import Path

import pytest

from proxy.policy import KeyGrant, Policy, PolicyError, PolicyStore, apply_overrides, check_file, load_file, resolve

SHIPPED = Path(__file__).resolve().parents[2] / "policies"


def test_shipped_policies_validate():
    files = sorted(SHIPPED.glob("*.yaml"))
    names = {f.stem for f in files}
    assert {"default", "strict", "observe"} <= names
    for f in files:
        assert check_file(f) == [], f
        assert load_file(f).name == f.stem
    assert load_file(SHIPPED / "observe.yaml").on_failure == "observe"
    assert load_file(SHIPPED / "strict.yaml").on_failure == "block"


def test_errors_name_file_line_and_field(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("name: bad\nrisk:\n  threshold: 3\non_failure: explode\nverifiers:\n  code: {enabled: true, sandbox: {backend: auto, bogus: 1}}\n")
    errs = check_file(p)
    assert any(e.startswith(f"{p}:3: risk.threshold:") for e in errs), errs
    assert any(e.startswith(f"{p}:4: on_failure:") for e in errs), errs
    assert any("verifiers.code.sandbox.bogus" in e and e.startswith(f"{p}:6:") for e in errs), errs


def test_invalid_yaml_and_missing_file(tmp_path):
    p = tmp_path / "x.yaml"
    p.write_text("name: [unclosed\n")
    assert "invalid YAML" in check_file(p)[0]
    assert "cannot read" in check_file(tmp_path / "nope.yaml")[0]
    p.write_text("- a list\n")
    assert "must be a mapping" in check_file(p)[0]


def _touch_write(p: Path, text: str) -> None:
    p.write_text(text)
    st = p.stat()
    os.utime(p, (st.st_atime + 5, st.st_mtime + 5))  # mtime resolution on some filesystems is coarse


def test_store_reloads_on_change_and_keeps_last_good(tmp_path):
    p = tmp_path / "team.yaml"
    p.write_text("name: team\non_failure: annotate\n")
    store = PolicyStore(tmp_path, check_interval_s=0)
    assert store.get("team").on_failure == "annotate"
    _touch_write(p, "name: team\non_failure: block\n")
    assert store.get("team").on_failure == "block"
    _touch_write(p, "name: team\non_failure: nonsense\n")
    assert store.get("team").on_failure == "block"  # last good version kept
    assert str(p) in store.errors
    (tmp_path / "new.yaml").write_text("on_failure: observe\n")
    assert store.get("new").on_failure == "observe"
    p.unlink()
    with pytest.raises(PolicyError) as ei:
        store.get("team")
    assert ei.value.param == "x-veracity-policy"
    assert store.get("default") == Policy()  # built-in default without a file


def test_store_checks_at_most_once_per_interval(tmp_path):
    p = tmp_path / "a.yaml"
    p.write_text("on_failure: annotate\n")
    store = PolicyStore(tmp_path, check_interval_s=3600)
    _touch_write(p, "on_failure: block\n")
    assert store.get("a").on_failure == "annotate"
    store.refresh(force=True)
    assert store.get("a").on_failure == "block"


@pytest.fixture
def store():
    return PolicyStore(SHIPPED, check_interval_s=0)


def test_header_only_when_key_allows(store):
    locked = KeyGrant(policy="default", allow_policy_header=False)
    assert resolve(store, locked, None).name == "default"
    assert resolve(store, locked, "default").name == "default"  # its own name is fine
    with pytest.raises(PolicyError) as ei:
        resolve(store, locked, "observe")
    assert ei.value.status == 403
    with pytest.raises(PolicyError):
        resolve(store, locked, None, {"policy": "observe"})
    free = KeyGrant(policy="default", allow_policy_header=True)
    assert resolve(store, free, "strict").name == "strict"
    assert resolve(store, free, None, {"policy": "observe"}).name == "observe"


def test_overrides_within_policy(store):
    pol = store.get("default")
    assert apply_overrides(pol, {"on_failure": "annotate"}).on_failure == "annotate"
    assert apply_overrides(pol, {"streaming": {"mode": "passthrough"}}).streaming.mode == "passthrough"
    with pytest.raises(PolicyError) as ei:
        apply_overrides(pol, {"verifiers": {"code": {"enabled": False}}})
    assert ei.value.status == 403 and ei.value.param == "veracity.verifiers.code.enabled"
    with pytest.raises(PolicyError) as ei:
        apply_overrides(store.get("strict"), {"on_failure": "annotate"})  # strict allows nothing
    assert ei.value.status == 403
    with pytest.raises(PolicyError) as ei:
        apply_overrides(pol, {"on_failure": "explode"})
    assert ei.value.status == 400
    with pytest.raises(PolicyError):
        apply_overrides(pol, {"no_such": 1})
    with pytest.raises(PolicyError):
        apply_overrides(pol, "not an object")


def test_budgets_and_rounds_can_only_go_down(store):
    pol = store.get("strict")
    cap = pol.budgets.request
    low = apply_overrides(pol, {"budgets": {"request": {"extra_calls": 1, "deadline_ms": cap.deadline_ms}},
                                "correction": {"max_rounds": pol.correction.max_rounds}})
    assert low.budgets.request.extra_calls == 1
    assert low.budgets.request.deadline_ms == cap.deadline_ms  # equal to the cap: fine
    assert low.correction.max_rounds == pol.correction.max_rounds
    with pytest.raises(PolicyError):
        apply_overrides(pol, {"correction": {"max_rounds": "lots"}})


@pytest.mark.parametrize("path", [("budgets", "request", "extra_calls"), ("budgets", "request", "extra_tokens"),
                                  ("budgets", "request", "deadline_ms"), ("correction", "max_rounds"),
                                  ("sentinel", "max_rounds")])
def test_raising_a_budget_or_round_limit_is_a_403_naming_the_cap(store, path):
    """Asking for more than the policy allows is refused like a non-overridable field, never
    silently cut down (the client would believe it got what it asked for)."""
    pol = store.get("default")
    cap = pol
    for part in path:
        cap = getattr(cap, part)
    override: dict = {}
    node = override
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = cap + 1
    with pytest.raises(PolicyError) as ei:
        apply_overrides(pol, override)
    dotted = "veracity." + ".".join(path)
    assert (ei.value.status, ei.value.param) == (403, dotted)
    assert str(ei.value) == (f"{dotted}: {cap + 1} is above the cap of this key's policy 'default', {cap}; "
                             "an override may only lower budgets and round limits")


def test_403_names_where_the_policy_came_from(store):
    free = KeyGrant(policy="default", allow_policy_header=True)
    with pytest.raises(PolicyError) as ei:  # `math` chosen by the header, not the key's policy
        resolve(store, free, "math", {"verifiers": {"code": {"enabled": True}}})
    assert ei.value.status == 403
    assert str(ei.value).startswith("the policy 'math' (chosen by the x-veracity-policy header) does not "
                                    "allow overriding veracity.verifiers.code.enabled (it allows: ")
    with pytest.raises(PolicyError) as ei:
        resolve(store, free, None, {"policy": "math", "correction": {"max_rounds": 10}})
    assert "of the policy 'math' (chosen by veracity.policy), " in str(ei.value)
    with pytest.raises(PolicyError) as ei:  # the key's own policy, named in the header or not
        resolve(store, free, "default", {"verifiers": {"code": {"enabled": True}}})
    assert str(ei.value).startswith("this key's policy 'default' does not allow overriding")


def test_unknown_policy_message_is_true(tmp_path):
    with pytest.raises(PolicyError) as ei:
        PolicyStore(tmp_path / "nodir").get("math")
    assert str(ei.value) == f"unknown policy 'math'; known: default (the policy folder {tmp_path / 'nodir'} does not exist)"
    (tmp_path / "a.yaml").write_text("name: alpha\n")  # the name is the `name:` field, not the file's
    with pytest.raises(PolicyError) as ei:
        PolicyStore(tmp_path).get("a")
    assert str(ei.value) == "unknown policy 'a'; known: alpha, default"


def test_run_options_shape():
    opts = Policy().verifiers.run_options()
    assert opts["code"]["sandbox"]["backend"] == "auto" and opts["citations"]["sources"] == {}
    assert opts["arithmetic"]["timeout_ms"] == 2000


def test_citation_sources_validated(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("verifiers:\n  citations:\n    sources: {use: [crossref, bogus]}\n")
    errs = check_file(p)
    assert errs and "verifiers.citations.sources" in errs[0] and errs[0].startswith(f"{p}:3:")


@pytest.mark.parametrize("backends, needle", [
    ("{use: [context, wikipeda]}", "unknown backend 'wikipeda'"),
    ("{use: [local]}", "local.db (the corpus file) is required"),
    ("{use: [searxng]}", "searxng.url"),
    ("{use: [wikipedia], wikipedia: {lang: en, user_agnt: x}}", "unknown setting(s) wikipedia.user_agnt"),
    ("{use: [context, context]}", "listed more than once"),
    ("{use: [wikipedia], timeout_s: fast}", "timeout_s must be a number"),
])
def test_facts_backend_typos_are_policy_errors(tmp_path, backends, needle):
    # a typo here used to pass `veracity policy check` and then turn every facts check of every
    # request into an `error` check at run time
    p = tmp_path / "facts.yaml"
    p.write_text(f"name: f\nverifiers:\n  facts:\n    enabled: true\n    backends: {backends}\n")
    errs = check_file(p)
    assert len(errs) == 1, errs
    assert errs[0].startswith(f"{p}:5: verifiers.facts.backends: facts backends: "), errs
    assert needle in errs[0], errs


def test_facts_backends_valid_config_passes_without_corpus_or_key(tmp_path, monkeypatch):
    # what depends on the machine that runs the gateway (the corpus file, the Brave key) is
    # checked when the backends are made, not by the policy check
    monkeypatch.delenv("BRAVE_API_KEY", raising=False)
    p = tmp_path / "facts.yaml"
    p.write_text("name: f\nverifiers:\n  facts:\n    enabled: true\n    backends:\n"
                 "      use: [context, local, wikipedia, searxng, brave]\n      timeout_s: 5\n"
                 "      local: {db: not-built-yet.sqlite3}\n"
                 "      wikipedia: {lang: en, user_agent: 'acme-veracity/1.0 (ops@acme.example)'}\n"
                 "      searxng: {url: 'http://searx.internal:8080/search', categories: general}\n"
                 "      brave: {api_key_env: BRAVE_API_KEY}\n")
    assert check_file(p) == []
    assert load_file(p).verifiers.facts.backends["use"][1] == "local"
