//! The shape of the source tree, checked without root (`cargo test -p nginx-probe`):
//!
//! - no circle of imports between the modules of `nginx-probe/src` (a module is a file,
//!   found from `lib.rs` through its `mod` items as rustc finds it; an import is any
//!   `crate::`, `super::` or `self::` path, in `use` trees, inline or in a macro's tokens,
//!   read with `syn`);
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
