"""The Prometheus integration: promtool checks the rules and runs their unit
tests (tests.yml, every alert firing and not), Debian's
prometheus-redis-exporter scrapes a server with the module through
slidewin.lua, and every series the rules read is one that the exporter,
the Python client or the nginx handler really exports."""

import http.client
import os
import re
import signal
import subprocess
import sys

import pytest

from conftest import DEADLINE_S, ROOT, SERVERS, Server, free_port, run, tool, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
RULES = os.path.join(HERE, "rules.yml")


def test_promtool_checks_the_rules():
    out = run([tool("promtool"), "check", "rules", RULES])
    assert "SUCCESS: 11 rules found" in out.stdout, out.stdout


def test_promtool_unit_tests_of_every_alert_pass():
    out = run([tool("promtool"), "test", "rules", os.path.join(HERE, "tests.yml")], cwd=HERE)
    assert "SUCCESS" in out.stdout and "FAILED" not in out.stdout, out.stdout
    alerts = set(re.findall(r"^\s+- alert: (\w+)", open(RULES).read(), re.M))
    tested = set(re.findall(r"alertname: (\w+)", open(os.path.join(HERE, "tests.yml")).read()))
    assert len(alerts) == 6 and alerts == tested, (alerts, tested)


def scrape(port: int) -> dict:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", "/metrics")
        body = c.getresponse().read().decode()
    finally:
        c.close()
    samples = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


@pytest.fixture(params=SERVERS)
def compact_server(request):
    """A server whose new keys are compact logs (slidewin.log-type compact)."""
    s = Server(request.param, module_args=["log-type", "compact"])
    yield s
    s.cleanup()


