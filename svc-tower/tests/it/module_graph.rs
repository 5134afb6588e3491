//! The crate's modules form a tree of dependencies, not a web: no module reaches, through
//! `crate::` or `super::` paths, back to itself. Read from the sources, outside test code and
//! comments, at two levels: between the top-level modules, and between the files of each
//! module directory.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.file_name().is_some_and(|name| name != "tests") {
                sources(&path, out);
            }
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file without comments and without its `#[cfg(test)]` tail.
fn code(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap();
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => &text,
    };
    text.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The identifiers following each occurrence of `prefix`.
fn names_after<'a>(code: &'a str, prefix: &str) -> Vec<&'a str> {
    code.match_indices(prefix)
        .map(|(at, _)| {
            let rest = &code[at + prefix.len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .filter(|name| !name.is_empty() && name.starts_with(|c: char| c.is_ascii_lowercase()))
        .collect()
}

/// A cycle in `graph`, if there is one.
fn cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &Graph,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|seen| seen == node) {
            let mut found = path[at..].to_vec();
            found.push(node.to_owned());
            return Some(found);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_module_depends_on_itself() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    let mut top = Graph::new();
    let mut within: BTreeMap<String, Graph> = BTreeMap::new();
    for file in &files {
        let relative = file.strip_prefix(&root).unwrap();
        let parts: Vec<String> = relative
            .with_extension("")
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if parts == ["lib"] {
            continue;
        }
        let module = parts[0].clone();
        let code = code(file);
        let edges = top.entry(module.clone()).or_default();
        for name in names_after(&code, "crate::") {
            if name != module {
                edges.insert(name.to_owned());
            }
        }
        // A file inside a module directory, and its `super::` siblings.
        if parts.len() == 2 && parts[1] != "mod" {
            let graph = within.entry(module.clone()).or_default();
            let edges = graph.entry(parts[1].clone()).or_default();
            for name in names_after(&code, "super::") {
                if name != parts[1] {
                    edges.insert(name.to_owned());
                }
            }
        }
    }
    assert!(top.len() > 10, "read too few modules: {top:?}");
    assert_eq!(cycle(&top), None, "top-level modules: {top:#?}");
    for (module, graph) in &within {
        assert_eq!(cycle(graph), None, "files of {module}: {graph:#?}");
    }
}

#[test]
fn the_cycle_finder_finds_a_cycle() {
    let mut graph = Graph::new();
    graph.entry("a".into()).or_default().insert("b".into());
    graph.entry("b".into()).or_default().insert("c".into());
    assert_eq!(cycle(&graph), None);
    graph.entry("c".into()).or_default().insert("a".into());
    assert_eq!(
        cycle(&graph),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
}
