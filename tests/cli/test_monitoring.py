"""manifests/components/monitoring: the ServiceMonitor, the alerts and the Grafana dashboard.

The component is rendered by the same real `kubectl kustomize` as test_manifests.py. The alerts are
checked and unit-tested by promtool (tests/tools/install-promtool.sh: promtool from Debian's
prometheus package, or built from its Go module; cached): one table row per situation, each saying
which alerts fire, so every alert has a case where it fires and one where it stays silent. Every
metric the rules and the dashboard read is one the server exports (read from the /metrics of
webhook.server.app.create_app) or one of the few named external ones, with label names the server
(or the scrape) gives it.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import jsonschema
import pytest
import yaml

from webhook.cli import certs
from webhook.cli.main import build_parser
from webhook.core.settings import default as default_settings
from webhook.server.app import create_app
from webhook.server.metrics import BUCKETS, Metrics
from webhook.server.probes import LISTENER, PROBE

PROBE_ENV = {LISTENER: PROBE}  # /metrics answers on the probe port only (its listener's environ key)

ROOT = Path(__file__).resolve().parents[2]
COMPONENT = "components/monitoring"
JOB = "gpu-admission"
NAMESPACE = "gpu-admission"

EXTERNAL_METRICS = {
    "up": "Prometheus: 1 per target whose last scrape succeeded",
    "kube_deployment_status_replicas_available": "kube-state-metrics (kube-prometheus-stack installs it)",
    "kube_deployment_spec_replicas": "kube-state-metrics (kube-prometheus-stack installs it)",
}
EXTERNAL_LABELS = {"up": set(), "kube_deployment_status_replicas_available": {"deployment"},
                   "kube_deployment_spec_replicas": {"deployment"}}
TARGET_LABELS = {"job", "instance", "namespace", "service", "pod", "container", "endpoint"}
"""Labels the Prometheus Operator gives every sample of a ServiceMonitor's target."""


# --- the rendered component ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def monitoring(manifest_tree) -> dict[str, dict]:
    docs = manifest_tree.render(manifest_tree.with_components(COMPONENT))
    added = {(d["kind"], d["metadata"]["name"]): d for d in docs
             if d["kind"] in ("ServiceMonitor", "PrometheusRule")
             or (d["kind"] == "ConfigMap" and d["metadata"]["name"] == "gpu-admission-dashboard")}
    assert set(added) == {("ServiceMonitor", "gpu-admission"), ("PrometheusRule", "gpu-admission"),
                          ("ConfigMap", "gpu-admission-dashboard")}
    out = {kind: doc for (kind, _), doc in added.items()}
    out["docs"] = docs  # type: ignore[assignment]
    return out


@pytest.fixture(scope="module")
def rules(monitoring) -> list[dict]:
    (group,) = monitoring["PrometheusRule"]["spec"]["groups"]
    return group["rules"]


@pytest.fixture(scope="module")
def dashboard(monitoring) -> dict:
    (name, text), = monitoring["ConfigMap"]["data"].items()
    assert name.endswith(".json")
    return json.loads(text)


def dashboard_exprs(dashboard: dict) -> list[str]:
    """Every PromQL query of the dashboard, Grafana's $__rate_interval made a plain duration."""
    return [t["expr"].replace("$__rate_interval", "5m") for p in dashboard["panels"] for t in p.get("targets", [])]


