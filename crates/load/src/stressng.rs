//! `--stress-ng "ARGS"`: the user's arguments split like a shell would, the
//! arguments we add (temporary files under the run directory, metrics to a
//! YAML file there), and the bogo-ops read back from that file.

/// Splits `text` into words: whitespace separates, single and double quotes
/// group, backslash escapes the next character.
pub fn split_args(text: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') | (None, '\\') => match chars.next() {
                Some(n) => {
                    word.push(n);
                    in_word = true;
                }
                None => return Err("a trailing backslash escapes nothing".into()),
            },
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if let Some(q) = quote {
        return Err(format!("unbalanced {q} quote"));
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

/// The full argument list: the user's, then ours (temporary files in
/// `temp_dir`, metrics to `yaml`).
pub fn command_args(user: &[String], temp_dir: &str, yaml: &str) -> Vec<String> {
    let mut args = user.to_vec();
    args.extend(
        ["--temp-path", temp_dir, "--yaml", yaml, "--metrics-brief"]
            .iter()
            .map(|s| s.to_string()),
    );
    args
}

/// (stressor, bogo ops) from the `metrics:` list of stress-ng's YAML output.
pub fn parse_metrics_yaml(text: &str) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let t = line.trim();
        if let Some(name) = t.strip_prefix("- stressor:") {
            current = Some(name.trim().to_string());
        } else if let Some(ops) = t.strip_prefix("bogo-ops:") {
            if let (Some(name), Ok(ops)) = (current.take(), ops.trim().parse::<u64>()) {
                out.push((name, ops));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_on_spaces_and_quotes_group() {
        assert_eq!(
            split_args(r#"--sock 1  --hdd-opts "direct,sync" --x 'a b' c\ d"#).unwrap(),
            [
                "--sock",
                "1",
                "--hdd-opts",
                "direct,sync",
                "--x",
                "a b",
                "c d"
            ]
        );
        assert_eq!(split_args("  ").unwrap(), Vec::<String>::new());
        assert_eq!(split_args("''").unwrap(), [""]);
    }

    #[test]
    fn unbalanced_quotes_are_refused() {
        assert!(split_args("--x 'oops").unwrap_err().contains("unbalanced"));
    }

    #[test]
    fn our_arguments_follow_the_users() {
        let a = command_args(&["--cpu".into(), "1".into()], "/d", "/d/m.yaml");
        assert_eq!(&a[..2], ["--cpu", "1"]);
        assert!(a.windows(2).any(|w| w == ["--temp-path", "/d"]));
        assert!(a.windows(2).any(|w| w == ["--yaml", "/d/m.yaml"]));
    }

    #[test]
    fn bogo_ops_are_read_per_stressor() {
        let yaml = "---\nsystem-info:\n      cpus: 2\n\nmetrics:\n    - stressor: fp\n      bogo-ops: 144\n      bogo-ops-per-second-real-time: 139.8\n    - stressor: sock\n      bogo-ops: 9000\n...\n";
        assert_eq!(
            parse_metrics_yaml(yaml),
            [("fp".to_string(), 144), ("sock".to_string(), 9000)]
        );
    }
}
