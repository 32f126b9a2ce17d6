//! The shape of the source tree, checked without root (`cargo test -p nginx-probe`):
//!
//! - no circle of imports between the modules of `nginx-probe/src` (a module is a file,
//!   found from `lib.rs` through its `mod` items as rustc finds it; an import is any
//!   `crate::`, `super::` or `self::` path, in `use` trees, inline or in a macro's tokens,
//!   read with `syn`);
//! - `model` imports nothing else of the crate (the report schema depends on nothing);
//! - every folder of `nginx-probe/src` says its purpose in a `//!` doc at the top of its
//!   `mod.rs`;
//! - no Rust source file of the workspace is over [`MAX_LINES`] lines;
//! - no function of `nginx-probe/src`, `nginx-probe-ebpf/src` or `xtask/src` is over
//!   [`MAX_FN_LINES`] lines unless a `// Long because: ...` line (or doc line) at its top
//!   says why;
//! - no [`DUP_RUN`] identical code lines stand in two places of those sources.

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

/// True when `attrs` hold `#[cfg(test)]` (also inside `all(...)`) or `#[test]`: code
/// that does not ship.
fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("test")
            || (a.path().is_ident("cfg")
                && a.meta.require_list().is_ok_and(|l| {
                    l.tokens
                        .to_string()
                        .split(|c: char| !c.is_alphanumeric() && c != '_')
                        .any(|w| w == "test")
                }))
    })
}

/// The `#[path = "..."]` of a `mod` item, if any.
fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| {
        if !a.path().is_ident("path") {
            return None;
        }
        match &a.meta.require_name_value().ok()?.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        }
    })
}

/// `a::b` + `c` -> `a::b::c`; `` + `c` -> `c`.
fn join(m: &str, child: &str) -> String {
    match (m.is_empty(), child.is_empty()) {
        (_, true) => m.to_string(),
        (true, false) => child.to_string(),
        (false, false) => format!("{m}::{child}"),
    }
}

/// The parent module of `m` (`a::b` -> `a`, `a` -> the root ``).
fn parent(m: &str) -> String {
    m.rsplit_once("::")
        .map_or(String::new(), |(p, _)| p.to_string())
}

/// A path as written (`["super", "verdict", "Inputs"]`) made absolute from module `m`:
/// `crate::` from the root, `super::` from `m`'s parent (repeatedly), `self::` from `m`.
/// None for paths that start elsewhere (a local name, another crate, a child module
/// declared in `m`, which [`imports`] leaves out anyway).
fn absolute(m: &str, segs: &[String]) -> Option<String> {
    let (mut base, mut rest) = match segs.first()?.as_str() {
        "crate" => (String::new(), &segs[1..]),
        "super" | "self" => (m.to_string(), segs),
        _ => return None,
    };
    while let Some(s) = rest.first() {
        match s.as_str() {
            "super" => base = parent(&base),
            "self" => {}
            _ => break,
        }
        rest = &rest[1..];
    }
    Some(join(&base, &rest.join("::")))
}

/// Collects the absolute paths (see [`absolute`]) one file's shipping code names: `use`
/// trees, paths in types and expressions, and `crate`/`super`/`self` paths inside macro
/// invocations (read from their tokens). Items under `#[cfg(test)]` or `#[test]` are
/// skipped; an inline `mod x { }` is entered as module `x`.
struct PathCollector {
    /// The module being read (inline modules push onto it).
    module: Vec<String>,
    out: Vec<String>,
}

impl PathCollector {
    fn here(&self) -> String {
        self.module.iter().fold(String::new(), |m, s| join(&m, s))
    }

    fn push(&mut self, segs: &[String]) {
        if let Some(p) = absolute(&self.here(), segs) {
            self.out.push(p);
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, t: &syn::UseTree) {
        let leaf = match t {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
                return;
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
                return;
            }
            syn::UseTree::Name(n) => Some(n.ident.to_string()),
            syn::UseTree::Rename(r) => Some(r.ident.to_string()),
            syn::UseTree::Glob(_) => None,
        };
        let mut segs = prefix.clone();
        segs.extend(leaf);
        self.push(&segs);
    }

