//! Prometheus text for node_exporter's textfile collector, from the
//! OpenMetrics exposition `prometheus-client` encodes: the collector reads
//! the older text format, which has no `# EOF` or `# UNIT` lines and names a
//! counter's `_total` series in its `# TYPE` and `# HELP` lines. Shared by the
//! agent's `--textfile` and `vm watch --textfile`.

/// Converts the OpenMetrics exposition to the Prometheus text format.
pub fn to_textfile(open_metrics: &str) -> String {
    let counters: Vec<String> = open_metrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .map(str::to_string)
        .collect();
    let mut out = String::new();
    for line in open_metrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let mut line = line.to_string();
        for prefix in ["# TYPE ", "# HELP "] {
            if let Some(rest) = line.strip_prefix(prefix) {
                if let Some((name, tail)) = rest.split_once(' ') {
                    if counters.iter().any(|c| c == name) {
                        line = format!("{prefix}{name}_total {tail}");
                    }
                }
            }
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// Replaces the file at `path` with `text` at once (written beside it, then
/// renamed), so that the collector never reads half a file.
pub fn write(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("prom.{}.tmp", std::process::id()));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_is_typed_by_its_total_series_and_eof_and_unit_lines_go() {
        let open = "# HELP x_seconds Time.\n# TYPE x_seconds counter\n# UNIT x_seconds seconds\nx_seconds_total 1.5\n# TYPE g gauge\ng 2\n# EOF\n";
        assert_eq!(
            to_textfile(open),
            "# HELP x_seconds_total Time.\n# TYPE x_seconds_total counter\nx_seconds_total 1.5\n# TYPE g gauge\ng 2\n"
        );
    }
}
