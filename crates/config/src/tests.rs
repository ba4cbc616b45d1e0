use super::*;
use std::time::Duration;

fn cpus(s: &str) -> CpuSet {
    CpuSet::parse_list(s).unwrap()
}

fn online() -> CpuSet {
    cpus("0-3")
}

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse("/etc/cpushield/cpushield.toml", text)
}

fn resolve(text: &str) -> Result<Desired, ConfigError> {
    parse(text)?.resolve(&online())
}

/// The error of `text`, checked to be one line naming the file, `line` and `key`.
fn error_names(text: &str, line: usize, key: &str) -> ConfigError {
    let err = resolve(text).expect_err("the file must be refused");
    let shown = err.to_string();
    assert_eq!(err.line, line, "{shown}");
    assert_eq!(err.key, key, "{shown}");
    assert!(
        shown.starts_with(&format!(
            "/etc/cpushield/cpushield.toml:{line}: key `{key}`"
        )),
        "{shown}"
    );
    assert!(!shown.contains('\n'), "more than one line: {shown}");
    assert!(shown.contains("; "), "no remedy: {shown}");
    err
}

#[test]
fn the_shipped_example_parses_and_shields_cpu_1() {
    let text = include_str!("../../../dist/cpushield.toml");
    let config = Config::parse("dist/cpushield.toml", text).unwrap();
    let desired = config.resolve(&cpus("0-1")).unwrap();
    assert_eq!(desired.masks, ShieldMasks::all(&cpus("1")));
    assert!(desired.irq_pins.is_empty());
    assert_eq!(config.agent_listen().to_string(), DEFAULT_LISTEN);
}

#[test]
fn an_empty_file_shields_nothing() {
    assert_eq!(resolve("").unwrap().masks, ShieldMasks::default());
}

#[test]
fn keys_add_their_cpus_to_their_masks() {
    let d = resolve("[shield]\nall = \"1\"\nprocs = \"2\"\nirqs = \"3\"\n").unwrap();
    assert_eq!(d.masks.procs, cpus("1-2"));
    assert_eq!(d.masks.irqs, cpus("1,3"));
    assert_eq!(d.masks.ltmr, cpus("1"));
}

#[test]
fn isolated_means_all_three_and_reserved_means_every_other_cpu() {
    let iso = resolve("[shield]\nisolated = \"2-3\"\n").unwrap();
    assert_eq!(iso.masks, ShieldMasks::all(&cpus("2-3")));
    let res = resolve("[shield]\nreserved = \"0-1\"\n").unwrap();
    assert_eq!(res.masks, ShieldMasks::all(&cpus("2-3")));
    let both = resolve("[shield]\nisolated = \"3\"\nreserved = \"0-1\"\n").unwrap();
    assert_eq!(both.masks, ShieldMasks::all(&cpus("2-3")));
}

#[test]
fn an_unknown_key_names_its_line_and_key() {
    let err = error_names(
        "[shield]\nprocs = \"1\"\nprocz = \"2\"\n",
        3,
        "shield.procz",
    );
    assert!(err.problem.contains("unknown field"), "{err}");
}

#[test]
fn an_unknown_table_names_its_line() {
    error_names(
        "[shield]\nprocs = \"1\"\n\n[shields]\nx = 1\n",
        4,
        "shields",
    );
}

#[test]
fn a_wrong_type_names_its_line_and_key() {
    error_names(
        "[settings]\nltmr_sysctls = \"yes\"\n",
        2,
        "settings.ltmr_sysctls",
    );
}

#[test]
fn broken_toml_names_its_line() {
    let err = resolve("[shield]\nprocs = \"1\n").unwrap_err();
    assert_eq!(err.line, 2, "{err}");
}

#[test]
fn a_bad_cpu_list_names_its_line_and_key() {
    let err = error_names("[shield]\n\nirqs = \"3-1\"\n", 3, "shield.irqs");
    assert!(err.remedy.contains("CPU list"), "{err}");
}

#[test]
fn an_offline_cpu_names_its_line_and_key() {
    let err = error_names("[shield]\nltmr = \"9\"\n", 2, "shield.ltmr");
    assert!(err.problem.contains("not online"), "{err}");
}

#[test]
fn shielding_every_cpu_is_refused_at_its_key() {
    error_names("[shield]\nprocs = \"0-3\"\n", 2, "shield.procs");
    error_names("[shield]\nall = \"0-3\"\nirqs = \"1\"\n", 2, "shield.all");
    error_names(
        "[shield]\nprocs = \"1\"\nirqs = \"0-3\"\n",
        3,
        "shield.irqs",
    );
}

