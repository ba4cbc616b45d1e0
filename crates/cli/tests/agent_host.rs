//! `cpushield agent` for real on this host, inside a private PID namespace:
//! CPU 1 is shielded, an IRQ's mask is rewritten onto CPU 1 behind the
//! shield's back, the agent corrects it and logs why, a real Prometheus
//! scrapes the agent and its HTTP API returns the series with the values the
//! test caused, with the latency probe's histogram and check's findings by
//! severity; `--on-threshold` runs once the probe exceeds its limit, and the
//! node_exporter textfile is written; on SIGTERM the agent resets the shield
//! (`on_stop = "reset"`). The Grafana dashboard's queries are checked against
//! the same run: promtool parses them, they name only metrics the agent
//! served, and each returns data from that Prometheus.

use std::net::TcpListener;
mod support;

use std::path::Path;
use std::process::Command;
use support::{can_shield_here, run_scenario_in_pid_namespace, skip, system_state};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

const SCENARIO: &str = r#"
set -u
fail() { echo "ASSERT-FAIL $*"; }
masks() { $CS show --json | grep -E '^  "(procs|irqs|ltmr)":' | tr -d ' \n'; }
on_cpu1() { [ $(( 0x$(tr -d ',\n' < /proc/irq/$1/smp_affinity) & 2 )) != 0 ]; }
printf '[shield]\nall = "1"\n[agent]\non_stop = "reset"\nlatency_cpu = 1\nlatency_limit = "1us"\n' > "$CFG"
$CS apply --config "$CFG" >/dev/null || fail "apply exit $?"
# An IRQ the shield moved off CPU 1 (a kernel-managed one keeps its mask).
IRQ=
for f in /proc/irq/[0-9]*/smp_affinity; do
  n=$(basename $(dirname $f))
  on_cpu1 $n || { IRQ=$n; break; }
done
[ -n "$IRQ" ] || fail "no IRQ was moved off CPU 1"
$CS agent --config "$CFG" --listen 127.0.0.1:$PORT --interval 200ms --check-every 2 \
  --textfile "$DIR/cpushield.prom" --on-threshold 'echo "$CPUSHIELD_REASON" > "$DIR/crossed"' > "$LOG" 2>&1 & AGENT=$!
