//! Making text that nginx-probe did not write itself safe for a terminal.
//!
//! nginx-probe runs as root and prints what others control: process titles and paths
//! (any user can start an nginx with any prefix), host and kernel names, and every string
//! of a recording someone sent (verdict text, event names, enum values, serde's error
//! messages quoting them). A terminal obeys escape sequences in what it is given
//! (`ESC ] 0 ; title BEL` retitles the window, `ESC [ 2 J` clears the screen), so every
//! such string goes through this module before any terminal or plain-text output: control
//! characters are shown visibly (`\x1b`, `\u{202e}`) and never emitted.
//!
//! - [`line`]: one string, all control characters escaped, newlines included (a value
//!   can never start a line of its own).
//! - [`bounded`]: like [`line`], cut at a number of characters (a process title, a
//!   pid file's text in a one-line error).
//! - [`block`]: a whole rendered text, newlines and tabs kept (the renderer's own).
//! - [`sanitized`]: any serde value (a [`crate::model::Report`], a recording header) with
//!   every string and map key passed through [`line`]. It works on the serialized form,
//!   so fields added to the schema later are covered without naming them. For text
//!   only: a report keeps the raw strings nginx and /proc gave.
//! - [`json`]: JSON for stdout and recordings. Every string keeps its exact value (a
//!   reader parses back the raw path), and the characters [`line`] escapes are written
//!   as JSON `\uXXXX` escapes, so the JSON text itself never drives a terminal either
//!   (serde_json alone leaves DEL, C1 controls and bidirectional overrides raw).

use std::{borrow::Cow, fmt::Write as _};

use serde::{de::DeserializeOwned, Serialize};

/// True for characters a terminal may act on instead of showing: C0 controls, DEL, C1
/// controls (`U+009B` is CSI on some terminals), and the Unicode format characters that
/// reorder or hide text (bidirectional overrides and isolates, zero-width joiners, BOM).
fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}')
}

fn escape(s: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(|c| is_unsafe(c) && !keep(c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if !is_unsafe(c) || keep(c) {
            out.push(c);
        } else if (c as u32) < 0x100 {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
    Cow::Owned(out)
}

/// `s` with every control or format character shown as an escape (`\x1b`, `\x0a`,
/// `\u{202e}`): safe to print inside a line of output. Borrowed when nothing needed
/// escaping.
pub fn line(s: &str) -> Cow<'_, str> {
    escape(s, |_| false)
}

/// `s` escaped as by [`line`] and cut at `max` characters of the escaped text, with `…`
/// when cut: for strings others control that could be any length (process titles,
/// command lines, pid file text) shown inside one line. A cut may split an escape
/// (`\x1`), never emit a control character.
pub fn bounded(s: &str, max: usize) -> String {
    let escaped = line(s);
    let mut chars = escaped.chars();
    let mut out: String = chars.by_ref().take(max).collect();
    if chars.next().is_some() {
        out.push('…');
    }
    out
}

/// A whole rendered text (several lines): like [`line`] but keeps `\n` and `\t`, which
/// the renderers write themselves. The last guard before a terminal or file.
pub fn block(s: &str) -> Cow<'_, str> {
    escape(s, |c| c == '\n' || c == '\t')
}

/// Passes every string and map key of a JSON value through [`line`].
pub fn sanitize_value(v: &mut serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::String(s) => {
            if let Cow::Owned(o) = line(s) {
                *s = o;
            }
        }
        Value::Array(a) => a.iter_mut().for_each(sanitize_value),
        Value::Object(m) => {
            if m.keys().any(|k| matches!(line(k), Cow::Owned(_))) {
                let old = std::mem::take(m);
                for (k, mut val) in old {
                    sanitize_value(&mut val);
                    m.insert(line(&k).into_owned(), val);
                }
            } else {
                m.values_mut().for_each(sanitize_value);
            }
        }
        _ => {}
    }
}

/// A copy of `t` with every string in it (fields and map keys, at any depth) passed
/// through [`line`], made through its serialized form so new fields are covered.
/// Numbers, booleans and nulls are unchanged (serde_json keeps f64 exact). Falls back to
/// a plain clone when `t` does not read back from its own JSON (a renamed escaped key
/// that an enum would refuse): the caller's [`block`] pass still applies then.
pub fn sanitized<T: Serialize + DeserializeOwned + Clone>(t: &T) -> T {
    let Ok(mut v) = serde_json::to_value(t) else {
        return t.clone();
    };
    sanitize_value(&mut v);
    serde_json::from_value(v).unwrap_or_else(|_| t.clone())
}