#[test]
fn overlapping_isolated_and_reserved_are_refused() {
    error_names(
        "[shield]\nisolated = \"1-2\"\nreserved = \"0-1\"\n",
        3,
        "shield.reserved",
    );
}

#[test]
fn an_empty_reserved_list_is_refused() {
    error_names("[shield]\nreserved = \"\"\n", 2, "shield.reserved");
}

#[test]
fn ltmr_cpus_without_the_sysctls_are_refused() {
    error_names(
        "[shield]\nall = \"1\"\n[settings]\nltmr_sysctls = false\n",
        4,
        "settings.ltmr_sysctls",
    );
    let ok = resolve("[shield]\nprocs = \"1\"\n[settings]\nltmr_sysctls = false\n").unwrap();
    assert_eq!(ok.masks.procs, cpus("1"));
}

#[test]
fn irq_pins_by_name_or_number_are_read() {
    let d = resolve(
        "[[irq]]\nname = \"eth0-rx-0\"\ncpus = \"2\"\n[[irq]]\nnumber = 24\ncpus = \"0-1\"\n",
    )
    .unwrap();
    assert_eq!(
        d.irq_pins,
        vec![
            (IrqRef::Name("eth0-rx-0".into()), cpus("2")),
            (IrqRef::Number(24), cpus("0-1")),
        ]
    );
    assert_eq!(d.first_irq_line, Some(3));
}

#[test]
fn an_irq_pin_with_both_or_neither_name_is_refused() {
    error_names("[[irq]]\ncpus = \"2\"\n", 2, "irq");
    error_names(
        "[[irq]]\nname = \"x\"\nnumber = 3\ncpus = \"2\"\n",
        4,
        "irq",
    );
}

#[test]
fn an_irq_pin_to_offline_cpus_is_refused() {
    error_names("[[irq]]\nnumber = 3\ncpus = \"8\"\n", 3, "irq.cpus");
}

#[test]
fn access_grants_are_checked() {
    let ok = "[[access.grant]]\ngroup = \"rt\"\ncpus = \"1\"\nmax_priority = 50\n";
    assert!(parse(ok).is_ok());
    error_names(
        "[[access.grant]]\ngroup = \"rt\"\ncpus = \"1\"\nmax_priority = 100\n",
        4,
        "access.grant.max_priority",
    );
    error_names(
        "[[access.grant]]\ngroup = \"r t\"\ncpus = \"1\"\nmax_priority = 5\n",
        2,
        "access.grant.group",
    );
    error_names(
        "[[access.grant]]\ngroup = \"rt\"\ncpus = \"\"\nmax_priority = 5\n",
        3,
        "access.grant.cpus",
    );
    error_names(
        "[[access.grant]]\ngroup = \"rt\"\ncpus = \"1\"\n",
        1,
        "access.grant",
    );
}

#[test]
fn a_grant_of_an_unshielded_cpu_is_refused() {
    let grant = "[[access.grant]]\ngroup = \"rt\"\ncpus = \"1-2\"\nmax_priority = 5\n";
    let err = error_names(
        &format!("[shield]\nall = \"1\"\n{grant}"),
        5,
        "access.grant.cpus",
    );
    assert!(err.problem.contains("CPU(s) 2"), "{err}");
    assert!(resolve(&format!("[shield]\nall = \"1-2\"\n{grant}")).is_ok());
}

#[test]
fn agent_settings_are_checked() {
    let c =
        parse("[agent]\nlisten = \"0.0.0.0:9100\"\ninterval = \"500ms\"\non_stop = \"reset\"\n")
            .unwrap();
    assert_eq!(c.agent_listen().to_string(), "0.0.0.0:9100");
    error_names("[agent]\nlisten = \"localhost\"\n", 2, "agent.listen");
    error_names("[agent]\n\ninterval = \"soon\"\n", 3, "agent.interval");
    error_names("[agent]\ninterval = \"1ms\"\n", 2, "agent.interval");
    error_names("[agent]\ninterval = \"99999999y\"\n", 2, "agent.interval");
    error_names("[agent]\nlisten = \"127.0.0.1:70000\"\n", 2, "agent.listen");
    error_names("[agent]\non_stop = \"halt\"\n", 2, "agent.on_stop");
}