for i in $(seq 50); do curl -sf http://127.0.0.1:$PORT/metrics >/dev/null && break; sleep 0.1; done
sleep 0.5
# Spread it over CPU 1 as irqbalance would. By Brosky's rule the mask written
# becomes the IRQ's requested affinity: the shield keeps it off CPU 1, and
# reset gives this mask back (the test restores the original afterwards).
WRITTEN=$(printf '%x' $(( 0x$(tr -d ',\n' < /proc/irq/$IRQ/smp_affinity) | 2 )))
echo "$IRQ $WRITTEN" > "$DIR/written"
echo $WRITTEN > /proc/irq/$IRQ/smp_affinity || fail "cannot write IRQ $IRQ"
for i in $(seq 50); do grep -q "IRQ $IRQ .*cause irq_rewritten" "$LOG" && break; sleep 0.1; done
grep -q "IRQ $IRQ .*cause irq_rewritten" "$LOG" || fail "no correction logged: $(cat $LOG)"
on_cpu1 $IRQ && fail "IRQ $IRQ still on CPU 1 after the correction: $(cat /proc/irq/$IRQ/smp_affinity)"
m=$(curl -sf http://127.0.0.1:$PORT/metrics)
echo "$m" | grep -q '^cpushield_corrections_total{cause="irq_rewritten"} [1-9]' || fail "metrics: $m"
[ "$(curl -s -o /dev/null -w '%{http_code}' -X POST http://127.0.0.1:$PORT/metrics)" = 405 ] || fail "POST not 405"
[ "$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$PORT/reset)" = 404 ] || fail "/reset not 404"
# The probe on CPU 1 (a 1us limit no timer meets) and check's findings.
echo "$m" | grep -qE '^cpushield_latency_seconds_bucket\{le="0.01",cpu="1"\} [1-9]' || fail "no latency histogram: $m"
for sev in info warn breaks-shield; do
  echo "$m" | grep -qE "^cpushield_check_findings\{severity=\"$sev\"\} [0-9]+$" || fail "no findings gauge for $sev: $m"
done
for i in $(seq 50); do [ -s "$DIR/crossed" ] && break; sleep 0.1; done
grep -q 'above the limit' "$DIR/crossed" 2>/dev/null || fail "--on-threshold did not run: $(cat $LOG)"
grep -q '^# TYPE cpushield_corrections_total counter' "$DIR/cpushield.prom" || fail "textfile: $(cat $DIR/cpushield.prom)"
grep -q '# EOF' "$DIR/cpushield.prom" && fail "the textfile is OpenMetrics, not node_exporter's text format"
st=$(curl -sf http://127.0.0.1:$PORT/status)
[ "$(echo "$st" | jq -r '.conditions[] | select(.type=="ShieldUp") | .status')" = True ] || fail "status: $st"
cat > "$DIR/prometheus.yml" <<EOC
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: cpushield
    static_configs:
      - targets: ['127.0.0.1:$PORT']
EOC
prometheus --config.file="$DIR/prometheus.yml" --storage.tsdb.path="$DIR/tsdb" \
  --web.listen-address=127.0.0.1:$PPORT > "$DIR/prometheus.log" 2>&1 & PROM=$!
q() { curl -sf --get "http://127.0.0.1:$PPORT/api/v1/query" --data-urlencode "query=$1"; }
info=; corr=
for i in $(seq 60); do
  info=$(q 'cpushield_build_info' | jq -r '.data.result[0] | "\(.metric.version) \(.value[1])"' 2>/dev/null)
  corr=$(q 'cpushield_corrections_total{cause="irq_rewritten"}' | jq -r '.data.result[0].value[1]' 2>/dev/null)
  [ -n "$info" ] && [ "$info" != "null null" ] && [ -n "$corr" ] && [ "$corr" != null ] && break
  sleep 0.5
done
[ "$info" = "$VERSION 1" ] || fail "prometheus build_info [$info]: $(tail -5 $DIR/prometheus.log)"
[ "${corr:-0}" != null ] && [ "${corr%%.*}" -ge 1 ] 2>/dev/null || fail "prometheus corrections [$corr]"
lat=$(q 'sum(cpushield_latency_seconds_count{cpu="1"})' | jq -r '.data.result[0].value[1]')
[ "${lat%%.*}" -ge 1 ] 2>/dev/null || fail "prometheus latency histogram [$lat]"
nsev=$(q 'count(cpushield_check_findings)' | jq -r '.data.result[0].value[1]')
[ "$nsev" = 3 ] || fail "prometheus findings series [$nsev]"
up=$(q 'up{job="cpushield"}' | jq -r '.data.result[0].value[1]')
[ "$up" = 1 ] || fail "prometheus up [$up]"
# The Grafana dashboard's queries (one a line, in $DIR/dashboard-queries): how many
# series each returns from this Prometheus, retried while a rate still lacks samples;
# and the scrape they are checked against.
curl -sf http://127.0.0.1:$PORT/metrics > "$DIR/scrape.txt"
: > "$DIR/dashboard-results"
while IFS= read -r expr; do
  n=0
  for i in $(seq 20); do
    n=$(q "$expr" | jq -r '.data.result | length' 2>/dev/null)
    [ "${n:-0}" -ge 1 ] 2>/dev/null && break
    sleep 0.5
  done
  printf '%s\t%s\n' "${n:-0}" "$expr" >> "$DIR/dashboard-results"
done < "$DIR/dashboard-queries"
kill $PROM; wait $PROM
kill -TERM $AGENT; wait $AGENT; rc=$?
[ $rc = 0 ] || fail "agent exit $rc after SIGTERM: $(cat $LOG)"
grep -q 'shield reset (on_stop = "reset")' "$LOG" || fail "no reset on stop: $(cat $LOG)"
[ "$(masks)" = '"procs":"","irqs":"","ltmr":"",' ] || fail "masks after the agent stopped: $(masks)"
echo "agent log:"; cat "$LOG"
echo SCENARIO-DONE
"#;

/// Every PromQL query of the Grafana dashboard (dist/grafana/cpushield.json),
/// with its template variables as a Grafana of one node would expand them:
/// `$instance` every node, `$__rate_interval` 20 s (the test scrapes every
/// second). With the panel's title.
fn dashboard_queries() -> Vec<(String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dist/grafana/cpushield.json");
    let text = std::fs::read_to_string(&path).expect("dist/grafana/cpushield.json");
    let dashboard: serde_json::Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"]
                .as_str()
                .expect("a Prometheus query has an expr");
            let expr = expr
                .replace("$instance", ".+")
                .replace("$__rate_interval", "20s");
            out.push((panel["title"].as_str().unwrap_or("?").to_string(), expr));
        }
    }
    assert!(out.len() >= 8, "the dashboard has too few queries: {out:?}");
    out
}

