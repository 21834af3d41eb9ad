"""deploy/k8s/: every manifest valid against the Kubernetes OpenAPI schemas (``kubernetes-validate``,
which bundles them: no cluster, no network), and the pieces agree with each other and with the
gateway: probe paths are routes the app serves, names and labels line up, the ConfigMap's config
loads with the Secret's variables, and its policies are the shipped ones."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT

kubernetes_validate = pytest.importorskip("kubernetes_validate")

K8S = ROOT / "deploy" / "k8s"
#: the oldest Kubernetes minor still in upstream support when this was written, and the newest
#: the installed kubernetes-validate bundles: the manifests must hold for both
VERSIONS = ("1.30.0", kubernetes_validate.latest_version())


def _docs() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for f in sorted(K8S.glob("*.yaml")):
        out += [(f.name, d) for d in yaml.safe_load_all(f.read_text()) if d]
    return out


def _one(kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for _, d in _docs() if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, (kind, name, len(found))
    return found[0]


@pytest.mark.parametrize("version", VERSIONS)
def test_every_manifest_is_valid_for_kubernetes(version: str) -> None:
    docs = _docs()
    kinds = {d["kind"] for _, d in docs}
    assert {"Deployment", "Service", "ConfigMap", "Secret", "HorizontalPodAutoscaler"} <= kinds
    for fname, doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)   # raises ValidationError, naming the field


def test_the_validator_catches_a_misspelt_field() -> None:
    """The check above can fail: a typo the API server would silently drop is refused in strict mode."""
    import copy

    dep = copy.deepcopy(_one("Deployment"))
    container = dep["spec"]["template"]["spec"]["containers"][0]
    container["readinesProbe"] = container.pop("readinessProbe")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(dep, VERSIONS[0], strict=True)


def test_probes_ports_names_and_labels_line_up() -> None:
    from proxy.app import create_app
    from proxy.config import GatewayConfig

    served = {getattr(r, "path", None) for r in create_app(GatewayConfig()).router.routes}
    dep = _one("Deployment")
    pod = dep["spec"]["template"]
    container = pod["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz" in served
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz" in served
    port_names = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert port_names["http"] == 8080                                  # the image's EXPOSE / serve --port
    assert "EXPOSE 8080" in (ROOT / "deploy" / "Dockerfile").read_text()
    labels = pod["metadata"]["labels"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= labels.items()
    svc = _one("Service")
    assert svc["spec"]["selector"].items() <= labels.items()
    assert svc["spec"]["ports"][0]["targetPort"] in port_names
    hpa = _one("HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                             "name": dep["metadata"]["name"]}
    assert container["resources"]["requests"]["cpu"]                   # utilisation needs a request
    # volumes and env name objects that are shipped
    for vol in pod["spec"]["volumes"]:
        _one("ConfigMap", vol["configMap"]["name"])
    for src in container["envFrom"]:
        _one("Secret", src["secretRef"]["name"])


def test_configmap_config_loads_with_the_secret_and_ships_the_policies(tmp_path: Path) -> None:
    from proxy.config import load_config
    from proxy.policy import PolicyStore

    secret = _one("Secret")["stringData"]
    config_text = _one("ConfigMap", "veracity-config")["data"]["veracity.yaml"]
    # every ${NAME} the config needs is in the Secret (else the pod fails at start)
    assert set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", config_text)) <= set(secret)
    policies = _one("ConfigMap", "veracity-policies")["data"]
    pdir = tmp_path / "policies"
    pdir.mkdir()
    for name, text in policies.items():
        assert text == (ROOT / "policies" / name).read_text(), f"{name} differs from policies/{name}"
        (pdir / name).write_text(text)
    cfg_file = tmp_path / "veracity.yaml"
    cfg_file.write_text(config_text.replace("/etc/veracity/policies", str(pdir)))
    cfg = load_config(cfg_file, env=dict(secret))
    assert cfg.reports.enabled and cfg.reports.ttl_s > 0
    store = PolicyStore(str(pdir))
    for key in cfg.keys:
        assert store.get(key.policy).name == key.policy
    # Redis is external: named by the Secret, read as VERACITY_REDIS_URL, not baked into the config
    assert secret["VERACITY_REDIS_URL"].startswith("redis://") and cfg.verification.redis_url is None
