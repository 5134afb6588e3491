//! How an agent's tool grants are kept in its row: one text column, the patterns separated by
//! one space, the same on every backend. A pattern never holds a space (SetAgentTools checks
//! each one), so the split gives back exactly the list that was joined.

/// The stored form of `tools`.
pub(super) fn join(tools: &[String]) -> String {
    tools.join(" ")
}

/// The list a stored column holds; an empty column is no grant.
pub(super) fn split(stored: &str) -> Vec<String> {
    stored.split_whitespace().map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joined_grants_split_back() {
        let tools = vec!["srv/echo".to_owned(), "github/*".to_owned()];
        assert_eq!(split(&join(&tools)), tools);
        assert!(split(&join(&[])).is_empty());
    }
}