/// The metric names a query uses (every name is cpushield's own).
fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("cpushield_") {
        let name: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        rest = &rest[at + name.len()..];
        names.push(name);
    }
    names
}

/// promtool parses every dashboard query (as recording rules).
fn promtool_parses(queries: &[(String, String)], dir: &Path) {
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, (_, expr)) in queries.iter().enumerate() {
        let quoted = serde_json::to_string(expr).unwrap();
        rules.push_str(&format!(
            "      - record: cpushield_dashboard:query{i}\n        expr: {quoted}\n"
        ));
    }
    let file = dir.join("dashboard-rules.yml");
    std::fs::write(&file, rules).unwrap();
    let check = Command::new("promtool")
        .args(["check", "rules"])
        .arg(&file)
        .output()
        .expect("run promtool");
    assert!(
        check.status.success(),
        "promtool does not parse a dashboard query: {}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
}

#[test]
fn the_agent_corrects_an_irq_moved_onto_the_shield_and_prometheus_scrapes_the_correction() {
    if let Err(why) = can_shield_here(&["unshare", "prometheus", "promtool", "curl", "jq"]) {
        skip(&why);
        return;
    }
    let rules =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dist/prometheus/cpushield-rules.yml");
    let check = Command::new("promtool")
        .args(["check", "rules"])
        .arg(&rules)
        .output()
        .expect("run promtool");
    assert!(
        check.status.success(),
        "promtool check rules: {}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    let dir = tempfile::tempdir().unwrap();
    let queries = dashboard_queries();
    promtool_parses(&queries, dir.path());
    let lines: Vec<&str> = queries.iter().map(|(_, e)| e.as_str()).collect();
    std::fs::write(
        dir.path().join("dashboard-queries"),
        lines.join("\n") + "\n",
    )
    .unwrap();
    let state = dir.path().join("state");
    let before = system_state();
    let (cfg, log) = (
        dir.path().join("cpushield.toml"),
        dir.path().join("agent.log"),
    );
    let (port, pport) = (free_port().to_string(), free_port().to_string());
    // A scenario that stops half way takes the agent and Prometheus with its
    // namespace; the helper then resets from the same state dir.
    let text = run_scenario_in_pid_namespace(
        SCENARIO,
        &[
            ("CFG", cfg.as_os_str()),
            ("LOG", log.as_os_str()),
            ("DIR", dir.path().as_os_str()),
            ("PORT", port.as_ref()),
            ("PPORT", pport.as_ref()),
            ("VERSION", env!("CARGO_PKG_VERSION").as_ref()),
        ],
        &state,
    );
    // The IRQ the scenario spread over CPU 1 keeps that mask after reset (its
    // owner's request); put the original back, then everything else must be
    // exactly as before.
    if let Ok(written) = std::fs::read_to_string(dir.path().join("written")) {
        let (irq, mask) = written.trim().split_once(' ').expect("IRQ MASK");
        let path = format!("/proc/irq/{irq}/smp_affinity");
        let now = std::fs::read_to_string(&path).unwrap_or_default();
        let original = before
            .iter()
            .find(|(p, _)| *p == path)
            .map(|(_, v)| v.clone());
        if let Some(original) = original {
            let _ = std::fs::write(&path, original.trim());
        }
        assert_eq!(
            u64::from_str_radix(now.trim().replace(',', "").as_str(), 16).ok(),
            u64::from_str_radix(mask, 16).ok(),
            "reset gives IRQ {irq} the mask written while shielded (its requested affinity)"
        );
    }
    assert_eq!(before, system_state(), "IRQs or sysctls differ after reset");
    support::assert_no_shield_cgroups();
    assert!(!text.contains("ASSERT-FAIL"), "{text}");
    assert!(text.contains("SCENARIO-DONE"), "{text}");
    eprintln!("{text}");
    // The dashboard: every metric a panel names is one the agent served in
    // this run, and every query returned data from this Prometheus.
    let scrape = std::fs::read_to_string(dir.path().join("scrape.txt")).expect("scrape saved");
    let served = |name: &str| {
        scrape.lines().any(|l| {
            l.strip_prefix(name)
                .is_some_and(|r| r.starts_with(['{', ' ']))
        })
    };
    for (title, expr) in &queries {
        for name in metric_names(expr) {
            assert!(
                served(&name),
                "panel {title:?}: the agent serves no {name}: {expr}"
            );
        }
    }
    let results =
        std::fs::read_to_string(dir.path().join("dashboard-results")).expect("results saved");
    let counted: Vec<(usize, &str)> = results
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(n, e)| (n.parse().unwrap_or(0), e))
        .collect();
    assert_eq!(counted.len(), queries.len(), "{results}");
    for ((title, expr), (n, queried)) in queries.iter().zip(&counted) {
        assert_eq!(expr, queried);
        assert!(
            *n >= 1,
            "panel {title:?}: no data from Prometheus for {expr}"
        );
    }
}