    /// `crate :: a :: b` (or `super ::`, `self ::`) runs in a macro's tokens.
    fn tokens(&mut self, ts: proc_macro2::TokenStream) {
        use proc_macro2::TokenTree as T;
        let toks: Vec<T> = ts.into_iter().collect();
        let mut i = 0;
        while i < toks.len() {
            if let T::Group(g) = &toks[i] {
                self.tokens(g.stream());
            }
            let T::Ident(id) = &toks[i] else {
                i += 1;
                continue;
            };
            let first = id.to_string();
            if !["crate", "super", "self"].contains(&first.as_str()) {
                i += 1;
                continue;
            }
            let mut segs = vec![first];
            let mut j = i + 1;
            while let (Some(T::Punct(a)), Some(T::Punct(b)), Some(T::Ident(n))) =
                (toks.get(j), toks.get(j + 1), toks.get(j + 2))
            {
                if a.as_char() != ':' || b.as_char() != ':' {
                    break;
                }
                segs.push(n.to_string());
                j += 3;
            }
            if segs.len() > 1 {
                self.push(&segs);
            }
            i = j;
        }
    }
}

impl<'a> syn::visit::Visit<'a> for PathCollector {
    fn visit_item(&mut self, i: &'a syn::Item) {
        let attrs: &[syn::Attribute] = match i {
            syn::Item::Const(x) => &x.attrs,
            syn::Item::Enum(x) => &x.attrs,
            syn::Item::Fn(x) => &x.attrs,
            syn::Item::Impl(x) => &x.attrs,
            syn::Item::Macro(x) => &x.attrs,
            syn::Item::Mod(x) => &x.attrs,
            syn::Item::Static(x) => &x.attrs,
            syn::Item::Struct(x) => &x.attrs,
            syn::Item::Trait(x) => &x.attrs,
            syn::Item::Type(x) => &x.attrs,
            syn::Item::Use(x) => &x.attrs,
            _ => &[],
        };
        if !is_test(attrs) {
            syn::visit::visit_item(self, i);
        }
    }

    fn visit_impl_item_fn(&mut self, i: &'a syn::ImplItemFn) {
        if !is_test(&i.attrs) {
            syn::visit::visit_impl_item_fn(self, i);
        }
    }

    fn visit_item_mod(&mut self, i: &'a syn::ItemMod) {
        // `mod x;` is a file of its own, read on its own.
        if i.content.is_some() {
            self.module.push(i.ident.to_string());
            syn::visit::visit_item_mod(self, i);
            self.module.pop();
        }
    }

    fn visit_item_use(&mut self, i: &'a syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &i.tree);
    }

    fn visit_path(&mut self, p: &'a syn::Path) {
        let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        self.push(&segs);
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'a syn::Macro) {
        self.tokens(m.tokens.clone());
        syn::visit::visit_macro(self, m);
    }
}

/// The paths `text`, read as the file of module `m`, names (see [`PathCollector`]).
fn paths_of(m: &str, text: &str) -> Vec<String> {
    use syn::visit::Visit;
    let ast = syn::parse_file(text).expect("Rust source");
    let mut c = PathCollector {
        module: vec![m.to_string()],
        out: Vec::new(),
    };
    c.visit_file(&ast);
    c.out
}

/// Every shipping module file of the crate, found the way rustc finds them: from
/// `src/lib.rs` through each `mod x;` (`#[path]` honoured, `#[cfg(test)]` modules left
/// out), as (module path, source text).
fn module_files() -> Vec<(String, String)> {
    let src = workspace().join("nginx-probe/src");
    let mut out = Vec::new();
    let mut todo = vec![(String::new(), src.join("lib.rs"))];
    while let Some((m, file)) = todo.pop() {
        let text = fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let dir = file.parent().expect("a folder").to_path_buf();
        let stem = file
            .file_stem()
            .expect("a name")
            .to_string_lossy()
            .to_string();
        let base = if stem == "mod" || stem == "lib" {
            dir.clone()
        } else {
            dir.join(&stem)
        };
        for item in &ast.items {
            let syn::Item::Mod(md) = item else { continue };
            if md.content.is_some() || is_test(&md.attrs) {
                continue;
            }
            let name = md.ident.to_string();
            let child = match path_attr(&md.attrs) {
                Some(p) => dir.join(p),
                None if base.join(format!("{name}.rs")).exists() => base.join(format!("{name}.rs")),
                None => base.join(&name).join("mod.rs"),
            };
            todo.push((join(&m, &name), child));
        }
        out.push((m, text));
    }
    out
}

