"""deploy/prometheus and deploy/grafana, for real: Debian's Prometheus (apt-get install
prometheus; .ci/run does it) runs the shipped prometheus.yml, scraping two real agents (``gpuflow
watch``, fake NVML, the fake traced collector, a token, --metrics-per-process; one on the fake
``pods`` node with a fake Kubernetes API server naming its pods) through a file_sd inventory.
``promtool`` checks the config and the rules and runs their unit tests
(deploy/prometheus/gpuflow-rules.test.yml: alerts firing and recorded values); Prometheus loads and evaluates every rule without
error and each recorded series has data; every query of every panel of the Grafana dashboard
(its variables substituted as Grafana would) answers with data; the series carry the fleet
labels (Hostname from NODE_NAME, k8s_* workload labels, never exported_*).

The shipped file is used as it is, but for its two 15 s intervals, set to 1 s here."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from gpuflow.collectors.nvml import fake_scenarios as fs

from fake_kubernetes import FakeApiServer, pod
from fleet_agents import Agent
from servers import free_port

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
TOKEN = "d1c5bb0e6f2a4b7c9e8d0f1a2b3c4d5e"


def tools() -> tuple[str, str]:
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if not prometheus or not promtool:
        msg = "Debian's prometheus package is not installed (apt-get install prometheus)"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return prometheus, promtool


class Prometheus:
    def __init__(self, binary: str, workdir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(workdir / "prometheus.log", "w")
        self.proc = subprocess.Popen(
            [binary, "--config.file=prometheus.yml", "--storage.tsdb.path=data",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            cwd=workdir, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, (workdir / "prometheus.log").read_text()
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise AssertionError("Prometheus was not ready within 30 s")

    def api(self, path: str, **params) -> dict:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=10) as r:
            doc = json.load(r)
        assert doc["status"] == "success", doc
        return doc["data"]

    def query(self, expr: str) -> list[dict]:
        return self.api("query", query=expr)["result"]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.log.close()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    prometheus_bin, promtool = tools()
    work = tmp_path_factory.mktemp("prometheus")
    for f in (DEPLOY / "prometheus").iterdir():
        shutil.copy(f, work / f.name)
    config = (work / "prometheus.yml").read_text()
    for line in ("  scrape_interval: 15s\n", "  evaluation_interval: 15s\n"):
        assert line in config
        config = config.replace(line, line.replace("15s", "1s"))
    (work / "prometheus.yml").write_text(config)
    token = work / "gpuflow.token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    api = FakeApiServer([pod(fs.POD_TRAIN_UID, "trainer-0", "ml", {"main": f"containerd://{fs.CONTAINER_TRAIN}"}),
                         pod(fs.POD_SERVE_UID, "server-7f9c", "serving", {"vllm": f"cri-o://{fs.CONTAINER_SERVE}"})])
    args = ("--metrics-per-process", "--token-file", str(token))
    agents = []
    prometheus = None
    try:
        agents.append(Agent("node-a", interval_ms=500, args=args, env={
            "GPUFLOW_NVML_FAKE": "pods", "GPUFLOW_K8S_API": api.url, "GPUFLOW_K8S_TOKEN_FILE": str(token)}))
        agents.append(Agent("node-b", interval_ms=500, args=args))
        (work / "targets").mkdir()
        (work / "targets" / "agents.json").write_text(json.dumps(
            [{"targets": [f"127.0.0.1:{a.port}" for a in agents], "labels": {"cluster": "test"}}]))
        checked = subprocess.run([promtool, "check", "config", "prometheus.yml"], cwd=work,
                                 capture_output=True, text=True, timeout=60)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        prometheus = Prometheus(prometheus_bin, work)
        yield prometheus, promtool, work
    finally:
        if prometheus is not None:
            prometheus.stop()
        for a in agents:
            a.stop()
        api.stop()


def wait_for_data(prom: Prometheus, exprs: list[str], timeout: float = 60.0) -> dict[str, list]:
    """Each expression's result, once every one has data (or the timeout: then what there was)."""
    deadline, results = time.monotonic() + timeout, {}
    while True:
        results = {e: prom.query(e) for e in exprs}
        if all(results.values()) or time.monotonic() > deadline:
            return results
        time.sleep(1.0)