/// The run-queue wait (ns) of thread `tid` of `pid`: schedstat's second field.
fn run_queue_wait_ns(pid: i32, tid: i32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat")).unwrap();
    text.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn on_a_vms_host_one_look_of_the_agent_counts_each_vcpus_run_queue_wait_labelled_by_vm_and_vcpu() {
    let qemu = support::TestQemu::start("cpushield-agent-test");
    let pid = qemu.pid();
    let vcpus: Vec<(u32, i32)> = (0..2)
        .map(|n| (n, qemu.thread(&format!("CPU {n}/TCG")).unwrap()))
        .collect();
    let before: Vec<u64> = vcpus
        .iter()
        .map(|(_, t)| run_queue_wait_ns(pid, *t))
        .collect();
    let state = tempfile::tempdir().unwrap();
    let out = Command::new(support::bin())
        .args(["agent", "--once"])
        .env("CPUSHIELD_STATE_DIR", state.path())
        .output()
        .expect("cpushield runs");
    assert!(out.status.success(), "agent --once: {out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    for ((vcpu, tid), was) in vcpus.iter().zip(before) {
        let series = format!(
            "cpushield_vcpu_ready_seconds_total{{vm=\"cpushield-agent-test\",pid=\"{pid}\",vcpu=\"{vcpu}\"}} "
        );
        let value: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix(&series))
            .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
            .parse()
            .unwrap();
        let now = run_queue_wait_ns(pid, *tid);
        assert!(
            was as f64 / 1e9 - 1e-9 <= value && value <= now as f64 / 1e9 + 1e-9,
            "vCPU {vcpu}: {value} s is not its thread's run-queue wait ({was}..{now} ns)"
        );
    }
}