/// The module a path names: its longest prefix that is a module of the crate.
fn resolve(path: &str, modules: &BTreeSet<String>) -> Option<String> {
    let parts: Vec<&str> = path.split("::").collect();
    (1..=parts.len())
        .rev()
        .map(|n| parts[..n].join("::"))
        .find(|m| modules.contains(m))
}

/// Each module's imports of other modules of the crate (a module is a file), from
/// `crate::`, `super::` and `self::` paths alike.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let files = module_files();
    let modules: BTreeSet<String> = files.iter().map(|(m, _)| m.clone()).collect();
    let mut graph = BTreeMap::new();
    for (m, text) in &files {
        let deps: BTreeSet<String> = paths_of(m, text)
            .iter()
            .filter_map(|p| resolve(p, &modules))
            // A folder's mod.rs naming its own children is not an import back.
            .filter(|d| d != m && !d.is_empty() && !d.starts_with(&format!("{m}::")))
            .collect();
        graph.insert(m.clone(), deps);
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

/// Every group of modules that reach each other through imports (the strongly connected
/// components with more than one module), each sorted; empty when there is no circle.
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Kosaraju: reachability both ways.
    let reach = |from: &str, rev: bool| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(n) = todo.pop() {
            let next: Vec<String> = if rev {
                graph
                    .iter()
                    .filter(|(_, d)| d.contains(&n))
                    .map(|(m, _)| m.clone())
                    .collect()
            } else {
                graph.get(&n).into_iter().flatten().cloned().collect()
            };
            for m in next {
                if seen.insert(m.clone()) {
                    todo.push(m);
                }
            }
        }
        seen
    };
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for n in graph.keys() {
        if done.contains(n) {
            continue;
        }
        let both: Vec<String> = reach(n, false)
            .intersection(&reach(n, true))
            .cloned()
            .collect();
        done.extend(both.iter().cloned());
        if both.len() > 1 {
            out.push(both);
        }
    }
    out
}

