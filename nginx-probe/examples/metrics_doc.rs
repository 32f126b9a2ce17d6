//! Prints the documentation's metrics table, made from the Prometheus families table
//! (`nginx_probe::render::prometheus::FAMILIES`). With `--write`, puts it in place of the
//! table in `docs/metrics.md` instead.
//! `cargo xtask metrics-doc [--write]` runs this.

use nginx_probe::render::prometheus_doc::{markdown_table, replace_table, DOC_PATH};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        [] => print!("{}", markdown_table()),
        ["--write"] => {
            if let Err(e) = write() {
                eprintln!("metrics_doc: {e}");
                std::process::exit(2);
            }
        }
        _ => {
            eprintln!("metrics_doc: usage: metrics_doc [--write]");
            std::process::exit(2);
        }
    }
}

/// Replaces the table in `docs/metrics.md`; says whether it changed.
fn write() -> Result<(), String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(DOC_PATH);
    let doc = std::fs::read_to_string(&path).map_err(|e| format!("{DOC_PATH}: {e}"))?;
    let new = replace_table(&doc).ok_or_else(|| format!("{DOC_PATH}: no metrics table"))?;
    if new == doc {
        println!("{DOC_PATH}: metrics table up to date");
    } else {
        std::fs::write(&path, new).map_err(|e| format!("{DOC_PATH}: {e}"))?;
        println!("{DOC_PATH}: metrics table rewritten");
    }
    Ok(())
}
