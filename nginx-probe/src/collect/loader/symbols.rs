//! Bounded reads of an ELF binary's symbol tables: where named functions are (the
//! accept counter's caller range, libssl's functions in an nginx linked with OpenSSL
//! statically). The file is read through a cache, section by section, never whole;
//! symbol and string tables over [`MAX_DYN_TABLE`] are refused unread.

use std::{fs::File, path::Path};

use object::{Object as _, ObjectSection as _, ObjectSymbol as _};

use crate::collect::nginx_counters::MAX_DYN_TABLE;

/// What [`symbols_in`] found in one binary.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Symbols {
    /// Per name asked, in order: (link-time address, size in bytes) of its first
    /// definition, dynamic symbols first, then the full table; None when absent.
    pub found: Vec<Option<(u64, u64)>>,
    /// Whether the binary has a full symbol table (`.symtab`): false when stripped,
    /// leaving only what it exports (`.dynsym`).
    pub has_symtab: bool,
}

/// The definitions of `names` in the ELF file at `path` (dynamic symbols first, then
/// the full table; tables over 16 MiB are refused unread).
///
/// Errors: one line (unreadable, not ELF, a table too large).
pub fn symbols_in(path: &Path, names: &[&str]) -> Result<Symbols, String> {
    let f = File::open(path).map_err(|e| format!("cannot open {} ({e})", path.display()))?;
    let cache = object::ReadCache::new(&f);
    let obj = object::File::parse(&cache).map_err(|e| format!("not an ELF binary ({e})"))?;
    for name in [".dynsym", ".dynstr", ".symtab", ".strtab"] {
        if let Some(s) = obj.section_by_name(name) {
            if s.size() > MAX_DYN_TABLE {
                return Err(format!("{name} is {} bytes, too large to read", s.size()));
            }
        }
    }
    let mut found = vec![None; names.len()];
    for s in obj.dynamic_symbols().chain(obj.symbols()) {
        if !s.is_definition() {
            continue;
        }
        let Ok(name) = s.name() else { continue };
        // Every position asking for it: a name may be asked twice (a uprobe and a
        // uretprobe on one function).
        for (i, _) in names.iter().enumerate().filter(|(_, n)| **n == name) {
            found[i].get_or_insert((s.address(), s.size()));
        }
    }
    Ok(Symbols {
        found,
        has_symtab: obj.section_by_name(".symtab").is_some(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_is_not_elf_is_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("nginx");
        std::fs::write(&p, b"#!/bin/sh\n").unwrap();
        let e = symbols_in(&p, &["main"]).unwrap_err();
        assert!(e.starts_with("not an ELF binary"), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn the_test_binary_itself_has_its_functions_and_lacks_others() {
        // This test binary: not stripped, `main` defined, no OpenSSL function.
        let exe = std::env::current_exe().unwrap();
        let s = symbols_in(&exe, &["main", "SSL_do_handshake", "main"]).unwrap();
        assert!(s.has_symtab);
        assert!(s.found[0].is_some(), "{s:?}");
        assert_eq!(s.found[1], None);
        // A name asked twice is found at both places.
        assert_eq!(s.found[2], s.found[0]);
    }
}
