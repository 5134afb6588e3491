//! Permission names on the command line and in human output.

use svc_tower::context::Permissions;

/// Every known bit with its name, in bit order (the proto's `PermissionBit`).
const NAMES: [(&str, Permissions); 12] = [
    ("chat", Permissions::CHAT_COMPLETIONS),
    ("token_create", Permissions::TOKEN_CREATE),
    ("token_revoke", Permissions::TOKEN_REVOKE),
    ("token_list", Permissions::TOKEN_LIST),
    ("embeddings", Permissions::EMBEDDINGS),
    ("usage_read", Permissions::USAGE_READ),
    ("agent_manage", Permissions::AGENT_MANAGE),
    ("agent_read", Permissions::AGENT_READ),
    ("user_manage", Permissions::USER_MANAGE),
    ("audit_read", Permissions::AUDIT_READ),
    ("budget_manage", Permissions::BUDGET_MANAGE),
    ("mcp_tools", Permissions::MCP_TOOLS),
];

/// `chat,embeddings` (names, comma-separated, any case; `chat_completions` is `chat`) or an
/// integer bitmap such as `17`; the error is the tail of clap's line about `--permissions`.
pub(crate) fn parse(value: &str) -> Result<Permissions, String> {
    if let Ok(bits) = value.trim().parse::<i64>() {
        return if bits > 0 {
            Ok(Permissions::from_bits(bits))
        } else {
            Err("grants nothing".to_owned())
        };
    }
    let mut permissions = Permissions::NONE;
    for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let name = name.to_ascii_lowercase();
        let name = if name == "chat_completions" {
            "chat"
        } else {
            name.as_str()
        };
        let (_, bit) = NAMES
            .iter()
            .find(|(known, _)| *known == name)
            .ok_or_else(|| {
                let known: Vec<&str> = NAMES.iter().map(|(n, _)| *n).collect();
                format!(
                    "unknown permission {name:?} (known: {}, or an integer)",
                    known.join(",")
                )
            })?;
        permissions = permissions | *bit;
    }
    if permissions == Permissions::NONE {
        return Err("no permission named".to_owned());
    }
    Ok(permissions)
}

/// `chat,embeddings`; bits without a name are shown as their number (`bit 40`).
pub(crate) fn names(bits: i64) -> String {
    let permissions = Permissions::from_bits(bits);
    let mut names: Vec<String> = NAMES
        .iter()
        .filter(|(_, bit)| permissions.contains(*bit))
        .map(|(name, _)| (*name).to_owned())
        .collect();
    let unknown = bits & !Permissions::ALL_KNOWN.bits();
    for bit in 0..64 {
        if unknown & (1_i64 << bit) != 0 {
            names.push(format!("bit {bit}"));
        }
    }
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_integers_parse() {
        assert_eq!(parse("chat"), Ok(Permissions::CHAT_COMPLETIONS));
        assert_eq!(
            parse("Chat_Completions, embeddings").map(Permissions::bits),
            Ok(0b1_0001)
        );
        assert_eq!(parse("17").map(Permissions::bits), Ok(17));
        for bad in ["", "0", "-1", "chat,root", ","] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn bits_render_as_names() {
        assert_eq!(names(0b1_0001), "chat,embeddings");
        assert_eq!(names(0), "none");
        assert_eq!(names(1 | 1 << 40), "chat,bit 40");
    }
}