#[test]
fn the_same_masks_plan_nothing() {
    let m = ShieldMasks::all(&cpus("1"));
    let p = plan(&m, &m, &online());
    assert!(p.is_empty());
    assert!(p.lines().is_empty());
}

#[test]
fn an_empty_file_over_a_shield_plans_a_reset() {
    let p = plan(
        &ShieldMasks::all(&cpus("1")),
        &ShieldMasks::default(),
        &online(),
    );
    assert_eq!(p.changes, vec![Change::Reset]);
    assert_eq!(p.lines().len(), 1);
}

#[test]
fn a_changed_file_grows_then_shrinks_one_line_per_kind() {
    let current = ShieldMasks::all(&cpus("1"));
    let desired = ShieldMasks::all(&cpus("2"));
    let p = plan(&current, &desired, &online());
    assert_eq!(
        p.changes,
        vec![
            Change::Shield(desired.clone()),
            Change::Unshield(current.clone())
        ]
    );
    assert_eq!(
        p.lines(),
        vec![
            "shield CPU 2 from processes",
            "shield CPU 2 from interrupts",
            "shield CPU 2 from the local timer",
            "unshield CPU 1 from processes",
            "unshield CPU 1 from interrupts",
            "unshield CPU 1 from the local timer",
        ]
    );
}

#[test]
fn when_the_union_would_cover_every_cpu_the_shield_shrinks_first() {
    let two = cpus("0-1");
    let current = ShieldMasks::all(&cpus("1"));
    let desired = ShieldMasks::all(&cpus("0"));
    let p = plan(&current, &desired, &two);
    assert_eq!(
        p.changes,
        vec![Change::Unshield(current), Change::Shield(desired)]
    );
}

#[test]
fn only_the_difference_is_planned() {
    let current = ShieldMasks {
        procs: cpus("1"),
        ..Default::default()
    };
    let desired = ShieldMasks::all(&cpus("1"));
    let p = plan(&current, &desired, &online());
    assert_eq!(
        p.lines(),
        vec![
            "shield CPU 1 from interrupts",
            "shield CPU 1 from the local timer"
        ]
    );
}

#[test]
fn grants_of_several_groups_need_a_socket_group_and_it_must_be_granted() {
    let two = "[[access.grant]]\ngroup = \"rt\"\ncpus = \"1\"\nmax_priority = 50\n\
               [[access.grant]]\ngroup = \"av\"\ncpus = \"1\"\nmax_priority = 10\n";
    let err = error_names(two, 2, "access.socket_group");
    assert!(err.to_string().contains("av, rt"), "{err}");
    let ok = parse(&format!("[access]\nsocket_group = \"rt\"\n{two}")).unwrap();
    assert_eq!(ok.socket_group().as_deref(), Some("rt"));
    assert_eq!(ok.grants().len(), 2);
    assert_eq!(ok.grants()[1].group, "av");
    assert_eq!(ok.grants()[1].max_priority, 10);
    error_names(
        "[access]\nsocket_group = \"other\"\n[[access.grant]]\ngroup = \"rt\"\ncpus = \"1\"\nmax_priority = 5\n",
        2,
        "access.socket_group",
    );
}

#[test]
fn the_socket_is_the_default_path_unless_an_absolute_one_is_named() {
    let one = parse("[[access.grant]]\ngroup = \"rt\"\ncpus = \"1\"\nmax_priority = 5\n").unwrap();
    assert_eq!(one.socket_group().as_deref(), Some("rt"));
    assert_eq!(one.socket_path(), std::path::PathBuf::from(DEFAULT_SOCKET));
    let named = parse("[access]\nsocket = \"/tmp/a.sock\"\n").unwrap();
    assert_eq!(named.socket_path(), std::path::PathBuf::from("/tmp/a.sock"));
    assert_eq!(named.socket_group(), None);
    error_names("[access]\nsocket = \"a.sock\"\n", 2, "access.socket");
}

#[test]
fn the_latency_probe_is_named_by_its_cpu_with_a_limit_and_priority() {
    let c = parse("[agent]\nlatency_cpu = 1\nlatency_limit = \"50us\"\n").unwrap();
    let p = c.latency_probe().unwrap();
    assert_eq!(
        (p.cpu, p.limit, p.priority),
        (1, Duration::from_micros(50), 50)
    );
    assert!(parse("").unwrap().latency_probe().is_none());
    error_names(
        "[agent]\nlatency_cpu = 1\nlatency_priority = 0\n",
        3,
        "agent.latency_priority",
    );
    error_names(
        "[agent]\nlatency_limit = \"fast\"\n",
        2,
        "agent.latency_limit",
    );
}

