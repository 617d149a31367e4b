//! The source tree keeps its architecture: no import cycles between the library's
//! top-level modules, nor between sibling files of one module folder (a cycle means a
//! type lives in the wrong place), and the binaries stay thin.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Every `.rs` file under `dir`, as (path relative to src/ without `.rs`, text).
fn sources(dir: &Path, prefix: &str, out: &mut Vec<(String, String)>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let rel = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        if path.is_dir() {
            sources(&path, &rel, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            // Unit tests may use any layer: only the code before them counts.
            let text = fs::read_to_string(&path).unwrap();
            let code = match text.find("#[cfg(test)]\nmod tests") {
                Some(k) => text[..k].to_string(),
                None => text,
            };
            out.push((rel, code));
        }
    }
}

/// The identifiers that follow each occurrence of `prefix` in `text` (`crate::x::y` with
/// prefix `crate::` gives `["x", "y"]`), outside comments.
fn paths_after<'t>(text: &'t str, prefix: &str) -> Vec<Vec<&'t str>> {
    let mut found = Vec::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(k) = rest.find(prefix) {
            let before = rest[..k].chars().last();
            rest = &rest[k + prefix.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let segments: Vec<&str> = rest
                .split("::")
                .map(|s| {
                    let end = s
                        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .unwrap_or(s.len());
                    &s[..end]
                })
                .take_while(|s| !s.is_empty())
                .collect();
            found.push(segments);
        }
    }
    found
}

fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(node.to_string(), 1);
        stack.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            match state.get(next.as_str()).copied().unwrap_or(0) {
                1 => {
                    let at = stack.iter().position(|n| n == next).unwrap();
                    let mut cycle = stack[at..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(cycle) = visit(next, graph, state, stack) {
                        return Some(cycle);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(node.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        if state.get(node.as_str()).copied().unwrap_or(0) == 0 {
            let mut stack = Vec::new();
            if let Some(cycle) = visit(node, graph, &mut state, &mut stack) {
                return Some(cycle);
            }
        }
    }
    None
}

#[test]
fn no_import_cycles_between_modules_or_sibling_files() {
    let mut files = Vec::new();
    sources(&Path::new(ROOT).join("src"), "", &mut files);
    let top_of = |rel: &str| rel.split('/').next().unwrap().to_string();
    let tops: BTreeSet<String> = files
        .iter()
        .map(|(rel, _)| top_of(rel))
        .filter(|t| t != "lib" && t != "main")
        .collect();
    // Top-level modules: `crate::x` from a file of module `m` is an edge m -> x.
    let mut top: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    // Sibling files of a folder: `super::x` (or `crate::folder::x`) from `folder/a.rs`
    // is an edge a -> x, when x is another file of that folder.
    let mut siblings: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    let file_set: BTreeSet<&str> = files.iter().map(|(rel, _)| rel.as_str()).collect();
    for (rel, text) in &files {
        let from = top_of(rel);
        for path in paths_after(text, "crate::") {
            if let Some(first) = path.first() {
                if tops.contains(*first) && *first != from {
                    top.entry(from.clone())
                        .or_default()
                        .insert(first.to_string());
                }
            }
        }
        let Some((folder, stem)) = rel.rsplit_once('/') else {
            continue;
        };
        if stem == "mod" {
            continue;
        }
        let mut targets = Vec::new();
        for path in paths_after(text, "super::") {
            if let Some(first) = path.first() {
                targets.push(first.to_string());
            }
        }
        for path in paths_after(text, "crate::") {
            if path.len() >= 2 && folder.split('/').eq(path[..path.len() - 1].iter().copied()) {
                targets.push(path[path.len() - 1].to_string());
            } else if path.len() >= 2 && path[..path.len() - 1].join("/").starts_with(folder) {
                let inner = &path[folder.split('/').count()..];
                if let Some(first) = inner.first() {
                    targets.push(first.to_string());
                }
            }
        }
        for target in targets {
            if target != stem && file_set.contains(format!("{folder}/{target}").as_str()) {
                siblings
                    .entry(folder.to_string())
                    .or_default()
                    .entry(stem.to_string())
                    .or_default()
                    .insert(target);
            }
        }
    }
    if let Some(cycle) = find_cycle(&top) {
        panic!(
            "import cycle between top-level modules: {}",
            cycle.join(" -> ")
        );
    }
    for (folder, graph) in &siblings {
        if let Some(cycle) = find_cycle(graph) {
            panic!("import cycle in src/{folder}/: {}", cycle.join(" -> "));
        }
    }
    assert!(top.len() >= 8, "the graph was read: {top:?}");
}

/// A tool's main parses flags into a config, makes one library call and reports: its
/// file has no functions but `main` and no library logic (loops over data).
#[test]
fn binaries_are_thin() {
    for entry in fs::read_dir(Path::new(ROOT).join("bin")).unwrap() {
        let path = entry.unwrap().path();
        let text = fs::read_to_string(&path).unwrap();
        let functions = text.matches("\nfn ").count();
        assert!(
            functions <= 2,
            "{} holds {functions} functions: library logic belongs in src/",
            path.display()
        );
        assert!(
            text.lines().count() <= 260,
            "{} is long: move logic into src/cmd/",
            path.display()
        );
    }
}
