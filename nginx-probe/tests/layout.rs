//! The shape of the source tree, checked without root (`cargo test -p nginx-probe`):
//!
//! - no circle of imports between the modules of `nginx-probe/src` (a module is a file;
//!   an import is any `crate::...` path, in `use` trees or inline);
//! - `model` imports nothing else of the crate (the report schema depends on nothing);
//! - every folder of `nginx-probe/src` says its purpose in a `//!` doc at the top of its
//!   `mod.rs`;
//! - no Rust source file of the workspace is over [`MAX_LINES`] lines.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
};

/// Longest source file allowed, lines.
const MAX_LINES: usize = 1000;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `src/a/b.rs` -> `a::b`; `src/a/mod.rs` -> `a`; `src/lib.rs` -> `` (the root).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.last().is_some_and(|l| l == "mod" || l == "lib") {
        parts.pop();
    }
    parts.join("::")
}

/// Skips a Rust comment or string at `i`, returning the index after it, if any starts there.
fn skip_comment(b: &[u8], i: usize) -> Option<usize> {
    if b[i..].starts_with(b"//") {
        return Some(
            b[i..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(b.len(), |n| i + n),
        );
    }
    None
}

/// Every `crate::` path in `text`, expanded from `use crate::{a::{b, c}, d}` trees into
/// `a::b`, `a::c`, `d` (the path after `crate::`).
fn crate_paths(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if let Some(j) = skip_comment(b, i) {
            i = j;
            continue;
        }
        if b[i..].starts_with(b"crate::")
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
        {
            i += "crate::".len();
            i = parse_tree(b, i, String::new(), &mut out);
            continue;
        }
        i += 1;
    }
    out
}

/// Parses a use tree at `i` with `prefix`; pushes each leaf path; returns the end.
fn parse_tree(b: &[u8], mut i: usize, prefix: String, out: &mut Vec<String>) -> usize {
    let skip_ws = |mut i: usize| {
        while i < b.len() && (b[i] as char).is_whitespace() {
            i += 1;
        }
        i
    };
    i = skip_ws(i);
    if i < b.len() && b[i] == b'{' {
        i += 1;
        loop {
            i = skip_ws(i);
            if i >= b.len() {
                return i;
            }
            if b[i] == b'}' {
                return i + 1;
            }
            if b[i] == b',' {
                i += 1;
                continue;
            }
            i = parse_tree(b, i, prefix.clone(), out);
        }
    }
    let start = i;
    while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
        i += 1;
    }
    let ident = String::from_utf8_lossy(&b[start..i]).to_string();
    let path = if prefix.is_empty() {
        ident
    } else {
        format!("{prefix}::{ident}")
    };
    if b[i..].starts_with(b"::") {
        return parse_tree(b, i + 2, path, out);
    }
    if !path.is_empty() {
        out.push(path);
    }
    i
}

/// The module a path names: its longest prefix that is a module of the crate.
fn resolve(path: &str, modules: &BTreeSet<String>) -> Option<String> {
    let parts: Vec<&str> = path.split("::").collect();
    (1..=parts.len())
        .rev()
        .map(|n| parts[..n].join("::"))
        .find(|m| modules.contains(m))
}

fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = workspace().join("nginx-probe/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<String> = files.iter().map(|f| module_of(&src, f)).collect();
    let mut graph = BTreeMap::new();
    for f in &files {
        let m = module_of(&src, f);
        let text = fs::read_to_string(f).expect("read source");
        // Test modules may reach anywhere; only the code that ships counts.
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let deps: BTreeSet<String> = crate_paths(code)
            .iter()
            .filter_map(|p| resolve(p, &modules))
            // A folder's mod.rs naming its own children is not an import back.
            .filter(|d| d != &m && !d.is_empty() && !d.starts_with(&format!("{m}::")))
            .collect();
        graph.insert(m, deps);
    }
    graph
}

/// A circle in `graph`, if any, as the modules along it.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for d in graph.get(n).into_iter().flatten() {
            match state.get(d.as_str()).copied().unwrap_or(0) {
                1 => {
                    let at = stack.iter().position(|s| s == d).unwrap_or(0);
                    let mut c = stack[at..].to_vec();
                    c.push(d.clone());
                    return Some(c);
                }
                0 => {
                    if let Some(c) = visit(d, graph, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in graph.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(n, graph, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn the_parser_expands_use_trees() {
    let p = crate_paths("use crate::{a::{b, c::D}, e}; x = crate::f::g(); // crate::h");
    assert_eq!(p, vec!["a::b", "a::c::D", "e", "f::g"]);
    let mut g = BTreeMap::new();
    g.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    g.insert("b".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(
        find_cycle(&g),
        Some(vec!["a".into(), "b".into(), "a".into()])
    );
    g.insert("b".to_string(), BTreeSet::new());
    assert_eq!(find_cycle(&g), None);
}

#[test]
fn no_circle_of_imports_between_modules() {
    let graph = imports();
    assert!(graph.len() > 10, "modules found: {:?}", graph.keys());
    if let Some(c) = find_cycle(&graph) {
        panic!("import circle: {}", c.join(" -> "));
    }
}

#[test]
fn the_model_depends_on_nothing_else_of_the_crate() {
    let graph = imports();
    for (m, deps) in &graph {
        if m == "model" || m.starts_with("model::") {
            let outside: Vec<&String> = deps
                .iter()
                .filter(|d| !(d.as_str() == "model" || d.starts_with("model::")))
                .collect();
            assert!(outside.is_empty(), "{m} imports {outside:?}");
        }
    }
}

#[test]
fn every_folder_says_what_it_is_for() {
    let src = workspace().join("nginx-probe/src");
    for e in fs::read_dir(&src).expect("src").flatten() {
        if e.path().is_dir() && e.file_name() != "testdata" {
            let m = e.path().join("mod.rs");
            let text = fs::read_to_string(&m).unwrap_or_default();
            assert!(
                text.starts_with("//! "),
                "{} needs a one-line //! doc of its purpose",
                m.display()
            );
        }
    }
}

#[test]
fn no_source_file_is_over_the_line_limit() {
    let root = workspace();
    let mut files = Vec::new();
    for dir in [
        "nginx-probe",
        "nginx-probe-common",
        "nginx-probe-ebpf",
        "xtask",
        "tests",
    ] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 20);
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let n = fs::read_to_string(f).ok()?.lines().count();
            (n > MAX_LINES).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "over {MAX_LINES} lines: {long:?}");
}