#[test]
fn the_reader_sees_crate_super_and_self_paths() {
    let text = "use crate::{a::{b, c::D}, e};\nuse super::f::G;\nfn x() { crate::h::i(); super::super::j::k(); format!(\"{}\", self::l::M); }\n// crate::comment\n#[cfg(test)]\nmod tests { use crate::never; }\nmod inner { use super::sib::S; }\n";
    assert_eq!(
        paths_of("p::q", text),
        vec![
            "a::b",
            "a::c::D",
            "e",
            "p::f::G",
            "h::i",
            "j::k",
            "p::q::l::M",
            "p::q::sib::S"
        ]
    );
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
        let all: Vec<String> = circles(&graph).iter().map(|g| g.join(" <-> ")).collect();
        panic!(
            "import circle: {} (every circle: {})",
            c.join(" -> "),
            all.join("; ")
        );
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

/// What each top-level module (a layer) may import, in the data's order: collect ends at
/// a snapshot, model builds the report, analysis judges it, render renders it, io
/// writes it, cli wires them. `error` (the crate's error type) and `safe` (escaping of
/// untrusted text) are the floor every layer may stand on.
const LAYERS: &[(&str, &[&str])] = &[
    ("safe", &[]),
    ("model", &[]),
    ("error", &["model"]),
    ("collect", &["model", "error", "safe"]),
    ("analysis", &["model", "safe"]),
    ("render", &["model", "safe"]),
    ("io", &["model", "error", "safe"]),
    (
        "cli",
        &[
            "model", "error", "safe", "collect", "analysis", "render", "io",
        ],
    ),
];

#[test]
fn no_layer_imports_one_above_it() {
    let graph = imports();
    let top = |m: &str| m.split("::").next().unwrap_or("").to_string();
    let mut wrong = Vec::new();
    for (m, deps) in &graph {
        if m.is_empty() {
            continue;
        }
        let Some((_, allowed)) = LAYERS.iter().find(|(l, _)| *l == top(m)) else {
            wrong.push(format!("{m} is in no layer of LAYERS"));
            continue;
        };
        for d in deps {
            if top(d) != top(m) && !allowed.contains(&top(d).as_str()) {
                wrong.push(format!("{m} -> {d}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the data's order: {wrong:?}"
    );
}

/// Longest function allowed without a written reason, lines (signature to closing brace).
const MAX_FN_LINES: usize = 80;

/// The sources the function-length and duplicate checks read: the library and binary,
/// the kernel programs and the project's tasks.
fn checked_sources() -> Vec<PathBuf> {
    let root = workspace();
    let mut files = Vec::new();
    for dir in ["nginx-probe/src", "nginx-probe-ebpf/src", "xtask/src"] {
        rust_files(&root.join(dir), &mut files);
    }
    files.sort();
    files
}

/// Every function (free, method, trait default, nested) of `text` as
/// `(name, first line, line count)`, with whether it says why it is long: a doc line or a
/// `//` comment among the first three lines of its body that holds "long because".
fn functions(text: &str) -> Vec<(String, usize, usize, bool)> {
    struct V<'a> {
        lines: Vec<&'a str>,
        out: Vec<(String, usize, usize, bool)>,
    }
    impl V<'_> {
        fn record(
            &mut self,
            name: String,
            attrs: &[syn::Attribute],
            block: &syn::Block,
            start: usize,
        ) {
            use syn::spanned::Spanned;
            let open = block.brace_token.span.open().start().line;
            let end = block.span().end().line;
            let doc = attrs.iter().any(|a| {
                a.path().is_ident("doc") && quote_free(a).to_lowercase().contains("long because")
            });
            let body = (open..(open + 3).min(end)).any(|l| {
                self.lines
                    .get(l.saturating_sub(1)..l)
                    .into_iter()
                    .flatten()
                    .any(|s| {
                        let s = s.trim_start();
                        s.starts_with("//") && s.to_lowercase().contains("long because")
                    })
            });
            self.out.push((name, start, end + 1 - start, doc || body));
        }
    }
    fn quote_free(a: &syn::Attribute) -> String {
        match &a.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) => s.value(),
                _ => String::new(),
            },
            _ => String::new(),
        }
    }
    impl<'a> syn::visit::Visit<'a> for V<'_> {
        fn visit_item_fn(&mut self, f: &'a syn::ItemFn) {
            let start = f.sig.fn_token.span.start().line;
            self.record(f.sig.ident.to_string(), &f.attrs, &f.block, start);
            syn::visit::visit_item_fn(self, f);
        }
        fn visit_impl_item_fn(&mut self, f: &'a syn::ImplItemFn) {
            let start = f.sig.fn_token.span.start().line;
            self.record(f.sig.ident.to_string(), &f.attrs, &f.block, start);
            syn::visit::visit_impl_item_fn(self, f);
        }
        fn visit_trait_item_fn(&mut self, f: &'a syn::TraitItemFn) {
            if let Some(b) = &f.default {
                let start = f.sig.fn_token.span.start().line;
                self.record(f.sig.ident.to_string(), &f.attrs, b, start);
            }
            syn::visit::visit_trait_item_fn(self, f);
        }
    }
    let Ok(file) = syn::parse_file(text) else {
        return Vec::new();
    };
    let mut v = V {
        lines: text.lines().collect(),
        out: Vec::new(),
    };
    syn::visit::Visit::visit_file(&mut v, &file);
    v.out
}

#[test]
fn the_function_reader_measures_and_finds_the_reason() {
    let body = "    let x = 1;\n".repeat(90);
    let text = format!(
        "fn short() {{\n    1;\n}}\n\nfn long() {{\n{body}}}\n\n/// Long because: a table.\nfn excused() {{\n{body}}}\n\nimpl S {{\n    fn m() {{\n        // Long because: one arm per message.\n{body}    }}\n}}\n"
    );
    let fns = functions(&text);
    let got: Vec<(&str, usize, bool)> = fns
        .iter()
        .map(|(n, _, len, why)| (n.as_str(), *len, *why))
        .collect();
    assert_eq!(
        got,
        vec![
            ("short", 3, false),
            ("long", 92, false),
            ("excused", 92, true),
            ("m", 93, true),
        ]
    );
}

#[test]
fn no_function_is_over_80_lines_without_its_reason() {
    let root = workspace();
    let files = checked_sources();
    assert!(files.len() > 20);
    let mut long = Vec::new();
    for f in &files {
        let text = fs::read_to_string(f).expect("read source");
        assert!(
            syn::parse_file(&text).is_ok(),
            "{} does not parse",
            f.display()
        );
        for (name, line, n, why) in functions(&text) {
            if n > MAX_FN_LINES && !why {
                let f = f.strip_prefix(&root).unwrap_or(f);
                long.push(format!("{}:{line} {name} ({n} lines)", f.display()));
            }
        }
    }
    assert!(
        long.is_empty(),
        "{} functions over {MAX_FN_LINES} lines with no `// Long because: ...` at their top:\n{}",
        long.len(),
        long.join("\n")
    );
}

