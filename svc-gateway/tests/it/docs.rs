//! The book in `docs/` and the READMEs against the code: every relative link resolves, every
//! `SVC_*` variable the services and `svc` read is in the configuration reference (and every one
//! there is read), and every envelope code has its page, the one `SVC_ERROR_DOCS_BASE` points at.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use svc_tower::error::ErrorCode;

/// The crates whose sources read the variables users set.
const CRATES: [&str; 5] = [
    "svc-tower",
    "svc-auth-server",
    "svc-gateway",
    "svc-runtime",
    "svc-cli",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the crate sits in the workspace")
        .to_owned()
}

/// Every file under `dir` whose name ends with `suffix`, skipping build output.
fn files(dir: &Path, suffix: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            if !matches!(name.as_ref(), "target" | "node_modules" | ".git" | "fuzz") {
                files(&path, suffix, out);
            }
        } else if name.ends_with(suffix) {
            out.push(path);
        }
    }
}

/// The Markdown a reader of the repository meets: the book, the READMEs, the changelogs.
fn markdown() -> Vec<PathBuf> {
    let mut found = Vec::new();
    files(&root(), ".md", &mut found);
    found
}

/// The targets of `[text](target)` links, outside code blocks and code spans.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut in_code = false;
        let mut rest = line;
        let mut plain = String::new();
        for ch in rest.chars() {
            if ch == '`' {
                in_code = !in_code;
            } else if !in_code {
                plain.push(ch);
            }
        }
        rest = &plain;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(after[..end].to_owned());
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn every_relative_link_resolves() {
    let mut broken = Vec::new();
    let pages = markdown();
    assert!(pages.len() > 20, "the book and the READMEs: {pages:?}");
    for page in pages {
        let text = std::fs::read_to_string(&page).expect("a readable page");
        for target in links(&text) {
            if target.contains("://") || target.starts_with('#') || target.starts_with("mailto:") {
                continue;
            }
            let path = target.split('#').next().unwrap_or_default();
            let dir = page.parent().expect("a page sits in a directory");
            if !dir.join(path).exists() {
                broken.push(format!(
                    "{}: {target}",
                    page.strip_prefix(root()).unwrap_or(&page).display()
                ));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// `SVC_` names in double quotes, and the names a `variables!` block declares (a line of its
/// own, `SVC_NAME;`): how the sources name a variable they read.
fn quoted_variables(text: &str, out: &mut BTreeSet<String>) {
    for line in text.lines().map(str::trim) {
        if let Some(name) = line.strip_suffix(';').filter(|name| {
            name.starts_with("SVC_")
                && name
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        }) {
            out.insert(name.to_owned());
        }
    }
    for (at, _) in text.match_indices("\"SVC_") {
        let name: String = text[at + 1..]
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        if text[at + 1 + name.len()..].starts_with('"') {
            out.insert(name);
        }
    }
}

/// The variables read by the production sources (test modules and test-only files left out).
fn variables_read() -> BTreeSet<String> {
    let mut read = BTreeSet::new();
    for krate in CRATES {
        let mut sources = Vec::new();
        files(&root().join(krate).join("src"), ".rs", &mut sources);
        for source in sources {
            let name = source.file_name().map(|n| n.to_string_lossy().into_owned());
            if matches!(name.as_deref(), Some("tests.rs") | Some("fuzzing.rs"))
                || source.to_string_lossy().contains("/tests/")
            {
                continue;
            }
            let text = std::fs::read_to_string(&source).expect("a readable source");
            // Unit tests sit at the end of a file, after their `#[cfg(test)]`.
            let production = text.split("#[cfg(test)]").next().unwrap_or_default();
            quoted_variables(production, &mut read);
        }
    }
    read
}

/// The variables the configuration reference documents: its `##` headings.
fn variables_documented() -> BTreeSet<String> {
    let page = std::fs::read_to_string(root().join("docs/reference/configuration.md"))
        .expect("docs/reference/configuration.md");
    let mut documented = BTreeSet::new();
    for heading in page.lines().filter(|l| l.starts_with("## ")) {
        for name in heading.split('`').skip(1).step_by(2) {
            if name.starts_with("SVC_") {
                documented.insert(name.to_owned());
            }
        }
    }
    documented
}

#[test]
fn the_configuration_reference_names_every_variable_read_and_no_other() {
    let read = variables_read();
    let documented = variables_documented();
    assert!(read.contains("SVC_PORT") && read.len() > 30, "{read:?}");
    // What each service's --help lists is read, by its own test; it must all be here too.
    let listed = [
        svc_gateway::config::EVERY_VARIABLE,
        svc_auth_server::config::EVERY_VARIABLE,
    ];
    for variable in listed.into_iter().flatten().flat_map(|table| table.iter()) {
        assert!(
            !variable.name.starts_with("SVC_") || read.contains(variable.name),
            "{} is listed by --help but not found in the sources",
            variable.name
        );
    }
    let undocumented: Vec<_> = read.difference(&documented).collect();
    let unread: Vec<_> = documented.difference(&read).collect();
    assert!(
        undocumented.is_empty(),
        "read but not in docs/reference/configuration.md: {undocumented:?}"
    );
    assert!(
        unread.is_empty(),
        "in docs/reference/configuration.md but read nowhere: {unread:?}"
    );
}

#[test]
fn every_envelope_code_has_its_page_and_every_page_its_code() {
    let dir = root().join("docs/reference/errors");
    let mut missing = Vec::new();
    let mut pages: BTreeSet<String> = std::fs::read_dir(&dir)
        .expect("docs/reference/errors")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name != "README.md")
        .collect();
    let index = std::fs::read_to_string(dir.join("README.md")).expect("the errors index");
    for code in ErrorCode::ALL {
        // What `docs_url` appends to SVC_ERROR_DOCS_BASE.
        let page = format!("{}.md", code.as_str().to_lowercase().replace('_', "-"));
        if !pages.remove(&page) {
            missing.push(page.clone());
        }
        assert!(
            index.contains(&format!("[{}]({page})", code.as_str())),
            "the errors index links {page}"
        );
    }
    assert!(missing.is_empty(), "codes without a page: {missing:?}");
    assert!(pages.is_empty(), "pages without a code: {pages:?}");
}
