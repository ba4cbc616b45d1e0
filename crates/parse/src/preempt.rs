//! `/sys/kernel/debug/sched/preempt` of a `PREEMPT_DYNAMIC` kernel: the
//! preemption models it can switch to at run time, the one in force in
//! parentheses (`none voluntary (full) lazy`).

/// The models a `PREEMPT_DYNAMIC` kernel offers and the one in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreemptModels {
    /// The model in force (`full`).
    pub current: String,
    /// Every model the file lists, in its order, the current one included.
    pub choices: Vec<String>,
}

/// Parses the file's text; `None` when no model is marked as in force.
pub fn parse_preempt(text: &str) -> Option<PreemptModels> {
    let mut current = None;
    let mut choices = Vec::new();
    for word in text.split_whitespace() {
        match word.strip_prefix('(').and_then(|w| w.strip_suffix(')')) {
            Some(inner) => {
                current = Some(inner.to_string());
                choices.push(inner.to_string());
            }
            None => choices.push(word.to_string()),
        }
    }
    Some(PreemptModels {
        current: current.filter(|c| !c.is_empty())?,
        choices,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_in_parentheses_is_the_one_in_force() {
        let m = parse_preempt("none voluntary (full) lazy\n").unwrap();
        assert_eq!(m.current, "full");
        assert_eq!(m.choices, ["none", "voluntary", "full", "lazy"]);
        let m = parse_preempt("(none) voluntary full").unwrap();
        assert_eq!(m.current, "none");
    }

    #[test]
    fn a_text_without_a_marked_model_gives_none() {
        assert_eq!(parse_preempt("none voluntary full"), None);
        assert_eq!(parse_preempt(""), None);
        assert_eq!(parse_preempt("() full"), None);
    }
}