#[test]
fn the_latency_probe_runs_only_on_a_shielded_cpu() {
    error_names(
        "[shield]\nall = \"1\"\n[agent]\nlatency_cpu = 0\n",
        4,
        "agent.latency_cpu",
    );
    assert!(resolve("[shield]\nall = \"1\"\n[agent]\nlatency_cpu = 1\n").is_ok());
}

#[test]
fn one_interval_check_serves_the_file_and_the_flag() {
    assert_eq!(parse_interval("500ms"), Ok(Duration::from_millis(500)));
    assert_eq!(parse_interval("2"), Ok(Duration::from_secs(2)));
    assert_eq!(parse_interval("10ms"), Ok(MIN_INTERVAL));
    assert_eq!(parse_interval("365days"), Ok(MAX_INTERVAL));
    for (text, problem) in [
        ("1ns", "'1ns' is shorter than 10ms"),
        ("0", "'0' is shorter than 10ms"),
        ("99999999y", "'99999999y' is longer than 365 days"),
        ("99999999999999999999999y", "is longer than 365 days"),
        ("1e300", "is longer than 365 days"),
        ("abc", "'abc' is not a duration"),
        ("-1s", "'-1s' is negative"),
        ("NaN", "'NaN' is not a duration"),
    ] {
        let err = parse_interval(text).expect_err(text);
        assert!(err.contains(problem), "{text}: {err}");
    }
    let err = parse("[agent]\ninterval = \"1ns\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.ends_with(&format!("'1ns' is shorter than 10ms; {INTERVAL_REMEDY}")),
        "{err}"
    );
    let c = parse("[agent]\ninterval = \"250ms\"\non_stop = \"reset\"\n").unwrap();
    assert_eq!(c.agent_interval(), Some(Duration::from_millis(250)));
    assert!(c.agent_resets_on_stop());
    assert!(!parse("").unwrap().agent_resets_on_stop());
}

#[test]
fn a_listen_address_names_what_is_wrong_with_it() {
    assert_eq!(
        parse_listen("127.0.0.1:0").unwrap().to_string(),
        "127.0.0.1:0"
    );
    assert_eq!(
        parse_listen("[::1]:9477").unwrap().to_string(),
        "[::1]:9477"
    );
    for (text, problem) in [
        ("127.0.0.1:70000", "port 70000 is above 65535"),
        ("127.0.0.1", "'127.0.0.1' has no port"),
        ("127.0.0.1:http", "'http' is not a port number"),
        ("localhost:9477", "'localhost' is not an IP address"),
    ] {
        let err = parse_listen(text).expect_err(text);
        assert!(err.contains(problem), "{text}: {err}");
    }
}

#[test]
fn a_file_that_is_not_utf8_is_refused_at_its_byte_and_line() {
    let err = Config::from_bytes("/etc/c.toml", b"[agent]\nlisten = \"\xff\"\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "/etc/c.toml:2: not UTF-8 text: byte 18 (0xff) starts no UTF-8 character; \
         save the file as UTF-8 (TOML is UTF-8 only)"
    );
    assert!(Config::from_bytes("/etc/c.toml", b"[agent]\n").is_ok());
}

#[test]
fn a_file_that_cannot_be_read_is_named_with_what_is_wrong() {
    let dir = std::env::temp_dir();
    let is_dir = std::fs::read(&dir).unwrap_err();
    let text = unreadable(&dir, &is_dir);
    assert!(text.contains("is a directory, not a file"), "{text}");
    assert!(!text.contains("create it"), "{text}");
    let missing = std::io::Error::from(std::io::ErrorKind::NotFound);
    let text = unreadable(Path::new("/etc/x.toml"), &missing);
    assert!(
        text.starts_with("the config file /etc/x.toml does not exist: create it"),
        "{text}"
    );
}

#[test]
fn a_runtime_section_round_trips_through_its_toml_lines() {
    let text = "[shield]\nall = \"1\"\n\n[runtime]\nsched_rt_runtime_us = -1\ntimer_migration = 0\nstat_interval = 120\npreempt = \"full\"\ncpufreq_governor = \"performance\"\nenergy_performance_preference = \"performance\"\nidle_max_latency_us = 0\nsmt_siblings_offline = true\n";
    let config = parse(text).unwrap();
    config.resolve(&online()).unwrap();
    let settings = config.runtime();
    assert_eq!(settings.sched_rt_runtime_us, Some(-1));
    assert!(settings.smt_siblings_offline && settings.per_cpu());
    let again = format!(
        "[shield]\nall = \"1\"\n\n[runtime]\n{}\n",
        settings.toml_lines().join("\n")
    );
    assert_eq!(parse(&again).unwrap().runtime(), settings);
    assert_eq!(config.runtime_line("runtime.preempt"), 8);
}