def start_exporter(server):
    port = free_port()
    proc = subprocess.Popen(
        [tool("prometheus-redis-exporter"), "-redis.addr", f"redis://127.0.0.1:{server.port}",
         "-script", os.path.join(HERE, "slidewin.lua"), "-web.listen-address", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_for("the exporter", lambda: "redis_up" in " ".join(scrape(port)))
    return proc, port


def stop_exporter(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(DEADLINE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(DEADLINE_S)


@pytest.fixture
def exporter(server):
    proc, port = start_exporter(server)
    yield port
    stop_exporter(proc)


def test_a_real_scrape_reads_the_module_back(server, exporter):
    r = server.client()
    r.config_set("slowlog-log-slower-than", 0)  # every call is "slow": entries to find
    r.slowlog_reset()
    for _ in range(3):
        assert r.execute_command("SLIDEWIN.CHECK", "rl:a", 3, 60000) == 1
    assert r.execute_command("SLIDEWIN.CHECK", "rl:a", 3, 60000) == 0
    assert r.execute_command("SLIDEWIN.CHECK", "rl:a", 3, 60000, "SHADOW") == 1
    assert r.execute_command("SLIDEWIN.CHECK", "rl:big", 50000, 60000, "COST", 50000) == 1
    r.config_set("slowlog-log-slower-than", 10000)
    slow = [e for e in r.slowlog_get(128) if e["command"].lower().startswith(b"slidewin.")]
    big = r.memory_usage("rl:big")
    info = r.info("slidewin")
    m = scrape(exporter)

    def script(key):
        return m[f'redis_script_values{{key="{key}"}}']

    assert script("slidewin_checks_allowed") == info["slidewin_checks_allowed"] == 4
    assert script("slidewin_checks_denied") == info["slidewin_checks_denied"] == 1
    assert script("slidewin_checks_shadow_refused") == info["slidewin_checks_shadow_refused"] == 1
    assert script("slidewin_cost_granted") == 50003
    assert script("slidewin_slowlog_entries") == len(slow) == 6
    assert script("slidewin_slowlog_last_id") == max(e["id"] for e in slow)
    assert script("slidewin_scan_keys") == 2
    assert script("slidewin_largest_key_bytes") == big > 1_000_000
    assert m['redis_commands_total{cmd="slidewin.check"}'] == 6
    assert m['redis_commands_duration_seconds_total{cmd="slidewin.check"}'] > 0
    assert m["redis_evicted_keys_total"] == 0


def test_every_series_the_rules_read_is_exported(server, exporter):
    r = server.client()
    r.execute_command("SLIDEWIN.CHECK", "rl:a", 1, 60000)
    exported = {re.sub(r"\{.*", "", name) for name in scrape(exporter)}
    # The Python client: a limiter whose server is away answers by its
    # outage policy, a "fallback" decision.
    py = run([sys.executable, "-c", f"""
import redis
from slidewin import Limiter
from slidewin.health import client_prometheus
lim = Limiter(redis.Redis(port={free_port()}, socket_timeout=0.2), outage="allow", timeout_ms=100)
lim.check("k", 1, 1000)
print(client_prometheus(lim))
"""], env={**os.environ, "PYTHONWARNINGS": "ignore"}).stdout
    assert re.search(r'^slidewin_client_decisions_total\{[^}]*source="fallback"', py, re.M), py
    exported |= set(re.findall(r"^([a-z_]+)[ {]", py, re.M))
    # The nginx handler's status location.
    lua = open(os.path.join(ROOT, "integrations", "nginx", "lua", "slidewin", "nginx.lua")).read()
    names = re.search(r'for _, name in ipairs\(\{ ([^}]*) \}\)', lua).group(1)
    exported |= {f"slidewin_nginx_{n.strip(chr(34))}_total" for n in names.split(", ")}
    # The rules without their comments (which name families loosely).
    text = "\n".join(line for line in open(RULES).read().splitlines() if not line.lstrip().startswith("#"))
    read = set(re.findall(r"\b(redis_[a-z_]+|slidewin_[a-z_]+_total)\b", text))
    assert read >= {"redis_commands_total", "redis_commands_duration_seconds_total", "redis_script_values",
                    "redis_evicted_keys_total", "slidewin_client_decisions_total",
                    "slidewin_nginx_outage_open_total", "slidewin_nginx_outage_closed_total"}, read
    assert read <= exported, read - exported
    # The script's keys the rules name are keys it returns.
    keys = set(re.findall(r'key="(slidewin_[a-z_]+)"', text))
    assert keys, text
    scraped_keys = set(re.findall(r'key="(slidewin_[a-z_]+)"', " ".join(scrape(exporter))))
    assert keys <= scraped_keys, keys - scraped_keys


def test_the_largest_key_is_found_among_compact_logs(compact_server):
    r = compact_server.client()
    assert r.execute_command("SLIDEWIN.CHECK", "rl:c", 50000, 60000, "COST", 50000) == 1
    assert r.execute_command("SLIDEWIN.CHECK", "rl:d", 5, 60000) == 1
    r.zadd("not:a:limiter", {"x": 1})  # a sorted set: measured too (any name)
    assert r.type("rl:c") == b"slidewlog"
    proc, port = start_exporter(compact_server)
    try:
        m = scrape(port)
    finally:
        stop_exporter(proc)
    assert m['redis_script_values{key="slidewin_scan_keys"}'] == 3
    # Both types were measured (a compact log of one run is small: the
    # largest is whichever MEMORY USAGE says).
    sizes = [r.memory_usage(k) for k in ("rl:c", "rl:d", "not:a:limiter")]
    assert m['redis_script_values{key="slidewin_largest_key_bytes"}'] == max(sizes), sizes


DASHBOARD = os.path.join(HERE, "grafana-dashboard.json")

#: What a dashboard's PromQL (and Grafana's label_values) names besides
#: series: functions, aggregations, operators. A word not here and not a
#: series fails the test below (add a function here when a panel uses it).
PROMQL_WORDS = {"sum", "max", "min", "avg", "count", "topk", "bottomk", "rate", "irate", "increase", "delta",
                "clamp_min", "clamp_max", "histogram_quantile", "and", "or", "unless", "offset", "bool",
                "label_values", "by", "without"}


def dashboard_queries():
    """Every PromQL query of the dashboard: the panels' targets and the
    template variables' queries."""
    import json

    with open(DASHBOARD, encoding="utf-8") as f:
        dash = json.load(f)  # valid JSON, or this fails
    queries = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    for var in dash["templating"]["list"]:
        if var["type"] == "query":
            q = var["query"]
            queries.append(q["query"] if isinstance(q, dict) else q)
    return dash, queries


def series_of(expr: str) -> set:
    """The series (metric or recording-rule names) a query reads."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # label values
    e = re.sub(r"label_values\(([^,()]*),\s*\w+\s*\)", r" \1 ", e)  # Grafana's label_values(series, label)
    e = re.sub(r"\{[^}]*\}", " ", e)  # matchers
    e = re.sub(r"\[[^\]]*\]", " ", e)  # ranges
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)  # label lists
    e = re.sub(r"\b\d+(\.\d+)?(e[+-]?\d+)?\b", " ", e)  # numbers
    return {w for w in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", e) if w not in PROMQL_WORDS}


def test_the_series_reader_reads_series():
    assert series_of('sum by (instance) (rate(redis_script_values{key="slidewin_x",instance=~"$i"}[5m]))') == {
        "redis_script_values"}
    assert series_of("slidewin:denial_ratio:rate5m > 0.5 and foo_total > 1e6") == {"slidewin:denial_ratio:rate5m", "foo_total"}
    assert series_of("label_values(redis_script_values, instance)") == {"redis_script_values"}


def test_the_grafana_dashboard_reads_only_exported_series(server, exporter):
    dash, queries = dashboard_queries()
    assert dash["uid"] and dash["title"] and len(dash["panels"]) >= 8, "a dashboard"
    ids = [p["id"] for p in dash["panels"]]
    assert len(set(ids)) == len(ids), "panel ids are unique"
    for p in dash["panels"]:
        assert p["targets"] and all(t["expr"].strip() for t in p["targets"]), p["title"]
        assert len({t["refId"] for t in p["targets"]}) == len(p["targets"]), p["title"]
    r = server.client()
    r.execute_command("SLIDEWIN.CHECK", "rl:a", 1, 60000)
    r.execute_command("SLIDEWIN.CHECK", "rl:a", 1, 60000, "SHADOW")
    scraped = scrape(exporter)
    exported = {re.sub(r"\{.*", "", name) for name in scraped}
    # The Python client, its server away: a fallback decision and a shadow
    # call let through (every family its health report can give).
    py = run([sys.executable, "-c", f"""
import redis
from slidewin import Limiter
from slidewin.health import client_prometheus
lim = Limiter(redis.Redis(port={free_port()}, socket_timeout=0.2), outage="deny", timeout_ms=100)
lim.check("k", 1, 1000, shadow=True)
print(client_prometheus(lim))
"""], env={**os.environ, "PYTHONWARNINGS": "ignore"}).stdout
    assert "slidewin_client_shadow_refused_total" in py, py
    exported |= set(re.findall(r"^([a-z_]+)[ {]", py, re.M))
    lua = open(os.path.join(ROOT, "integrations", "nginx", "lua", "slidewin", "nginx.lua")).read()
    names = re.search(r'for _, name in ipairs\(\{ ([^}]*) \}\)', lua).group(1)
    exported |= {f"slidewin_nginx_{n.strip(chr(34))}_total" for n in names.split(", ")}
    recorded = set(re.findall(r"^\s+- record: (\S+)", open(RULES).read(), re.M))
    assert recorded, "the recording rules are read"
    read = set().union(*(series_of(q) for q in queries))
    assert read <= exported | recorded, read - exported - recorded
    assert read & recorded and read & exported, read
    # Every key="slidewin_..." a panel names is one slidewin.lua returns.
    keys = set(re.findall(r'key="(slidewin_[a-z_]+)"', " ".join(queries)))
    scraped_keys = set(re.findall(r'key="(slidewin_[a-z_]+)"', " ".join(scraped)))
    assert keys and keys <= scraped_keys, keys - scraped_keys
