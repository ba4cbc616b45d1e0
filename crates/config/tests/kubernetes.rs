//! The Kubernetes manifests (deploy/kubernetes) carry a cpushield.toml and
//! the places the agent reads and serves it; these tests read the very YAML
//! files, so the manifests and the config format cannot drift apart.

use cpushield_config::{Config, DEFAULT_PATH};
use cpushield_cpuset::CpuSet;
use cpushield_shield::ShieldMasks;
use serde::Deserialize;
use serde_yaml_ng::Value;
use std::collections::BTreeMap;

const CONFIGMAP: &str = include_str!("../../../deploy/kubernetes/configmap.yaml");
const DAEMONSET: &str = include_str!("../../../deploy/kubernetes/daemonset.yaml");

#[derive(Deserialize)]
struct ConfigMap {
    kind: String,
    metadata: Metadata,
    data: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct Metadata {
    name: String,
}

fn configmap() -> ConfigMap {
    let map: ConfigMap = serde_yaml_ng::from_str(CONFIGMAP).expect("configmap.yaml is YAML");
    assert_eq!(map.kind, "ConfigMap");
    map
}

/// The cpushield.toml of the ConfigMap, parsed by the config crate.
fn config() -> Config {
    let map = configmap();
    let text = map
        .data
        .get("cpushield.toml")
        .expect("the ConfigMap has the key cpushield.toml");
    Config::parse("deploy/kubernetes/configmap.yaml data.cpushield.toml", text)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn daemonset() -> Value {
    serde_yaml_ng::from_str(DAEMONSET).expect("daemonset.yaml is YAML")
}

/// The pod template's container (or init container) named `name`.
fn container<'a>(ds: &'a Value, list: &str, name: &str) -> &'a Value {
    ds["spec"]["template"]["spec"][list]
        .as_sequence()
        .unwrap_or_else(|| panic!("no {list}"))
        .iter()
        .find(|c| c["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("no container {name} in {list}"))
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_sequence()
        .map(|s| s.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

#[test]
fn the_configmap_holds_a_config_file_that_parses_and_shields_cpu_3() {
    let desired = config()
        .resolve(&CpuSet::parse_list("0-3").unwrap())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        desired.masks,
        ShieldMasks::all(&CpuSet::parse_list("3").unwrap())
    );
    assert!(desired.irq_pins.is_empty());
}

#[test]
fn a_key_the_config_does_not_know_in_the_configmap_would_fail_this_test() {
    // The same extraction as above, on the ConfigMap with one key misspelt.
    let broken = CONFIGMAP.replace("on_stop =", "on_stopp =");
    assert_ne!(
        broken, CONFIGMAP,
        "the ConfigMap sets on_stop: update the test"
    );
    let map: ConfigMap = serde_yaml_ng::from_str(&broken).unwrap();
    let err = Config::parse("configmap.yaml", &map.data["cpushield.toml"])
        .expect_err("an unknown key must be refused");
    assert_eq!(err.key, "agent.on_stopp", "{err}");
}

#[test]
fn the_agent_listens_on_every_pod_address_at_the_port_the_daemonset_declares() {
    let listen = config().agent_listen();
    // The pod has its own network namespace: the probes and Prometheus reach
    // the pod's IP, so a loopback address would fail every probe.
    assert!(listen.ip().is_unspecified(), "{listen}");
    let ds = daemonset();
    let agent = container(&ds, "containers", "agent");
    let port = agent["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|p| p["name"].as_str() == Some("metrics"))
        .expect("a port named metrics");
    assert_eq!(
        port["containerPort"].as_u64(),
        Some(u64::from(listen.port()))
    );
    let annotations = &ds["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(
        annotations["prometheus.io/port"].as_str(),
        Some(listen.port().to_string().as_str())
    );
    assert_eq!(
        ds["spec"]["template"]["spec"]["hostNetwork"].as_bool(),
        Some(false)
    );
}

#[test]
fn the_daemonset_mounts_the_configmap_where_apply_and_the_agent_read_it() {
    let ds = daemonset();
    let volume = ds["spec"]["template"]["spec"]["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|v| v["name"].as_str() == Some("config"))
        .expect("a volume named config");
    assert_eq!(
        volume["configMap"]["name"].as_str(),
        Some(configmap().metadata.name.as_str())
    );
    let dir = DEFAULT_PATH.rsplit_once('/').unwrap().0;
    for (list, name, command) in [
        ("initContainers", "apply", "apply"),
        ("containers", "agent", "agent"),
    ] {
        let c = container(&ds, list, name);
        let mount = c["volumeMounts"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|m| m["name"].as_str() == Some("config"))
            .unwrap_or_else(|| panic!("{name} does not mount the config"));
        assert_eq!(mount["mountPath"].as_str(), Some(dir));
        assert_eq!(strings(&c["args"]), vec![command, "--config", DEFAULT_PATH]);
        assert_eq!(strings(&c["command"]).last(), Some(&"cpushield"));
    }
}
