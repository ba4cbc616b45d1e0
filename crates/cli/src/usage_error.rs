//! A command line clap rejects, said in one line like every other bad input:
//! what is wrong with which word, the hint clap has (a similar name, the
//! values allowed), and where the help is. clap's own report takes three or
//! more lines and ends with a usage block that names no fix.

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::Command;
use std::ffi::OsString;

/// The one line (without the `cpushield: error: ` prefix) for `error`, which
/// clap raised parsing `argv` (program name first) against `root`.
pub fn one_line(error: &clap::Error, root: &Command, argv: &[OsString]) -> String {
    let path = command_path(root, argv);
    let shown = path
        .iter()
        .map(|c| c.get_name())
        .collect::<Vec<_>>()
        .join(" ");
    let sub = path[1..]
        .iter()
        .map(|c| c.get_name())
        .collect::<Vec<_>>()
        .join(" ");
    let innermost = path.last().copied().unwrap_or(root);
    let mut line = match error.kind() {
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingSubcommand => {
            let names: Vec<&str> = innermost
                .get_subcommands()
                .filter(|s| !s.is_hide_set() && s.get_name() != "help")
                .map(|s| s.get_name())
                .collect();
            if names.is_empty() {
                format!("'{shown}' needs more arguments")
            } else {
                format!("'{shown}' needs a command: {}", names.join(", "))
            }
        }
        _ => first_paragraph(&error.render().to_string()),
    };
    if matches!(
        error.kind(),
        ErrorKind::UnknownArgument | ErrorKind::InvalidSubcommand
    ) {
        if let Some(stem) = line.strip_suffix(" found") {
            line = stem.to_string();
        }
        if !sub.is_empty() {
            line.push_str(&format!(" for '{sub}'"));
        }
    }
    for hint in hints(error) {
        line.push_str("; ");
        line.push_str(&hint);
    }
    format!("{line} (see: {shown} --help)")
}

/// The subcommands `argv` named, from `root` down (`[cpushield, measure,
/// latency]`). Words after `--` are the program `run` starts, not ours.
fn command_path<'a>(root: &'a Command, argv: &[OsString]) -> Vec<&'a Command> {
    let mut path = vec![root];
    for word in argv.iter().skip(1) {
        let Some(word) = word.to_str() else { continue };
        if word == "--" {
            break;
        }
        let current = path.last().copied().unwrap_or(root);
        if let Some(sub) = current.find_subcommand(word) {
            path.push(sub);
        }
    }
    path
}

/// clap's message up to its first blank line, in one line: the `error: `
/// prefix dropped, a list that follows a colon joined with commas, and
/// `[possible values: …]` kept as a clause.
fn first_paragraph(rendered: &str) -> String {
    let mut lines = rendered
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim);
    let first = lines.next().unwrap_or_default();
    let first = first.strip_prefix("error: ").unwrap_or(first).to_string();
    let rest: Vec<String> = lines
        .map(
            |l| match l.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                Some(inner) => inner.to_string(),
                None => l.to_string(),
            },
        )
        .collect();
    if rest.is_empty() {
        first
    } else if first.ends_with(':') {
        format!("{first} {}", rest.join(", "))
    } else {
        format!("{first}; {}", rest.join("; "))
    }
}