def test_promtool_checks_the_shipped_rules():
    _, promtool = tools()
    r = subprocess.run([promtool, "check", "rules", "gpuflow-rules.yml", "gpuflow-alerts.yml"],
                       cwd=DEPLOY / "prometheus", capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("SUCCESS") == 2
    r = subprocess.run([promtool, "test", "rules", "gpuflow-rules.test.yml"],
                       cwd=DEPLOY / "prometheus", capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr


def test_both_agents_are_scraped_with_their_token_and_named_by_node_name(fleet):
    prom, _, _ = fleet
    both = 'count(up{job="gpuflow"} == 1) == 2'   # data only once both targets answered a scrape
    assert wait_for_data(prom, [both])[both], prom.query('up{job="gpuflow"}')
    hosts = prom.api("label/Hostname/values", **{"match[]": "gpuflow_gpu_info"})
    assert sorted(hosts) == ["node-a", "node-b"]
    labels = prom.api("labels", **{"match[]": '{job="gpuflow"}'})
    assert not [name for name in labels if name.startswith("exported_")], labels
    assert not {"pod", "namespace", "container"} & set(labels)
    trainer = wait_for_data(prom, ['gpuflow_process_gpu_memory_used_bytes{k8s_pod_name="trainer-0"}'])
    series = next(iter(trainer.values()))
    assert {s["metric"]["Hostname"] for s in series} == {"node-a"}
    assert {s["metric"]["k8s_namespace_name"] for s in series} == {"ml"}
    assert {s["metric"]["gpu"] for s in series} == {"0", "1"}


def test_every_rule_loads_evaluates_and_records_data(fleet):
    prom, _, _ = fleet
    groups = prom.api("rules")["groups"]
    rules = [r for g in groups for r in g["rules"]]
    assert len(rules) == 33
    records = [r["name"] for r in rules if r["type"] == "recording"]
    results = wait_for_data(prom, records)
    empty = [name for name, result in results.items() if not result]
    assert not empty, f"recording rules without data: {empty}"
    rules = [r for g in prom.api("rules")["groups"] for r in g["rules"]]
    bad = [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"]
    assert not bad, bad


def grafana_queries() -> tuple[list[tuple[str, str]], list[str]]:
    """Every (panel title, expression) of the dashboard and every variable's query, with the
    variables substituted as Grafana does for 'All' (.*) and its $__rate_interval (4 scrapes)."""
    dash = json.loads((DEPLOY / "grafana" / "gpuflow-fleet.json").read_text())
    subst = {"$Hostname": ".*", "$gpu": ".*", "$__rate_interval": "4s"}

    def resolved(expr: str) -> str:
        for k, v in subst.items():
            expr = expr.replace(k, v)
        assert "$" not in expr, expr
        return expr

    panels = [p for p in dash["panels"] if p["type"] != "row"]
    assert panels and all(p.get("targets") for p in panels)
    queries = [(p["title"], resolved(t["expr"])) for p in panels for t in p["targets"]]
    variables = [v["query"]["query"] for v in dash["templating"]["list"] if v["type"] == "query"]
    return queries, variables


def test_every_dashboard_query_answers_with_data(fleet):
    prom, _, _ = fleet
    queries, variables = grafana_queries()
    assert len(queries) >= 40
    results = wait_for_data(prom, [q for _, q in queries])
    empty = [(title, q) for title, q in queries if not results[q]]
    assert not empty, f"panels whose query has no data: {empty}"
    for v in variables:   # label_values(<selector>, <label>)
        m = re.fullmatch(r"label_values\((.+), (\w+)\)", v)
        assert m, v
        selector = m.group(1).replace("$Hostname", ".*")
        assert prom.api(f"label/{m.group(2)}/values", **{"match[]": selector}), v


def test_the_dashboard_reads_only_series_the_agents_or_the_rules_make(fleet):
    prom, _, _ = fleet
    queries, _ = grafana_queries()
    names = set(prom.api("label/__name__/values"))
    recorded = {r["name"] for g in prom.api("rules")["groups"] for r in g["rules"]}
    # a series name is an identifier that is an agent's (gpuflow_...) or a rule's (level:name:ops)
    used = {n for _, q in queries for n in re.findall(r"[A-Za-z_][A-Za-z0-9_:]*", q)
            if n.startswith("gpuflow_") or ":" in n}
    assert len(used) >= 40 and used <= names | recorded, used - names - recorded