# --- promtool -------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def promtool() -> Path:
    """promtool, or a skip that says why it could not be obtained (never a pass without it)."""
    script = ROOT / "tests/tools/install-promtool.sh"
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=1800, cwd=ROOT)
    if done.returncode == 3:
        reason = [line for line in done.stderr.splitlines() if line.startswith("promtool unavailable")]
        pytest.skip(reason[-1] if reason else done.stderr.strip()[-500:])
    if done.returncode != 0:
        pytest.fail(f"{script.relative_to(ROOT)} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return Path(done.stdout.strip().splitlines()[-1]) / "promtool"


def run_promtool(promtool: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(promtool), *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def write_rules(path: Path, monitoring: dict, *, annotations: bool = True) -> Path:
    spec = json.loads(json.dumps(monitoring["PrometheusRule"]["spec"]))
    if not annotations:
        for group in spec["groups"]:
            for rule in group["rules"]:
                rule.pop("annotations", None)
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_promtool_check_rules(promtool: Path, monitoring, rules, tmp_path: Path) -> None:
    """Syntax, PromQL and the annotation templates of every rule."""
    rules_file = write_rules(tmp_path / "rules.yaml", monitoring)
    done = run_promtool(promtool, "check", "rules", str(rules_file), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rules)} rules found" in done.stdout, done.stdout


def test_every_dashboard_query_is_valid_promql(promtool: Path, dashboard, tmp_path: Path) -> None:
    """promtool parses each query of the dashboard, as a recording rule."""
    exprs = dashboard_exprs(dashboard)
    group = {"groups": [{"name": "dashboard", "rules": [{"record": f"dashboard:query_{i}", "expr": e}
                                                         for i, e in enumerate(exprs)]}]}
    (tmp_path / "dashboard.yaml").write_text(yaml.safe_dump(group))
    done = run_promtool(promtool, "check", "rules", "dashboard.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


# --- the alerts, unit-tested: one row per situation -------------------------------------------------

def series(name: str, values: str, **labels: str) -> dict[str, str]:
    text = ",".join(f'{k}="{v}"' for k, v in {"job": JOB, **labels}.items() if v is not None)
    return {"series": f"{name}{{{text}}}", "values": values}


def ksm(name: str, values: str, namespace: str = NAMESPACE) -> dict[str, str]:
    return {"series": f'{name}{{namespace="{namespace}",deployment="gpu-admission"}}', "values": values}


def reviews(values: str, *, allowed: str = "true", dry_run: str = "false", pod: str = "a") -> dict[str, str]:
    return series("gpu_admission_requests_total", values, pod=pod, endpoint="validate", mode="enforce",
                  allowed=allowed, dry_run=dry_run)


def denials(values: str, *, pod: str = "a") -> dict[str, str]:
    return series("gpu_admission_denials_total", values, pod=pod, mode="enforce")


def buckets(endpoint: str, per_minute: dict[str, int]) -> list[dict[str, str]]:
    """A duration histogram with a steady number of observations a minute at or below each bound."""
    return [series("gpu_admission_request_duration_seconds_bucket", f"0+{n}x40", pod="a", endpoint=endpoint, le=le)
            for le, n in per_minute.items()]


FAST = {"0.01": 60, "1.0": 60, "2.5": 60, "5.0": 60, "+Inf": 60}
SLOW = {"0.01": 50, "1.0": 54, "2.5": 54, "5.0": 60, "+Inf": 60}  # 10% between 2.5 and 5 s: p99 ~4.75 s
DAY = 86400


@dataclass
class Case:
    id: str
    alert: str
    eval_time: str
    input_series: list[dict[str, str]]
    fires: list[dict[str, str]] = field(default_factory=list)
    """the labels of each alert expected to fire (alertname aside); empty: silent"""


CASES = [
    # down: no replica answers scrapes, or none is scraped at all
    Case("down/every-replica-fails-its-scrape", "GpuAdmissionDown", "5m",
         [series("up", "0x10", pod="a"), series("up", "0x10", pod="b")], [{"severity": "critical"}]),
    Case("down/no-target-at-all", "GpuAdmissionDown", "5m",
         [{"series": 'up{job="other"}', "values": "1x10"}], [{"severity": "critical"}]),
    Case("down/silent-while-one-replica-is-up", "GpuAdmissionDown", "5m",
         [series("up", "1x10", pod="a"), series("up", "0x10", pod="b")]),
    Case("down/silent-for-the-first-minute", "GpuAdmissionDown", "1m",
         [series("up", "1 0x10", pod="a")]),
    # one replica down
    Case("replica-down/one-fails-for-15m", "GpuAdmissionReplicaDown", "15m",
         [series("up", "1x20", pod="a"), series("up", "0x20", pod="b")],
         [{"severity": "warning", "job": JOB, "pod": "b"}]),
    Case("replica-down/silent-when-it-came-back", "GpuAdmissionReplicaDown", "15m",
         [series("up", "1x20", pod="a"), series("up", "0x5 1x15", pod="b")]),
    Case("replica-down/silent-when-all-up", "GpuAdmissionReplicaDown", "15m",
         [series("up", "1x20", pod="a"), series("up", "1x20", pod="b")]),
    # not ready (kube-state-metrics)
    Case("not-ready/one-of-two-available", "GpuAdmissionNotReady", "15m",
         [ksm("kube_deployment_status_replicas_available", "1x20"), ksm("kube_deployment_spec_replicas", "2x20")],
         [{"severity": "warning", "namespace": NAMESPACE, "deployment": "gpu-admission"}]),
    Case("not-ready/silent-when-all-available", "GpuAdmissionNotReady", "15m",
         [ksm("kube_deployment_status_replicas_available", "2x20"), ksm("kube_deployment_spec_replicas", "2x20")]),
    Case("not-ready/silent-during-a-short-roll", "GpuAdmissionNotReady", "15m",
         [ksm("kube_deployment_status_replicas_available", "1x3 2x17"), ksm("kube_deployment_spec_replicas", "2x20")]),
    Case("not-ready/silent-for-another-namespace", "GpuAdmissionNotReady", "15m",
         [ksm("kube_deployment_status_replicas_available", "1x20", "other"),
          ksm("kube_deployment_spec_replicas", "2x20", "other")]),
    # 5xx ratio: 10 503s a minute against 60 answered reviews is 14%
    Case("error-ratio/503s-at-14-percent", "GpuAdmissionErrorRatioHigh", "15m",
         [reviews("0+60x20"), series("gpu_admission_errors_total", "0+10x20", pod="a", status="503")],
         [{"severity": "warning"}]),
    Case("error-ratio/500s-at-14-percent", "GpuAdmissionErrorRatioHigh", "15m",
         [reviews("0+60x20"), series("gpu_admission_errors_total", "0+10x20", pod="a", status="500")],
         [{"severity": "warning"}]),
    Case("error-ratio/silent-on-4xx", "GpuAdmissionErrorRatioHigh", "15m",
         [reviews("0+60x20"), series("gpu_admission_errors_total", "0+30x20", pod="a", status="400"),
          series("gpu_admission_errors_total", "0+1x20", pod="a", status="503")]),
    Case("error-ratio/silent-without-errors", "GpuAdmissionErrorRatioHigh", "15m",
         [reviews("0+60x20"), series("gpu_admission_errors_total", "0x20", pod="a", status="500")]),
    Case("error-ratio/silent-without-traffic", "GpuAdmissionErrorRatioHigh", "15m",
         [reviews("0x20"), series("gpu_admission_errors_total", "0x20", pod="a", status="503")]),
    # p99 against the 3 s timeout, per endpoint
    Case("latency/p99-near-timeout-on-validate", "GpuAdmissionLatencyNearTimeout", "20m",
         buckets("validate", SLOW) + buckets("mutate", FAST), [{"severity": "warning", "endpoint": "validate"}]),
    Case("latency/silent-when-fast", "GpuAdmissionLatencyNearTimeout", "20m",
         buckets("validate", FAST) + buckets("mutate", FAST)),
    Case("latency/silent-when-only-under-1-percent-is-slow", "GpuAdmissionLatencyNearTimeout", "20m",
         buckets("validate", {"0.01": 995, "1.0": 995, "2.5": 995, "5.0": 1000, "+Inf": 1000})),
    # the serving certificate (promtool's clock starts at 0, the Unix epoch)
    Case("cert/expires-in-10-days", "GpuAdmissionCertificateExpiringSoon", "2h",
         [series("gpu_admission_certificate_expiry_timestamp_seconds", f"{10 * DAY}x150", pod="a")],
         [{"severity": "warning", "pod": "a"}]),
    Case("cert/one-replica-still-serves-the-old-one", "GpuAdmissionCertificateExpiringSoon", "2h",
         [series("gpu_admission_certificate_expiry_timestamp_seconds", f"{60 * DAY}x150", pod="a"),
          series("gpu_admission_certificate_expiry_timestamp_seconds", f"{3 * DAY}x150", pod="b")],
         [{"severity": "warning", "pod": "b"}]),
    Case("cert/silent-at-30-days", "GpuAdmissionCertificateExpiringSoon", "2h",
         [series("gpu_admission_certificate_expiry_timestamp_seconds", f"{30 * DAY}x150", pod="a")]),
    Case("cert/silent-while-unknown", "GpuAdmissionCertificateExpiringSoon", "2h",
         [series("gpu_admission_certificate_expiry_timestamp_seconds", "0x150", pod="a")]),
    Case("cert/silent-within-the-first-hour", "GpuAdmissionCertificateExpiringSoon", "30m",
         [series("gpu_admission_certificate_expiry_timestamp_seconds", f"{10 * DAY}x150", pod="a")]),
    # policy reload
    Case("reload/policy-file-invalid", "GpuAdmissionPolicyReloadFailing", "10m",
         [series("gpu_admission_config_valid", "1 1 0x20", pod="a"),
          series("gpu_admission_config_valid", "1x20", pod="b")],
         [{"severity": "warning", "job": JOB, "pod": "a"}]),
    Case("reload/silent-when-valid", "GpuAdmissionPolicyReloadFailing", "10m",
         [series("gpu_admission_config_valid", "1x20", pod="a")]),
    Case("reload/silent-when-fixed-within-minutes", "GpuAdmissionPolicyReloadFailing", "10m",
         [series("gpu_admission_config_valid", "0x3 1x20", pod="a")]),
    # policy generations: every worker of every replica serves the same one
    Case("diverged/two-replicas-two-policies", "GpuAdmissionPolicyDiverged", "20m",
         [series("gpu_admission_policy_info", "1x30", pod="a", generation="2bb3afde8396", pid="7"),
          series("gpu_admission_policy_info", "1x30", pod="b", generation="f8876308a46b", pid="7")],
         [{"severity": "warning"}]),
    Case("diverged/two-workers-of-one-replica", "GpuAdmissionPolicyDiverged", "20m",
         [series("gpu_admission_policy_info", "1x30", pod="a", generation="2bb3afde8396", pid="7"),
          series("gpu_admission_policy_info", "1x30", pod="a", generation="f8876308a46b", pid="8")],
         [{"severity": "warning"}]),
    Case("diverged/silent-when-all-serve-one", "GpuAdmissionPolicyDiverged", "20m",
         [series("gpu_admission_policy_info", "1x30", pod="a", generation="2bb3afde8396", pid="7"),
          series("gpu_admission_policy_info", "1x30", pod="a", generation="2bb3afde8396", pid="8"),
          series("gpu_admission_policy_info", "1x30", pod="b", generation="2bb3afde8396", pid="7"),
          series("gpu_admission_policy_info", "0x30", pod="b", generation="f8876308a46b", pid="7")]),
    Case("diverged/silent-while-a-change-propagates", "GpuAdmissionPolicyDiverged", "20m",
         [series("gpu_admission_policy_info", "1x30", pod="a", generation="2bb3afde8396", pid="7"),
          series("gpu_admission_policy_info", "1x10 0x20", pod="b", generation="f8876308a46b", pid="7"),
          series("gpu_admission_policy_info", "_x10 1x20", pod="b", generation="2bb3afde8396", pid="7")]),
    # denied objects: 3 a minute for 70 minutes, then 60 a minute
    Case("denials/spike-over-a-steady-baseline", "GpuAdmissionDenialsSpiking", "95m",
         [denials("0+3x70 213+60x40")], [{"severity": "info"}]),
    Case("denials/first-ever-burst", "GpuAdmissionDenialsSpiking", "95m",
         [denials("_x70 0+60x40")], [{"severity": "info"}]),
    Case("denials/silent-when-steadily-high", "GpuAdmissionDenialsSpiking", "95m",
         [denials("0+60x110")]),
    Case("denials/silent-below-6-a-minute", "GpuAdmissionDenialsSpiking", "95m",
         [denials("0x70 0+3x40")]),
    # one stuck ReplicaSet: its pod CREATEs are denied 60 times a minute (requests_total), but they
    # are one object generation (denials_total moves once)
    Case("denials/silent-for-one-objects-retries", "GpuAdmissionDenialsSpiking", "95m",
         [reviews("0+3x70 213+60x40", allowed="false"), denials("0x70 1x40")]),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_alert(promtool: Path, monitoring, tmp_path: Path, case: Case) -> None:
    """promtool test rules: at eval_time exactly the expected alerts of case.alert are firing.
    Annotations are left out here (promtool compares them verbatim); their templates are checked
    by test_promtool_check_rules and test_annotations_use_labels_the_alert_has."""
    write_rules(tmp_path / "rules.yaml", monitoring, annotations=False)
    test = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": case.input_series,
                       "alert_rule_test": [{"eval_time": case.eval_time, "alertname": case.alert,
                                            "exp_alerts": [{"exp_labels": labels} for labels in case.fires]}]}]}
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(test, sort_keys=False))
    done = run_promtool(promtool, "test", "rules", "test.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_alert_has_a_firing_and_a_silent_case(rules) -> None:
    alerts = [r["alert"] for r in rules if "alert" in r]
    assert len(alerts) == len(set(alerts)) == len(rules) == 9
    for alert in alerts:
        assert any(c.alert == alert and c.fires for c in CASES), f"{alert}: no case where it fires"
        assert any(c.alert == alert and not c.fires for c in CASES), f"{alert}: no case where it is silent"
    assert {c.alert for c in CASES} == set(alerts)


def test_annotations_use_labels_the_alert_has(rules) -> None:
    """Prometheus renders a missing label as an empty string: every $labels.X of an alert's
    annotations must be among the labels it fires with (the table's firing cases)."""
    for rule in rules:
        fired = [set(labels) for c in CASES if c.alert == rule["alert"] for labels in c.fires]
        used = set(re.findall(r"\$labels\.(\w+)", json.dumps(rule["annotations"])))
        for labels in fired:
            assert used <= labels, (rule["alert"], used - labels)
        assert rule["labels"]["severity"] in ("critical", "warning", "info")
        assert {"summary", "description"} <= set(rule["annotations"])


def test_latency_threshold_sits_below_the_webhook_timeout(rules, manifest_tree) -> None:
    docs = manifest_tree.render("base") + manifest_tree.render(manifest_tree.with_components("components/dra"))
    timeouts = {w["timeoutSeconds"] for d in docs if d["kind"].endswith("WebhookConfiguration") for w in d["webhooks"]}
    assert timeouts == {3}
    (rule,) = [r for r in rules if r.get("alert") == "GpuAdmissionLatencyNearTimeout"]
    threshold = float(re.search(r">\s*([\d.]+)\s*$", rule["expr"]).group(1))
    assert max(timeouts) / 2 <= threshold < min(timeouts)
    assert f"{max(timeouts)} s" in rule["annotations"]["description"]
    # the threshold is inside the histogram's range, so histogram_quantile can tell it apart
    assert any(b > threshold for b in BUCKETS) and any(b < threshold for b in BUCKETS)


# --- every metric used is one that exists ------------------------------------------------------------

def reporter_metrics() -> dict[str, set[str]]:
    """Series names the reporter's /metrics carries (webhook/cli/reporter.py, after a scan with one
    result), with each one's label names."""
    from webhook.cli.reporter import Metrics as ReporterMetrics

    metrics = ReporterMetrics()
    metrics.scanned({"ns": [{"rule": "mixed-products", "result": "fail"}]}, 1.0, 1.0)
    text = metrics.text()
    out: dict[str, set[str]] = {}
    for name in re.findall(r"^# TYPE (\S+) \S+$", text, re.M):
        sample = re.search(rf"^{name}(?:{{([^}}]*)}})? ", text, re.M)
        assert sample, name
        out[name] = set(re.findall(r'(\w+)="', sample.group(1) or ""))
    return out


def exported_metrics() -> dict[str, set[str]]:
    """Series names the server's /metrics (and the reporter's) can carry, with each one's label names."""
    metrics = Metrics()
    labels = {c._name: set(c._labelnames) for c in vars(metrics).values() if hasattr(c, "_labelnames")}  # noqa: SLF001
    text = create_app(default_settings(), metrics=metrics).test_client().get("/metrics", environ_base=PROBE_ENV).get_data(as_text=True)
    names: dict[str, set[str]] = dict(reporter_metrics())
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M):
        base = name.removesuffix("_total") if kind == "counter" else name
        own = labels.get(base, labels.get(name, set()))
        if kind == "histogram":
            names.update({name + "_bucket": own | {"le"}, name + "_sum": own, name + "_count": own})
        else:
            names[name] = own
    return names