#[test]
fn bad_runtime_values_name_their_line_and_key() {
    let head = "[shield]\nall = \"1\"\n[runtime]\n";
    for (body, key) in [
        ("sched_rt_runtime_us = -2\n", "runtime.sched_rt_runtime_us"),
        ("timer_migration = 2\n", "runtime.timer_migration"),
        ("stat_interval = 0\n", "runtime.stat_interval"),
        ("preempt = \"rt\"\n", "runtime.preempt"),
        ("cpufreq_governor = \"a b\"\n", "runtime.cpufreq_governor"),
        (
            "energy_performance_preference = \"\"\n",
            "runtime.energy_performance_preference",
        ),
        ("nohz_full = \"1\"\n", "runtime.nohz_full"),
    ] {
        error_names(&format!("{head}{body}"), 4, key);
    }
}

#[test]
fn runtime_settings_need_a_shield_and_per_cpu_ones_a_process_shield() {
    error_names("[runtime]\ntimer_migration = 0\n", 1, "runtime");
    error_names(
        "[shield]\nirqs = \"1\"\n[runtime]\ncpufreq_governor = \"performance\"\n",
        3,
        "runtime",
    );
    resolve("[shield]\nirqs = \"1\"\n[runtime]\ntimer_migration = 0\n").unwrap();
}

/// `text` as cpushield.toml, with `variables` as the tuned variables file it reads.
fn resolve_with_tuned(text: &str, variables: &str) -> Result<Desired, ConfigError> {
    let mut config = parse(text)?;
    let path = config
        .tuned_variables_path()
        .expect("isolated = \"tuned\" names a variables file");
    config.read_tuned_variables(&path.display().to_string(), variables)?;
    config.resolve(&online())
}

#[test]
fn isolated_tuned_shields_the_cpus_of_tuneds_isolated_cores_from_all_three() {
    let d = resolve_with_tuned(
        "[shield]\nisolated = \"tuned\"\n",
        "# cpu-partitioning\nisolated_cores=2-3\n",
    )
    .unwrap();
    assert_eq!(d.masks, ShieldMasks::all(&cpus("2-3")));
    let config = parse("[shield]\nisolated = \"tuned\"\n").unwrap();
    assert_eq!(
        config.tuned_variables_path().unwrap(),
        Path::new(TUNED_VARIABLES)
    );
    let realtime = parse(
        "[shield]\nisolated = \"tuned\"\ntuned_variables = \"/etc/tuned/realtime-variables.conf\"\n",
    )
    .unwrap();
    assert_eq!(
        realtime.tuned_variables_path().unwrap(),
        Path::new("/etc/tuned/realtime-variables.conf")
    );
    assert!(parse("[shield]\nisolated = \"3\"\n")
        .unwrap()
        .tuned_variables_path()
        .is_none());
}

#[test]
fn a_tuned_variables_file_that_cannot_be_used_names_its_file_line_and_key() {
    let text = "[shield]\nisolated = \"tuned\"\n";
    let file = format!("{TUNED_VARIABLES}:");
    for (variables, line, problem) in [
        // Debian's shipped default: tuned computes it at load time.
        (
            "# Reserve 1 core per socket\nisolated_cores=${f:calc_isolated_cores:1}\n",
            2,
            "computed by tuned",
        ),
        ("isolated_cores=two\n", 1, "not a CPU list"),
        ("no_balance_cores=5\n", 0, "is not set"),
        ("x=1\n[broken\n", 2, "does not close"),
    ] {
        let err = resolve_with_tuned(text, variables).expect_err(variables);
        let shown = err.to_string();
        assert!(shown.starts_with(&format!("{file}{line}:")), "{shown}");
        assert!(shown.contains(problem), "{shown}");
        assert!(!shown.contains('\n') && shown.contains("; "), "{shown}");
        if line != 2 || !problem.contains("close") {
            assert!(shown.contains("key `isolated_cores`"), "{shown}");
        }
    }
    // tuned's CPUs must be online, as any other key's.
    let err = resolve_with_tuned(text, "isolated_cores=6-7\n").unwrap_err();
    assert_eq!((err.line, err.key.as_str()), (2, "shield.isolated"));
    // Every CPU isolated leaves nothing for the system.
    let err = resolve_with_tuned(text, "isolated_cores=0-3\n").unwrap_err();
    assert_eq!(err.key, "shield.isolated");
}

