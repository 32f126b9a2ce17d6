//! The documentation's relative links resolve, checked without root
//! (`cargo test -p nginx-probe`): every `](target)` in `README.md`, `CONTRIBUTING.md` and
//! `docs/*.md` outside fenced code blocks names a file or folder that exists, and a
//! `#anchor` (alone or after a `.md` path) names a heading of that file (GitHub's slugs).
//! Links with a scheme (`https:`, `mailto:`) are not followed.

use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
};

/// Files linked from here while they are written on another branch: a missing one is
/// allowed, an existing one is checked like any other. Remove an entry once it lands.
const PENDING: &[&str] = &[];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// The documentation files checked: README.md, CONTRIBUTING.md, docs/*.md.
fn doc_files(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md"), root.join("CONTRIBUTING.md")];
    let mut docs: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// Markdown text outside fenced code blocks, one line per element.
fn prose_lines(text: &str) -> Vec<&str> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push(line);
        }
    }
    out
}

/// Link targets of `line`: the text between `](` and the next `)`.
fn link_targets(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        let Some(end) = after.find(')') else { break };
        out.push(after[..end].trim().to_string());
        rest = &after[end..];
    }
    out
}

/// `base/path` with `..` and `.` resolved lexically (`docs` + `../README.md` ->
/// `README.md`).
fn normalise(base: &Path, path: &str) -> PathBuf {
    let mut parts: Vec<std::path::Component> = base.components().collect();
    for c in Path::new(path).components() {
        match c {
            std::path::Component::ParentDir => {
                parts.pop();
            }
            std::path::Component::CurDir => {}
            other => parts.push(other),
        }
    }
    parts.iter().collect()
}

/// GitHub's anchor for a heading: lower case, punctuation other than `-` and `_`
/// dropped, spaces made `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Anchors of the headings of a markdown file.
fn anchors(text: &str) -> BTreeSet<String> {
    prose_lines(text)
        .into_iter()
        .filter_map(|l| {
            let t = l.trim_start_matches('#');
            (t.len() < l.len() && t.starts_with(' ')).then(|| slug(t))
        })
        .collect()
}

#[test]
fn slugs_are_githubs() {
    assert_eq!(
        slug("nginx's own words: its error log, and the CPU quota"),
        "nginxs-own-words-its-error-log-and-the-cpu-quota"
    );
    assert_eq!(
        slug("Prometheus metrics (`--listen`)"),
        "prometheus-metrics---listen"
    );
    assert_eq!(
        link_targets("see [a](docs/a.md#x) and [b](b.md)."),
        ["docs/a.md#x", "b.md"]
    );
}

#[test]
fn every_relative_link_in_the_docs_resolves() {
    let root = workspace();
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in doc_files(&root) {
        let text = fs::read_to_string(&file).expect("read a doc file");
        let dir = file.parent().expect("a file's folder");
        for line in prose_lines(&text) {
            for target in link_targets(line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                checked += 1;
                let (path, anchor) = match target.split_once('#') {
                    Some((p, a)) => (p, Some(a)),
                    None => (target.as_str(), None),
                };
                let rel = if path.is_empty() {
                    file.strip_prefix(&root).expect("under root").to_path_buf()
                } else {
                    normalise(dir.strip_prefix(&root).expect("under root"), path)
                };
                let linked = root.join(&rel);
                let from = file.strip_prefix(&root).unwrap_or(&file).display();
                if !linked.exists() {
                    if !PENDING.iter().any(|p| Path::new(p) == rel) {
                        broken.push(format!("{from}: ({target}): no such file"));
                    }
                    continue;
                }
                if let Some(anchor) = anchor {
                    if linked.extension().is_some_and(|e| e == "md") {
                        let there = fs::read_to_string(&linked).expect("read the linked file");
                        if !anchors(&there).contains(anchor) {
                            broken.push(format!("{from}: ({target}): no heading #{anchor}"));
                        }
                    }
                }
            }
        }
    }
    assert!(
        checked > 20,
        "only {checked} links found: is the parser right?"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// User documentation (README.md, docs/) speaks of the tool, not of how it was built:
/// no "issue 17", no "this session", no "target <= 2%".
#[test]
fn user_docs_name_no_issue_session_or_target() {
    let root = workspace();
    let banned = [
        "issue ",
        "issue's",
        "session's",
        "this session",
        "target <",
        "target:",
    ];
    let mut found = Vec::new();
    for file in doc_files(&root) {
        if file.ends_with("CONTRIBUTING.md") {
            continue;
        }
        let text = fs::read_to_string(&file).expect("read doc");
        for (n, line) in text.lines().enumerate() {
            let lower = line.to_lowercase();
            for b in banned {
                if lower.contains(b) {
                    found.push(format!("{}:{}: {b:?}", file.display(), n + 1));
                }
            }
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}
