//! The documentation's metrics table (markdown), made from [`FAMILIES`]: one row a
//! family, its name, type, labels, layer (what `--detail sampled` does to it) and
//! `# HELP` text. A host test checks the table in the
//! docs is this one; `cargo xtask metrics-doc` prints it (`--write` puts it in place).

use super::prometheus_families::FAMILIES;

/// First line of the metrics table; how [`find_table`] finds it in a document.
pub const TABLE_HEADER: &str = "| metric | type | labels | layer | help |";

/// Path of the document with the metrics table, from the workspace root.
pub const DOC_PATH: &str = "docs/metrics.md";

/// The metrics table as markdown, ending with a newline.
pub fn markdown_table() -> String {
    let mut t = format!("{TABLE_HEADER}\n| --- | --- | --- | --- | --- |\n");
    for f in FAMILIES {
        let labels: Vec<String> = f.labels.iter().map(|l| format!("`{l}`")).collect();
        t += &format!(
            "| `{}` | {} | {} | {} | {} |\n",
            f.name,
            f.kind.name(),
            labels.join(", "),
            f.layer.name(),
            cell(&f.help_text())
        );
    }
    t
}

/// A markdown table cell: `|` escaped, `<` and `>` as entities (`/proc/<pid>/stat`
/// would otherwise be taken for a tag).
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Byte range of the metrics table in `doc`: from its [`TABLE_HEADER`] line to the
/// first line after it that is not a table row.
pub fn find_table(doc: &str) -> Option<std::ops::Range<usize>> {
    let start = doc
        .match_indices(TABLE_HEADER)
        .map(|(i, _)| i)
        .find(|&i| i == 0 || doc.as_bytes()[i - 1] == b'\n')?;
    let mut end = start;
    for line in doc[start..].split_inclusive('\n') {
        if !line.starts_with('|') {
            break;
        }
        end += line.len();
    }
    Some(start..end)
}

/// `doc` with its metrics table replaced by [`markdown_table`]; None when it has none.
pub fn replace_table(doc: &str) -> Option<String> {
    let r = find_table(doc)?;
    Some(format!(
        "{}{}{}",
        &doc[..r.start],
        markdown_table(),
        &doc[r.end..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_and_replaces_the_table() {
        let doc =
            format!("# Metrics\n\n{TABLE_HEADER}\n| --- |\n| `x` | gauge | | old |\n\nAfter.\n");
        let r = find_table(&doc).unwrap();
        assert!(doc[r.clone()].starts_with(TABLE_HEADER));
        assert!(doc[r].ends_with("| old |\n"));
        let new = replace_table(&doc).unwrap();
        assert!(new.starts_with("# Metrics\n\n| metric |"), "{new}");
        assert!(new.ends_with("|\n\nAfter.\n"), "{new}");
        assert!(new.contains(
            "| `nginx_probe_verdict` | gauge | `id`, `severity` | continuous | 1 for each finding"
        ));
        assert_eq!(find_table("no table\n"), None);
    }

    #[test]
    fn cells_escape_pipes_and_angle_brackets() {
        assert_eq!(cell("a|b /proc/<pid>/fd"), "a\\|b /proc/&lt;pid&gt;/fd");
    }

    /// The docs list exactly the families of [`FAMILIES`], with their type, labels and
    /// help (regenerate with `cargo xtask metrics-doc --write`).
    #[test]
    fn docs_table_is_the_families_table() {
        let path = DOC_PATH;
        let doc =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/metrics.md"))
                .expect("docs/metrics.md");
        let r = find_table(&doc).unwrap_or_else(|| panic!("{path}: no line `{TABLE_HEADER}`"));
        let want = markdown_table();
        let have = &doc[r];
        let rows = |t: &str| -> Vec<String> { t.lines().map(str::to_string).collect() };
        let (have_rows, want_rows) = (rows(have), rows(&want));
        for (h, w) in have_rows.iter().zip(&want_rows) {
            assert_eq!(h, w, "{path}: run `cargo xtask metrics-doc --write`");
        }
        assert_eq!(
            have_rows.len(),
            want_rows.len(),
            "{path}: rows differ; run `cargo xtask metrics-doc --write`"
        );
    }
}