/// Lines that carry code, trimmed, as the duplicate check compares them: blank lines,
/// comments, `use` lines and lines of punctuation alone are passed over.
fn code_lines(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let t = l.split_whitespace().collect::<Vec<_>>().join(" ");
            let skip = t.is_empty()
                || t.starts_with("//")
                || t.starts_with("/*")
                || t.starts_with('*')
                || t.starts_with("use ")
                || t.starts_with("pub use ")
                || t.chars().all(|c| !c.is_alphanumeric());
            (!skip).then_some((i + 1, t))
        })
        .collect()
}

/// Runs of [`DUP_RUN`] identical code lines that stand in two places of `files`
/// (`(path, text)`), as `"a.rs:10 ~ b.rs:40"`, one row per pair of places (overlapping
/// windows of one run are reported once).
fn duplicate_runs(files: &[(String, String)]) -> Vec<String> {
    let mut seen: BTreeMap<Vec<String>, Vec<(usize, usize)>> = BTreeMap::new();
    let lines: Vec<Vec<(usize, String)>> = files.iter().map(|(_, t)| code_lines(t)).collect();
    for (fi, ls) in lines.iter().enumerate() {
        for w in 0..ls.len().saturating_sub(DUP_RUN - 1) {
            let key: Vec<String> = ls[w..w + DUP_RUN].iter().map(|(_, s)| s.clone()).collect();
            seen.entry(key).or_default().push((fi, w));
        }
    }
    let mut pairs: BTreeSet<(usize, usize, usize, usize)> = BTreeSet::new();
    for places in seen.values() {
        for (i, a) in places.iter().enumerate() {
            for b in &places[i + 1..] {
                if a.0 == b.0 && b.1 < a.1 + DUP_RUN {
                    continue; // a run repeating itself line by line
                }
                pairs.insert((a.0, a.1, b.0, b.1));
            }
        }
    }
    // Keep the first window of each run: a pair whose predecessor window also pairs is
    // part of the same run.
    pairs
        .iter()
        .filter(|(fa, wa, fb, wb)| {
            !(*wa > 0 && *wb > 0 && pairs.contains(&(*fa, wa - 1, *fb, wb - 1)))
        })
        .map(|(fa, wa, fb, wb)| {
            format!(
                "{}:{} ~ {}:{}",
                files[*fa].0, lines[*fa][*wa].0, files[*fb].0, lines[*fb][*wb].0
            )
        })
        .collect()
}

/// How many identical code lines make a duplicate.
const DUP_RUN: usize = 6;

#[test]
fn the_duplicate_reader_finds_a_run_of_six_and_nothing_shorter() {
    let run =
        "let a = 1;\nlet b = 2;\nlet c = a + b;\nprintln!(\"{c}\");\nlet d = c * 2;\nreturn d;\n";
    let five: String = run.lines().take(5).map(|l| format!("{l}\n")).collect();
    let files = vec![
        ("a.rs".to_string(), format!("fn x() {{\n{run}}}\n")),
        (
            "b.rs".to_string(),
            format!("fn y() {{\n    // other\n{run}}}\n"),
        ),
        ("c.rs".to_string(), format!("fn z() {{\n{five}}}\n")),
    ];
    assert_eq!(duplicate_runs(&files), vec!["a.rs:2 ~ b.rs:3".to_string()]);
}

#[test]
fn no_six_identical_code_lines_stand_in_two_places() {
    let root = workspace();
    let files: Vec<(String, String)> = checked_sources()
        .iter()
        .map(|p| {
            let name = p.strip_prefix(&root).unwrap_or(p).display().to_string();
            (name, fs::read_to_string(p).expect("read source"))
        })
        .collect();
    let dups = duplicate_runs(&files);
    assert!(
        dups.is_empty(),
        "{} runs of {DUP_RUN} identical code lines in two places (one piece of code should serve both):\n{}",
        dups.len(),
        dups.join("\n")
    );
}