/// clap's suggestions for `error` ("did you mean …"), each one clause.
fn hints(error: &clap::Error) -> Vec<String> {
    let quoted = |v: &ContextValue| -> Option<String> {
        match v {
            ContextValue::String(s) => Some(format!("'{s}'")),
            ContextValue::Strings(list) if !list.is_empty() => Some(
                list.iter()
                    .map(|s| format!("'{s}'"))
                    .collect::<Vec<_>>()
                    .join(" or "),
            ),
            _ => None,
        }
    };
    let mut out = Vec::new();
    for kind in [
        ContextKind::SuggestedSubcommand,
        ContextKind::SuggestedCommand,
        ContextKind::SuggestedArg,
        ContextKind::SuggestedValue,
    ] {
        if let Some(names) = error.get(kind).and_then(quoted) {
            out.push(format!("did you mean {names}?"));
        }
    }
    if let Some(ContextValue::StyledStrs(tips)) = error.get(ContextKind::Suggested) {
        out.extend(tips.iter().map(|t| t.to_string()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Arg, ArgAction};

    fn cli() -> Command {
        Command::new("cpushield")
            .subcommand_required(true)
            .arg_required_else_help(true)
            .subcommand(Command::new("shield").arg(Arg::new("all").long("all").value_name("CPUS")))
            .subcommand(Command::new("unshield"))
            .subcommand(
                Command::new("measure")
                    .subcommand_required(true)
                    .arg_required_else_help(true)
                    .subcommand(
                        Command::new("latency")
                            .arg(Arg::new("cpus").long("cpus").required(true))
                            .arg(
                                Arg::new("source")
                                    .long("source")
                                    .value_parser(["auto", "timer", "rtc"]),
                            )
                            .arg(Arg::new("json").long("json").action(ArgAction::SetTrue)),
                    )
                    .subcommand(Command::new("noise")),
            )
            .subcommand(Command::new("thread-demo").hide(true))
    }

    fn said(words: &[&str]) -> String {
        let argv: Vec<OsString> = std::iter::once("cpushield")
            .chain(words.iter().copied())
            .map(OsString::from)
            .collect();
        let root = cli();
        let error = root
            .clone()
            .try_get_matches_from(&argv)
            .map(drop)
            .expect_err("clap must reject this");
        one_line(&error, &root, &argv)
    }

    #[test]
    fn an_unknown_option_names_the_command_and_the_help() {
        assert_eq!(
            said(&["shield", "--foo"]),
            "unexpected argument '--foo' for 'shield' (see: cpushield shield --help)"
        );
        assert_eq!(
            said(&["shield", "--al", "3"]),
            "unexpected argument '--al' for 'shield'; did you mean '--all'? (see: cpushield shield --help)"
        );
    }

    #[test]
    fn an_unknown_command_is_named_with_the_similar_ones() {
        let line = said(&["shiel"]);
        assert!(
            line.starts_with("unrecognized subcommand 'shiel'; did you mean "),
            "{line}"
        );
        assert!(
            line.contains("'shield'") && line.ends_with("(see: cpushield --help)"),
            "{line}"
        );
    }

    #[test]
    fn a_missing_command_lists_the_visible_commands() {
        assert_eq!(
            said(&[]),
            "'cpushield' needs a command: shield, unshield, measure (see: cpushield --help)"
        );
        assert_eq!(
            said(&["measure"]),
            "'cpushield measure' needs a command: latency, noise (see: cpushield measure --help)"
        );
    }

    #[test]
    fn values_clap_checks_keep_the_option_and_the_allowed_values() {
        assert_eq!(
            said(&["measure", "latency", "--cpus", "1", "--source", "xyz"]),
            "invalid value 'xyz' for '--source <source>'; possible values: auto, timer, rtc \
             (see: cpushield measure latency --help)"
        );
        assert_eq!(
            said(&["measure", "latency", "--json"]),
            "the following required arguments were not provided: --cpus <cpus> \
             (see: cpushield measure latency --help)"
        );
        assert_eq!(
            said(&["shield", "--all"]),
            "a value is required for '--all <CPUS>' but none was supplied \
             (see: cpushield shield --help)"
        );
    }

    #[test]
    fn every_rejection_is_one_line() {
        for words in [
            &["shield", "--all", "1", "--all", "2"][..],
            &["measure", "latency", "--cpus", "1", "--json=3"][..],
            &["measure", "nois"][..],
            &["unshield", "extra"][..],
        ] {
            let line = said(words);
            assert!(!line.contains('\n'), "{words:?}: {line}");
            assert!(line.ends_with(" --help)"), "{words:?}: {line}");
        }
    }
}
