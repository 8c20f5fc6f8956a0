"""The alerting rules (deploy/prometheus/alerts.yml) under ``promtool test rules``, and the
chart's Grafana dashboard: valid JSON whose every query parses and reads only metrics that
something exports or a recording rule defines."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES_DIR = ROOT / "deploy" / "prometheus"
DASHBOARD = ROOT / "deploy" / "helm" / "gpupaas" / "files" / "grafana-dashboard.json"
PLATFORM_METRICS = ROOT / "apps" / "telemetry" / "metrics.py"
ALERTS = {
    "GpuFellOffTheBus",
    "GpuXidError",
    "GpuEccDoubleBitErrors",
    "GpuEccSingleBitStorm",
    "GpuTooHot",
    "GpuThermalThrottling",
    "GpuExporterDown",
    "NodeNotReady",
    "QuotaSaturated",
    "QueueWaitTooLong",
    "IdleGpuCost",
    "PortalDown",
}
# Metrics from outside: dcgm-exporter (DCGM_FI_*), kube-state-metrics (kube_*), Prometheus
# itself (up, ALERTS).
EXTERNAL = re.compile(r"^(DCGM_FI_[A-Z0-9_]+|kube_[a-z_]+|up|ALERTS)$")
PROMQL_WORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
    "offset", "bool", "sum", "avg", "max", "min", "count", "rate", "increase", "changes",
    "last_over_time", "label_replace", "humanizeDuration", "absent",
}  # fmt: skip


@pytest.fixture(scope="module")
def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is missing: install Debian's prometheus package", pytrace=False)
    return path


def _run(*command: str, cwd: Path = RULES_DIR) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)


def test_rules_are_valid(promtool: str) -> None:
    result = _run(promtool, "check", "rules", "rules.yml", "alerts.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_alerts_fire_when_they_should_and_only_then(promtool: str) -> None:
    result = _run(promtool, "test", "rules", "alerts_test.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_is_tested() -> None:
    rules = yaml.safe_load((RULES_DIR / "alerts.yml").read_text())
    defined = {r["alert"] for g in rules["groups"] for r in g["rules"]}
    assert defined == ALERTS
    tests = yaml.safe_load((RULES_DIR / "alerts_test.yml").read_text())
    fired = {
        case["alertname"]
        for t in tests["tests"]
        for case in t["alert_rule_test"]
        if case["exp_alerts"]
    }
    assert ALERTS - {"PortalDown"} <= fired  # PortalDown is `up == 0`, as GpuExporterDown


def test_a_broken_expectation_fails(promtool: str, tmp_path: Path) -> None:
    """The promtool run can fail: a test expecting a healthy GPU to alert is refused."""
    for name in ("alerts.yml", "alerts_test.yml"):
        shutil.copy(RULES_DIR / name, tmp_path / name)
    text = (tmp_path / "alerts_test.yml").read_text()
    (tmp_path / "alerts_test.yml").write_text(
        text.replace('summary: "GPU lost on h1"', 'summary: "GPU lost on h9"', 1)
    )
    result = _run(promtool, "test", "rules", "alerts_test.yml", cwd=tmp_path)
    assert result.returncode != 0 and "GPU lost on h9" in result.stdout + result.stderr


def _panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    panels = []
    for panel in dashboard["panels"]:
        panels.append(panel)
        panels.extend(panel.get("panels", []))
    return panels


def _exported_names() -> set[str]:
    names = set(re.findall(r'GaugeMetricFamily\(\s*"([a-z_]+)"', PLATFORM_METRICS.read_text()))
    assert names, "no platform metrics found"
    return names


def _recorded_names() -> set[str]:
    rules = yaml.safe_load((RULES_DIR / "rules.yml").read_text())
    return {r["record"] for g in rules["groups"] for r in g["rules"] if "record" in r}


def _metric_names(expr: str) -> set[str]:
    stripped = re.sub(r'"[^"]*"', '""', expr)  # label values
    stripped = re.sub(r"\{[^}]*\}", "", stripped)  # matchers
    stripped = re.sub(r"\[[^\]]*\]", "", stripped)  # ranges
    # the label lists of by/without/on/ignoring/group_left/group_right
    stripped = re.sub(
        r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", stripped
    )
    tokens = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", stripped))
    return {t for t in tokens if t not in PROMQL_WORDS}


def test_dashboard_queries_parse_and_read_known_metrics(promtool: str, tmp_path: Path) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"]
    panels = _panels(dashboard)
    assert len({p["id"] for p in panels}) == len(panels)
    exprs = {f"panel {p['id']} ({p['title']})": t["expr"] for p in panels for t in p["targets"]}
    assert len(exprs) >= 12
    # Each query as a recording rule: promtool parses them all, naming the broken ones.
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:panel_{i}", "expr": e} for i, e in enumerate(exprs.values())
    ]}]}  # fmt: skip
    (tmp_path / "dashboard-rules.yml").write_text(yaml.safe_dump(rules))
    result = _run(promtool, "check", "rules", "dashboard-rules.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    known = _exported_names() | _recorded_names()
    for where, expr in exprs.items():
        unknown = {n for n in _metric_names(expr) if not EXTERNAL.match(n) and n not in known}
        assert not unknown, f"{where} reads metrics nothing defines: {sorted(unknown)}"


def test_dashboard_covers_every_alerted_signal() -> None:
    text = DASHBOARD.read_text()
    for metric in (
        "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_THERMAL_VIOLATION", "kube_node_status_condition", "gpupaas_quota_used_gpus",
        "gpupaas_queue_wait_seconds_max", "gpupaas_idle_cost_per_hour",
    ):  # fmt: skip
        assert metric in text, metric
    assert 'up{job=~\\".*dcgm.*\\"}' in text


def test_metric_names_are_found_where_promql_hides_them() -> None:
    expr = 'max by (Hostname, gpu) (foo_total{a="b"}) / on (x) group_left rate(bar:ratio[5m]) > 0.9'
    assert _metric_names(expr) == {"foo_total", "bar:ratio"}


def test_alert_metrics_are_exported_or_external() -> None:
    rules = yaml.safe_load((RULES_DIR / "alerts.yml").read_text())
    known = _exported_names() | _recorded_names()
    for group in rules["groups"]:
        for rule in group["rules"]:
            unknown = {
                n for n in _metric_names(rule["expr"]) if not EXTERNAL.match(n) and n not in known
            }
            assert not unknown, f"{rule['alert']}: {sorted(unknown)}"