PROMQL_NOT_METRICS = {"and", "or", "unless", "bool", "by", "without", "on", "ignoring", "group_left",
                      "group_right", "offset", "inf", "nan"}


def selectors(expr: str) -> list[tuple[str, set[str]]]:
    """(metric name, label names matched) of every series selector in a PromQL expression."""
    found = []
    stripped = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    stripped = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", stripped)
    stripped = re.sub(r"\[[^\]]*\]", " ", stripped)
    stripped = re.sub(r"\boffset\s+\w+", " ", stripped)
    for m in re.finditer(r"(?<![\w:.])([a-zA-Z_:][\w:]*)\s*(\{[^}]*\})?\s*(\()?", stripped):
        name, matchers, call = m.groups()
        if call or name.lower() in PROMQL_NOT_METRICS:
            continue
        found.append((name, set(re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", matchers or ""))))
    return found


def test_the_selector_parser_finds_what_it_should() -> None:
    assert selectors('sum by (endpoint, le) (rate(a_bucket{job="x", le=~"1|and"}[5m] offset 1h)) > 2 and on(x) b') \
        == [("a_bucket", {"job", "le"}), ("b", set())]
    assert selectors("absent(up{job=\"g\"} == 1) or vector(0) - time() < 14 * 86400") == [("up", {"job"})]


def test_every_metric_the_rules_and_dashboard_use_is_exported(rules, dashboard) -> None:
    exported = exported_metrics()
    assert {"gpu_admission_requests_total", "gpu_admission_errors_total", "gpu_admission_config_valid",
            "gpu_admission_request_duration_seconds_bucket", "gpu_admission_config_reloads_total",
            "gpu_admission_certificate_expiry_timestamp_seconds", "gpu_admission_violations_total"} <= set(exported)
    used: dict[str, list[str]] = {}
    for where, expr in [(r.get("alert", r.get("record")), r["expr"]) for r in rules] + \
                       [("dashboard", e) for e in dashboard_exprs(dashboard)]:
        for name, matched in selectors(expr):
            used.setdefault(name, []).append(where)
            allowed = (exported[name] if name in exported else EXTERNAL_LABELS.get(name, set())) | TARGET_LABELS
            assert name in exported or name in EXTERNAL_METRICS, f"{where}: {name} is not a metric the server exports"
            assert matched <= allowed, f"{where}: {name} has no label {matched - allowed}"
    # every server metric is on the dashboard or alerted on
    server = {n for n in exported if n.startswith("gpu_admission_")}
    missing = {n for n in server if n not in used and not n.endswith(("_sum", "_count"))}
    assert not missing, f"exported but neither alerted on nor on the dashboard: {missing}"


# --- the two custom resources against the Prometheus Operator's own CRDs ---------------------------

OPERATOR_MODULE = "github.com/prometheus-operator/prometheus-operator@v0.77.1"
"""Its Go module carries the CRDs (example/prometheus-operator-crd/); kube-prometheus-stack 65 ships
this release's."""


@pytest.fixture(scope="module")
def operator_crds() -> dict[str, dict]:
    """kind -> the openAPIV3Schema of monitoring.coreos.com/v1, from the operator's Go module."""
    try:
        done = subprocess.run(["go", "mod", "download", "-json", OPERATOR_MODULE], capture_output=True,
                              text=True, timeout=600, cwd=ROOT)
    except FileNotFoundError:
        pytest.skip(f"no Go toolchain to download {OPERATOR_MODULE} (the CRDs' schemas)")
    if done.returncode != 0:
        pytest.skip(f"go mod download {OPERATOR_MODULE} failed: {(done.stdout + done.stderr).strip()[-300:]}")
    crds = Path(json.loads(done.stdout)["Dir"]) / "example/prometheus-operator-crd"
    out = {}
    for name in ("servicemonitors", "prometheusrules"):
        crd = yaml.safe_load((crds / f"monitoring.coreos.com_{name}.yaml").read_text())
        (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
        out[crd["spec"]["names"]["kind"]] = version["schema"]["openAPIV3Schema"]
    return out


def unknown_fields(doc: object, schema: dict, path: str = "") -> list[str]:
    """Fields the schema does not declare: the apiserver would prune them silently (a typo in
    tlsConfig would scrape without verification and nobody would know)."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    found = []
    if isinstance(doc, dict) and "properties" in schema:
        for key, value in doc.items():
            if key not in schema["properties"]:
                found.append(f"{path}.{key}")
            else:
                found += unknown_fields(value, schema["properties"][key], f"{path}.{key}")
    elif isinstance(doc, list) and "items" in schema:
        for i, item in enumerate(doc):
            found += unknown_fields(item, schema["items"], f"{path}[{i}]")
    return found


@pytest.mark.parametrize("kind", ["ServiceMonitor", "PrometheusRule"])
def test_the_custom_resources_match_the_operators_crds(monitoring, operator_crds, kind: str) -> None:
    doc = monitoring[kind]
    assert doc["apiVersion"] == "monitoring.coreos.com/v1"
    # not jsonschema.validate: it checks the schema first, and the CRDs' patterns are Go regexps
    # (`(?i)` after `^`) that Python's re refuses; the fields that carry them are not used here
    jsonschema.Draft7Validator(operator_crds[kind]).validate(doc)
    assert unknown_fields({k: v for k, v in doc.items() if k != "metadata"}, operator_crds[kind]) == []


# --- the ServiceMonitor scrapes what the server serves ---------------------------------------------

def test_the_service_monitor_selects_the_webhook_service_port(monitoring) -> None:
    docs = monitoring["docs"]
    sm = monitoring["ServiceMonitor"]
    assert sm["metadata"]["namespace"] == NAMESPACE
    assert sm["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    chosen = [d for d in docs if d["kind"] == "Service" and d["metadata"]["namespace"] == NAMESPACE
              and sm["spec"]["selector"]["matchLabels"].items() <= d["metadata"].get("labels", {}).items()]
    assert [s["metadata"]["name"] for s in chosen] == [JOB]  # the job label is the Service name
    (endpoint,) = sm["spec"]["endpoints"]
    (port,) = [p for p in chosen[0]["spec"]["ports"] if p["name"] == endpoint["port"]]
    deploy = next(d for d in docs if d["kind"] == "Deployment")
    (container,) = deploy["spec"]["template"]["spec"]["containers"]
    assert port["targetPort"] in [p["name"] for p in container["ports"]]
    assert endpoint["path"] == "/metrics"
    # that port is the one `serve --probe-bind` listens on: plain HTTP, where the kubelet probes too
    args = build_parser().parse_args(container["args"])
    (probes,) = [p for p in container["ports"] if p["name"] == port["targetPort"]]
    assert args.probe_bind == f"0.0.0.0:{probes['containerPort']}"
    assert endpoint["scheme"] == "http" and "tlsConfig" not in endpoint
    assert container["readinessProbe"]["httpGet"] == {"scheme": "HTTP", "path": "/readyz", "port": probes["name"]}


def test_the_network_policy_lets_the_monitoring_namespace_scrape(monitoring) -> None:
    """Only the probe port is open to the monitoring namespace, and only to it (the admission port is
    open to all, and no longer serves /metrics: tests/server/test_probes.py)."""
    docs = monitoring["docs"]
    deploy = next(d for d in docs if d["kind"] == "Deployment")
    (container,) = deploy["spec"]["template"]["spec"]["containers"]
    probes = next(p["containerPort"] for p in container["ports"] if p["name"] == "probes")
    ingress = next(d for d in docs if d["kind"] == "NetworkPolicy")["spec"]["ingress"]
    rules = [r for r in ingress if any(p["port"] == probes for p in r["ports"])]
    assert rules == [{"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
                      "ports": [{"protocol": "TCP", "port": probes}]}]


def test_server_labels_do_not_collide_with_target_labels(monitoring) -> None:
    """A server label named like one the operator sets on the target would arrive renamed
    exported_<name> unless the target's is dropped."""
    exported = exported_metrics()
    clashes = {label for labels in exported.values() for label in labels} & TARGET_LABELS
    assert clashes == {"endpoint"}
    dropped = {r["regex"] for r in monitoring["ServiceMonitor"]["spec"]["endpoints"][0].get("relabelings", [])
               if r.get("action") == "labeldrop"}
    assert clashes <= dropped
    assert not monitoring["ServiceMonitor"]["spec"]["endpoints"][0].get("honorLabels")


# --- the dashboard --------------------------------------------------------------------------------

def test_the_dashboard_configmap_is_found_by_grafanas_sidecar(monitoring, dashboard) -> None:
    cm = monitoring["ConfigMap"]
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["namespace"] == NAMESPACE
    assert dashboard["uid"] == "gpu-admission" and dashboard["title"] == "gpu-admission"
    assert [v["name"] for v in dashboard["templating"]["list"]] == ["datasource"]
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"], panel["title"]
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24, panel["title"]