/// serde_json's compact formatter, with every character [`is_unsafe`] finds written as
/// a `\uXXXX` escape (serde_json escapes C0 controls itself).
struct TerminalSafeJson;

impl serde_json::ser::Formatter for TerminalSafeJson {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let mut rest = fragment;
        while let Some((i, c)) = rest.char_indices().find(|&(_, c)| is_unsafe(c)) {
            w.write_all(&rest.as_bytes()[..i])?;
            for unit in c.encode_utf16(&mut [0; 2]) {
                write!(w, "\\u{unit:04x}")?;
            }
            rest = &rest[i + c.len_utf8()..];
        }
        w.write_all(rest.as_bytes())
    }
}

/// `t` as one line of JSON (no trailing newline): strings exact, with the characters a
/// terminal may act on escaped as `\uXXXX` (see the module doc). Empty when `t` cannot
/// be serialized (a map with non-string keys; none in this crate's types).
pub fn json<T: Serialize + ?Sized>(t: &T) -> String {
    let mut out = Vec::with_capacity(4096);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, TerminalSafeJson);
    if t.serialize(&mut ser).is_err() {
        return String::new();
    }
    // Only valid UTF-8 is written: serde_json's output plus ASCII escapes.
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const OSC_TITLE: &str = "\x1b]0;pwned\x07";
    const CLEAR: &str = "\x1b[2J";

    #[test]
    fn escape_sequences_are_shown_not_emitted() {
        let prefix = format!("/tmp/{OSC_TITLE}x{CLEAR}/nginx.conf");
        let s = line(&prefix);
        assert_eq!(s, "/tmp/\\x1b]0;pwned\\x07x\\x1b[2J/nginx.conf");
        assert!(!s.contains('\x1b') && !s.contains('\x07'));
        assert_eq!(
            line("a\nb\r\tc\u{9b}d\u{7f}"),
            "a\\x0ab\\x0d\\x09c\\x9bd\\x7f"
        );
        assert_eq!(line("evil\u{202e}txt.exe"), "evil\\u{202e}txt.exe");
        // Text without controls is borrowed, UTF-8 kept.
        assert!(matches!(
            line("nginx: master process /srv/été"),
            Cow::Borrowed(_)
        ));
        assert_eq!(block("a\tb\nc\x1b[2J\n"), "a\tb\nc\\x1b[2J\n");
    }

    #[test]
    fn sanitized_reaches_every_string_and_key() {
        let mut m = std::collections::BTreeMap::new();
        m.insert(format!("k{CLEAR}"), vec![format!("v{OSC_TITLE}")]);
        m.insert("plain".to_string(), vec!["ok".to_string()]);
        let s = sanitized(&m);
        assert_eq!(s["k\\x1b[2J"], vec!["v\\x1b]0;pwned\\x07".to_string()]);
        assert_eq!(s["plain"], vec!["ok".to_string()]);
        let text = serde_json::to_string(&s).unwrap();
        assert!(!text.contains("\\u001b"), "{text}");
    }

    #[test]
    fn json_keeps_exact_strings_and_emits_no_control_character() {
        let raw = format!("/srv/{OSC_TITLE}{CLEAR}\nx\u{9b}1m\u{7f}\u{202e}été/access.log");
        let mut m = std::collections::BTreeMap::new();
        m.insert(raw.clone(), vec![raw.clone(), "plain".to_string()]);
        let text = json(&m);
        assert!(
            !text.chars().any(is_unsafe),
            "a character a terminal acts on in {text:?}"
        );
        // Escaped as JSON, never as this module's text escapes (`\x1b`, `\u{1b}`).
        assert!(text.contains("\\u001b]0;pwned\\u0007"), "{text}");
        assert!(
            text.contains("\\u009b1m\\u007f\\u202e\u{e9}t\u{e9}"),
            "{text}"
        );
        assert!(
            !text.contains("\\x1b") && !text.contains("\\u{1b}"),
            "{text}"
        );
        let back: std::collections::BTreeMap<String, Vec<String>> =
            serde_json::from_str(&text).unwrap();
        assert_eq!(back, m);
        assert_eq!(json(&"plain"), "\"plain\"");
    }
}