#[test]
fn isolated_tuned_unread_or_tuned_variables_alone_is_refused() {
    error_names("[shield]\nisolated = \"tuned\"\n", 2, "shield.isolated");
    assert_eq!(
        parse("[shield]\nall = \"3\"\ntuned_variables = \"/etc/tuned/x.conf\"\n")
            .unwrap_err()
            .key,
        "shield.tuned_variables"
    );
    assert_eq!(
        parse("[shield]\nisolated = \"tuned\"\ntuned_variables = \"x.conf\"\n")
            .unwrap_err()
            .line,
        3
    );
    let config = parse("\n[shield]\nisolated = \"tuned\"\n").unwrap();
    let err = config.tuned_variables_unreadable(
        Path::new(TUNED_VARIABLES),
        &io::Error::from(io::ErrorKind::NotFound),
    );
    assert_eq!((err.line, err.key.as_str()), (3, "shield.isolated"));
    assert!(err.to_string().contains("does not exist"), "{err}");
}

#[test]
fn a_group_the_machine_lacks_is_refused_with_file_line_and_key() {
    let config =
        parse("[[access.grant]]\ngroup = \"nosuchgroup_zz\"\ncpus = \"1\"\nmax_priority = 10\n")
            .unwrap();
    let err = config.check_groups(&|name| name == "rt").unwrap_err();
    assert_eq!((err.line, err.key.as_str()), (2, "access.grant.group"));
    assert!(
        err.problem.contains("\"nosuchgroup_zz\" does not exist"),
        "{err}"
    );
    assert!(err.remedy.contains("groupadd nosuchgroup_zz"), "{err}");
    assert!(config.check_groups(&|_| true).is_ok());
}

#[test]
fn a_key_a_megabyte_long_is_named_by_its_start_and_its_length() {
    let key = "k".repeat(1_000_000);
    let err = parse(&format!("[shield]\n{key} = 1\n")).unwrap_err();
    let text = err.to_string();
    assert!(text.len() < 600, "{} bytes", text.len());
    assert!(text.contains("bytes)"), "{text}");
    assert!(text.contains("cpushield.toml:2: key `"), "{text}");
}

#[test]
fn the_shield_keys_are_read_in_a_fixed_order_whatever_the_files() {
    let c = parse("[shield]\nreserved = \"0\"\nall = \"1\"\n").unwrap();
    let keys = c.shield_keys().unwrap();
    let names: Vec<&str> = keys.iter().map(|(k, ..)| *k).collect();
    assert_eq!(names, ["shield.all", "shield.reserved"]);
    assert_eq!(keys[1].2, cpus("0"));
}

#[test]
fn the_masks_of_a_reserved_list_shield_every_other_online_cpu() {
    let c = parse("[shield]\nreserved = \"0\"\nirqs = \"1\"\n").unwrap();
    let masks = c.masks(&c.shield_keys().unwrap(), &online()).unwrap();
    assert_eq!(masks, ShieldMasks::all(&cpus("1-3")));
}

#[test]
fn a_grant_needs_its_cpus_shielded_from_processes() {
    let c = parse("[[access.grant]]\ngroup = \"rt\"\ncpus = \"2\"\nmax_priority = 5\n").unwrap();
    let err = c
        .check_uses_of_the_shield(&ShieldMasks::all(&cpus("1")))
        .expect_err("CPU 2 is not shielded");
    assert_eq!(err.key, "access.grant.cpus");
    assert!(c
        .check_uses_of_the_shield(&ShieldMasks::all(&cpus("2")))
        .is_ok());
}

#[test]
fn an_irq_pin_is_read_by_name_or_number_to_online_cpus() {
    let c = parse("[[irq]]\nnumber = 24\ncpus = \"0\"\n[[irq]]\nname = \"eth0\"\ncpus = \"1\"\n")
        .unwrap();
    let pins = c.irq_pins(&online()).unwrap();
    assert_eq!(
        pins,
        [
            (IrqRef::Number(24), cpus("0")),
            (IrqRef::Name("eth0".into()), cpus("1"))
        ]
    );
    assert_eq!(c.irq_pins(&cpus("0")).unwrap_err().key, "irq.cpus");
}
