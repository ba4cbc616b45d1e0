//! `/status`: the agent's state as Kubernetes-style conditions.

use serde::Serialize;

/// One condition, shaped like a Kubernetes `status.conditions` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The condition's name (`ShieldUp`, `ShieldHeld`).
    #[serde(rename = "type")]
    pub kind: String,
    /// `"True"`, `"False"` or `"Unknown"`.
    pub status: String,
    /// One CamelCase word for why.
    pub reason: String,
    /// A sentence for people.
    pub message: String,
    /// When `status` last changed (RFC 3339).
    pub last_transition_time: String,
}

/// The conditions, each keeping its transition time while its status stays.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Conditions {
    /// The conditions in a fixed order.
    pub conditions: Vec<Condition>,
}

impl Conditions {
    /// Sets condition `kind`; its transition time moves to `now` only when
    /// its status changes.
    pub fn set(&mut self, kind: &str, status: bool, reason: &str, message: String, now: &str) {
        let status = if status { "True" } else { "False" }.to_string();
        match self.conditions.iter_mut().find(|c| c.kind == kind) {
            Some(c) => {
                if c.status != status {
                    c.last_transition_time = now.to_string();
                }
                c.status = status;
                c.reason = reason.to_string();
                c.message = message;
            }
            None => self.conditions.push(Condition {
                kind: kind.to_string(),
                status,
                reason: reason.to_string(),
                message,
                last_transition_time: now.to_string(),
            }),
        }
    }

    /// The JSON body of `/status`.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("conditions serialize")
    }
}

/// The current time in RFC 3339.
pub fn now() -> String {
    jiff::Timestamp::now().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transition_time_moves_only_when_the_status_changes() {
        let mut c = Conditions::default();
        c.set("ShieldUp", true, "Shielded", "a".into(), "t1");
        c.set("ShieldUp", true, "Shielded", "b".into(), "t2");
        assert_eq!(c.conditions[0].last_transition_time, "t1");
        assert_eq!(c.conditions[0].message, "b");
        c.set("ShieldUp", false, "NoShield", "c".into(), "t3");
        assert_eq!(c.conditions[0].last_transition_time, "t3");
        let json: serde_json::Value = serde_json::from_str(&c.to_json()).unwrap();
        let first = &json["conditions"][0];
        assert_eq!(first["type"], "ShieldUp");
        assert_eq!(first["status"], "False");
        assert_eq!(first["lastTransitionTime"], "t3");
    }

    #[test]
    fn now_is_rfc3339_in_utc() {
        let t = now();
        assert!(t.ends_with('Z') && t.contains('T'), "{t}");
    }
}
