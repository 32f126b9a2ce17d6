//! nginx's error-log entries told from lines a request wrote into the log: nginx
//! decodes a `%0A` of a URI into the file name it logs, so one entry (one write(),
//! at most [`MAX_ENTRY`] bytes) can hold lines of the client's choosing.
//! [`EntryFilter`] holds lines until no later line can show they were the request's
//! (its `request:` field, [`request_lines`], or an entry cut at the bound,
//! [`cut_entry_lines`]). Pure; the readers are `error_log` and `error_log_history`.

use super::error_log_classes::level_and_message;

/// The most an nginx error-log entry holds, bytes (`NGX_MAX_ERROR_STR`, 2048, with its
/// line feed): no line further back than this belongs to the entry being read.
pub const MAX_ENTRY: usize = 2048;

/// The decoded path of a raw request line (`GET /a%0Ab?q HTTP/1.1` -> `/a\nb`): the
/// second word up to its query, `%XX` decoded (nginx decodes the path, not the query,
/// into the file names it logs). None without a path. Pure.
fn decoded_path(raw: &[u8]) -> Option<Vec<u8>> {
    let uri = raw.split(|&b| b == b' ').nth(1)?;
    let path = uri.split(|&b| b == b'?').next()?;
    let hex = |b: Option<&u8>| b.and_then(|&b| (b as char).to_digit(16)).map(|d| d as u8);
    let mut out = Vec::with_capacity(path.len());
    let mut i = 0;
    while i < path.len() {
        match (path[i], hex(path.get(i + 1)), hex(path.get(i + 2))) {
            (b'%', Some(h), Some(l)) => {
                out.push(h << 4 | l);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    Some(out)
}

/// How many of the lines ending at `line` a request wrote into the log: n when one of
/// the line's `, request: "..."` fields (nginx's raw request line; a client's copy in a
/// Referer or in the path itself is tried too, and only a verified one counts) has a
/// path that decodes into n + 1 segments split at newlines, and the n lines before
/// `line` in `pending` (its newest last) and `line` itself are exactly those segments:
/// `pending`'s line n back ends with the first segment (nginx's own header line
/// quoting the file name), the lines after it are the middle segments, and `line`
/// starts with the last. 0 otherwise: a `%0A` in a query, or in a path nginx logged
/// without decoding, takes back no line. Pure.
pub fn request_lines(line: &[u8], pending: &std::collections::VecDeque<Vec<u8>>) -> usize {
    request_split(line, pending).map_or(0, |(n, _)| n)
}

/// [`request_lines`]' n with the length of the request's last segment, which `line`
/// starts with (what follows it is nginx's: the rest of its entry); None for 0.
fn request_split(
    line: &[u8],
    pending: &std::collections::VecDeque<Vec<u8>>,
) -> Option<(usize, usize)> {
    const KEY: &[u8] = b", request: \"";
    let mut from = 0;
    while let Some(at) = line[from..].windows(KEY.len()).position(|w| w == KEY) {
        let start = from + at + KEY.len();
        from = start;
        let end = line[start..]
            .iter()
            .position(|&b| b == b'"')
            .map_or(line.len(), |e| start + e);
        let Some(path) = decoded_path(&line[start..end]) else {
            continue;
        };
        let segs: Vec<&[u8]> = path.split(|&b| b == b'\n').collect();
        let n = segs.len() - 1;
        if n == 0 || n > pending.len() {
            continue;
        }
        let back = pending.len() - n;
        let verified = pending[back].ends_with(segs[0])
            && (1..n).all(|k| pending[back + k] == segs[k])
            && line.starts_with(segs[n]);
        if verified {
            return Some((n, segs[n].len()));
        }
    }
    None
}

/// How many of the lines ending at `line` are the rest of an entry nginx cut at
/// [`MAX_ENTRY`] bytes after a path it quoted: n when `pending`'s line n back is an
/// nginx line whose message opens a quoted path ([`quotes_a_path`]: `open() "`,
/// `"`, `directory index of "`) and it, the n - 1 lines after it and `line` (each
/// with its line feed) add up to exactly [`MAX_ENTRY`] bytes. nginx cuts an entry
/// longer than that to 2047 bytes and its line feed, and the cut drops the
/// `, request: "..."` field [`request_lines`] verifies by, so a request whose
/// decoded path holds line feeds and is padded past the bound writes lines no check
/// can tell from nginx's but this one. 0 otherwise. Pure.
pub fn cut_entry_lines(line: &[u8], pending: &std::collections::VecDeque<Vec<u8>>) -> usize {
    let mut bytes = line.len() + 1;
    for (n, p) in pending.iter().rev().enumerate() {
        bytes += p.len() + 1;
        if bytes > MAX_ENTRY {
            return 0;
        }
        if bytes == MAX_ENTRY {
            let opens = level_and_message(p).is_some_and(|(_, msg)| quotes_a_path(msg));
            return if opens { n + 1 } else { 0 };
        }
    }
    0
}

/// Where nginx writes the errno of an entry it cut: `...` at [`MAX_ENTRY`] - 50 bytes,
/// then ` (N: strerror)` (`ngx_log_errno` steps back there when the message ran
/// past it), so what follows is nginx's own, never the client's.
const CUT_ERRNO_AT: usize = MAX_ENTRY - 50;

/// The errno nginx wrote at the end of an entry it cut (`... (2: No such file or
/// directory)` and the rest of the entry), from `last`, the entry's last line,
/// `before` bytes into the entry: None when there is none at its fixed place
/// ([`CUT_ERRNO_AT`]). Pure.
fn errno_of_cut_entry(last: &[u8], before: usize) -> Option<&[u8]> {
    let tail = last.get(CUT_ERRNO_AT.checked_sub(before)?..)?;
    let digits = tail
        .get(5..)?
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    (tail.starts_with(b"... (") && digits > 0 && tail[5 + digits..].starts_with(b": "))
        .then_some(tail)
}

/// Whether a message starts by quoting a path nginx built from a request's decoded
/// URI, the only place a line feed can enter nginx's words: `open() "`, `stat() "`
/// (any `call() "`), `"/x" is not found`, `directory index of "`. Pure.
fn quotes_a_path(msg: &str) -> bool {
    let call = msg
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
        .count();
    msg.starts_with('"')
        || msg.starts_with("directory index of \"")
        || (call > 0 && msg[call..].starts_with("() \""))
}

/// Lines of the error log held until no later line can show that a request wrote
/// them: a line whose request's decoded path matches it and the lines before it
/// ([`request_lines`]: n) ends an entry whose last n lines began inside a URI nginx
/// decoded, or a line that ends an entry nginx cut at [`MAX_ENTRY`] bytes after a
/// quoted path ([`cut_entry_lines`]: n; the header gets its errno back); those n
/// lines (it and the n - 1 before it, within [`MAX_ENTRY`] bytes) are not nginx's and
/// are handed to `forged`, the others to `line` in order. Call [`EntryFilter::flush`] when a read
/// ends: nginx writes an entry whole, with one write().
#[derive(Default)]
pub struct EntryFilter {
    pending: std::collections::VecDeque<Vec<u8>>,
    pending_bytes: usize,
}

impl EntryFilter {
    /// One line (without its line feed).
    pub fn push(&mut self, l: &[u8], line: &mut dyn FnMut(&[u8]), forged: &mut dyn FnMut(&[u8])) {
        let split = request_split(l, &self.pending);
        let mut n = split.map_or(0, |(n, _)| n);
        if let Some((n, last)) = split {
            // The entry's header gets nginx's end of it back (trial 21: 20 404s of a
            // %0A path were `other`, the header alone lacking `failed (2: ...)`).
            let header = self.pending.len() - n;
            let rest = &l[last.min(l.len())..];
            self.pending[header].extend_from_slice(rest);
            self.pending_bytes += rest.len();
        }
        if n == 0 {
            n = cut_entry_lines(l, &self.pending);
            if n > 0 {
                self.errno_to_header(l, n);
            }
        }
        if n > 0 {
            forged(l);
            for _ in 1..n {
                let Some(p) = self.pending.pop_back() else {
                    break;
                };
                self.pending_bytes -= p.len() + 1;
                forged(&p);
            }
        } else {
            self.pending_bytes += l.len() + 1;
            self.pending.push_back(l.to_vec());
        }
        while self.pending_bytes > MAX_ENTRY {
            let Some(p) = self.pending.pop_front() else {
                break;
            };
            self.pending_bytes -= p.len() + 1;
            line(&p);
        }
    }

    /// Gives the header line of an entry nginx cut (`n` lines ending at `last`, the
    /// header `n` back in `pending`) the errno nginx wrote at the cut's end, so the
    /// line is classed as nginx wrote it (`open() "/x... (2: No such file or
    /// directory)`: `file_not_found`).
    fn errno_to_header(&mut self, last: &[u8], n: usize) {
        let header = self.pending.len() - n;
        let before: usize = self.pending.range(header..).map(|p| p.len() + 1).sum();
        if let Some(errno) = errno_of_cut_entry(last, before) {
            self.pending[header].extend_from_slice(errno);
            self.pending_bytes += errno.len();
        }
    }

    /// Hands every held line to `line`.
    pub fn flush(&mut self, line: &mut dyn FnMut(&[u8])) {
        while let Some(p) = self.pending.pop_front() {
            line(&p);
        }
        self.pending_bytes = 0;
    }
}
