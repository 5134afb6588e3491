//! An agent's tool grants, as ValidateToken answered them: `server/tool` or `server/*`.

use std::sync::Arc;

/// The grants of the request's agent. Empty grants reach no tool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants(Arc<[String]>);

impl Grants {
    /// The grants `patterns` name.
    pub fn new(patterns: Arc<[String]>) -> Grants {
        Grants(patterns)
    }

    /// Whether `tool` of `server` is granted, by name or by the server's `*`.
    pub fn allows(&self, server: &str, tool: &str) -> bool {
        self.0.iter().any(|pattern| {
            pattern
                .split_once('/')
                .is_some_and(|(s, t)| s == server && (t == "*" || t == tool))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grants(patterns: &[&str]) -> Grants {
        Grants::new(patterns.iter().map(|p| (*p).to_owned()).collect())
    }

    #[test]
    fn a_tool_is_granted_by_name_or_by_its_servers_star() {
        let g = grants(&["srv/echo", "gh/*"]);
        assert!(g.allows("srv", "echo"));
        assert!(!g.allows("srv", "add"));
        assert!(g.allows("gh", "anything"));
        assert!(!g.allows("other", "echo"));
        assert!(!Grants::default().allows("srv", "echo"));
        // A star is a grant of the whole server, not a prefix.
        assert!(!grants(&["srv/ec*"]).allows("srv", "echo"));
    }
}
