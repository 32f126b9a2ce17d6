//! Following a file nginx appends to, through the `/proc/<pid>/fd/<n>` link of the
//! process that writes it, so that no path (renamed, replaced by a symlink) is
//! followed: the first file is read from its size then (what it held before is not
//! ours to count; unless it was created after [`Tail::since`]: then all of it), a new file behind the link (rotation then `nginx -s reopen`) from
//! its start after the old one is finished, a truncated one (copytruncate) from 0
//! again. Bounded: [`MAX_READ_PER_POLL`] bytes a poll, lines cut at the caller's
//! limit, a backlog past [`MAX_BACKLOG`] skipped and counted. Lines are handed to the
//! caller and dropped: nothing of them is kept here. Used by the error log
//! (`error_log`) and the access logs (`access_log`).

use std::{
    fs::File,
    io::{Read, Seek, SeekFrom},
    os::unix::fs::{MetadataExt, OpenOptionsExt},
};

/// Bytes read from a file in one poll (500 ms): up to 8 MB/s of log lines.
pub const MAX_READ_PER_POLL: u64 = 4 << 20;
/// Unread bytes past which the reader jumps to the end (and counts them skipped):
/// a log growing faster than [`MAX_READ_PER_POLL`] is not chased forever.
pub const MAX_BACKLOG: u64 = 64 << 20;

/// What one poll found.
#[derive(Debug, PartialEq, Eq)]
pub enum Polled {
    /// The same file as before, read on.
    Read,
    /// A new file was opened (the first, or nginx's new one): its path.
    Opened(String),
    /// The link cannot be followed now (the process gone, not a regular file): why.
    /// What was read and counted stays.
    Gone(String),
    /// The file could not be opened: why.
    Failed(String),
}

/// One followed file; see the module doc.
pub struct Tail {
    /// (dev, ino) and the open file being read.
    current: Option<((u64, u64), File)>,
    offset: u64,
    /// The current line so far (at most `max_line` bytes).
    partial: Vec<u8>,
    max_line: usize,
    /// The current line is longer than `max_line`: the rest is being skipped.
    overlong: bool,
    /// Lines too long to keep whole (handed on cut to `max_line` bytes).
    pub lines_cut: u64,
    /// Bytes jumped over because the reader fell [`MAX_BACKLOG`] behind, or lost when
    /// the file was truncated or replaced before being read to its end.
    pub bytes_skipped: u64,
    /// Bytes the file held past the offset at the last read: how far the reader is
    /// behind (at most [`MAX_BACKLOG`]; a larger backlog is skipped).
    pub backlog: u64,
    /// Truncations seen while reading (copytruncate): what was written after the last
    /// read and before each is lost, in an unknown amount.
    pub truncations: u64,
    /// Files read (1, plus one per rotation/reopen seen).
    pub files: u64,
    /// A first file created (statx birth time) at or after this is read from its
    /// start: everything in it was written since. None: always from its size.
    since: Option<std::time::SystemTime>,
}

impl Tail {
    /// A tail that hands on lines of at most `max_line` bytes.
    pub fn new(max_line: usize) -> Tail {
        Tail {
            current: None,
            offset: 0,
            partial: Vec::new(),
            max_line,
            overlong: false,
            lines_cut: 0,
            bytes_skipped: 0,
            backlog: 0,
            truncations: 0,
            files: 0,
            since: None,
        }
    }

    /// Reads a first file created at or after `t` from its start (a log nginx opened
    /// after attach, or after a reload that changed its path, holds only lines written
    /// since); one created before, or whose birth time the filesystem does not keep,
    /// from its size.
    pub fn since(mut self, t: std::time::SystemTime) -> Tail {
        self.since = Some(t);
        self
    }

    /// Whether a file is open.
    pub fn has_file(&self) -> bool {
        self.current.is_some()
    }

    /// Device and inode of the file being read.
    pub fn file_id(&self) -> Option<(u64, u64)> {
        self.current.as_ref().map(|(id, _)| *id)
    }

    /// Follows `link` (a `/proc/<pid>/fd/<n>` entry, or any symlink in tests): reads
    /// what was appended (at most [`MAX_READ_PER_POLL`] bytes) and hands each
    /// complete line to `line`. `not_file(target)` says why a link to something other
    /// than a regular file is not read; `first(file, offset)` is called once, when the
    /// first file is opened, with its size then.
    pub fn poll(
        &mut self,
        link: &str,
        not_file: &dyn Fn(&str) -> String,
        first: &mut dyn FnMut(&mut File, u64),
        line: &mut dyn FnMut(&[u8]),
    ) -> Polled {
        self.poll_wanting(link, None, not_file, first, line)
    }

    /// [`Tail::poll`], but a file behind the link that is neither the one being read
    /// nor `want` (device, inode) is not followed: the fd number was closed and reused
    /// for another file (`nginx -s reopen` closes each log's old fd), and the link is
    /// said to be gone. None: any file is followed, as a rotation.
    pub fn poll_wanting(
        &mut self,
        link: &str,
        want: Option<(u64, u64)>,
        not_file: &dyn Fn(&str) -> String,
        first: &mut dyn FnMut(&mut File, u64),
        line: &mut dyn FnMut(&[u8]),
    ) -> Polled {
        let (id, path) = match target(link, not_file) {
            Ok(t) => t,
            Err(why) => return Polled::Gone(why),
        };
        if self.file_id() != Some(id) && want.is_some_and(|w| w != id) {
            return Polled::Gone(format!("{link} now names another file ({path})"));
        }
        let mut opened = None;
        if self.file_id() != Some(id) {
            // A new file behind the link: finish the old one first (what nginx wrote
            // before reopening), then read the new one from its start.
            if self.current.is_some() {
                self.read_some(line);
                if let Some((_, f)) = &self.current {
                    if let Ok(m) = f.metadata() {
                        self.bytes_skipped += m.len().saturating_sub(self.offset);
                    }
                }
            }
            // O_NONBLOCK: a FIFO or device swapped in behind the link between the look
            // and the open must not block the probe (it is refused just below).
            let file = match std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
                .open(link)
            {
                Ok(f) => f,
                Err(e) => return Polled::Failed(format!("cannot open {path}: {e}")),
            };
            // Check what was opened, not what was looked at (the link may change).
            match file.metadata().map(|m| (m.dev(), m.ino(), m.is_file())) {
                Ok((d, i, true)) if (d, i) == id => {}
                _ => return Polled::Failed(format!("{path} changed while opening")),
            }
            let mut file = file;
            self.offset = if self.files == 0 {
                let meta = file.metadata();
                let len = meta.as_ref().map(|m| m.len()).unwrap_or(0);
                let born_since = match (self.since, meta.and_then(|m| m.created())) {
                    (Some(t), Ok(b)) => b >= t,
                    _ => false,
                };
                if born_since {
                    0
                } else {
                    first(&mut file, len);
                    len
                }
            } else {
                0
            };
            self.partial.clear();
            self.overlong = false;
            self.current = Some((id, file));
            self.files += 1;
            opened = Some(path);
        }
        self.read_some(line);
        match opened {
            Some(p) => Polled::Opened(p),
            None => Polled::Read,
        }
    }

    /// Reads on in the file already open (up to [`MAX_READ_PER_POLL`] bytes), when the
    /// link is gone: what its last writers appended before they exited or closed it.
    pub fn read_open(&mut self, line: &mut dyn FnMut(&[u8])) {
        self.read_some(line);
    }

    /// Reads up to [`MAX_READ_PER_POLL`] bytes from the current offset.
    fn read_some(&mut self, line: &mut dyn FnMut(&[u8])) {
        let Some((id, mut file)) = self.current.take() else {
            return;
        };
        self.read_file(&mut file, line);
        self.current = Some((id, file));
    }

    fn read_file(&mut self, file: &mut File, line: &mut dyn FnMut(&[u8])) {
        let len = match file.metadata() {
            Ok(m) => m.len(),
            Err(_) => return,
        };
        if len < self.offset {
            // Truncated (copytruncate): what was written after our last read and before
            // the truncation is lost.
            self.truncations += 1;
            self.offset = 0;
            self.partial.clear();
            self.overlong = false;
        }
        if len - self.offset > MAX_BACKLOG {
            self.bytes_skipped += len - self.offset;
            self.offset = len;
            self.partial.clear();
            self.overlong = false;
            self.backlog = 0;
            return;
        }
        let want = (len - self.offset).min(MAX_READ_PER_POLL);
        if want == 0 || file.seek(SeekFrom::Start(self.offset)).is_err() {
            return;
        }
        let read = read_chunks(file, want, &mut |chunk| {
            for &b in chunk {
                if b == b'\n' {
                    line(&self.partial);
                    self.partial.clear();
                    self.overlong = false;
                } else if self.partial.len() < self.max_line {
                    self.partial.push(b);
                } else if !self.overlong {
                    self.overlong = true;
                    self.lines_cut += 1;
                }
            }
        });
        self.offset += read;
        self.backlog = len.saturating_sub(self.offset);
    }
}

/// Reads at most `want` bytes of `file` from its current position, 64 KB at a time,
/// handing each piece read to `chunk`; stops early at the file's end or a read error.
/// Returns the bytes read.
pub(crate) fn read_chunks(file: &mut File, want: u64, chunk: &mut dyn FnMut(&[u8])) -> u64 {
    let mut buf = vec![0u8; 64 << 10];
    let mut left = want;
    while left > 0 {
        let n = (buf.len() as u64).min(left) as usize;
        let got = match file.read(&mut buf[..n]) {
            Ok(0) | Err(_) => break,
            Ok(g) => g,
        };
        left -= got as u64;
        chunk(&buf[..got]);
    }
    want - left
}

/// Why a log nginx writes to `/dev/null` is not read: a deliberate setting (`access_log
/// /dev/null`, `error_log /dev/null`), said as what it is, not as a wrong file type.
pub const DISCARDED: &str = "/dev/null: nginx is configured to discard these writes (a log to /dev/null), so there are no lines to count";

/// Whether `meta` is the null device (character device 1:3, whatever its path is
/// called inside nginx's root): what nginx writes there is discarded, reading it
/// gives nothing.
pub fn is_null_device(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::FileTypeExt;
    let rdev = meta.rdev();
    meta.file_type().is_char_device()
        && nix::sys::stat::major(rdev) == 1
        && nix::sys::stat::minor(rdev) == 3
}

/// What `link` points at now: Ok((dev, ino), path) for a regular file, or why it cannot
/// be read ([`DISCARDED`] for the null device; `not_file` for any other device, fifo
/// or socket, never read).
fn target(link: &str, not_file: &dyn Fn(&str) -> String) -> Result<((u64, u64), String), String> {
    let path = std::fs::read_link(link)
        .map(|p| p.to_string_lossy().into_owned())
        .map_err(|e| format!("cannot read {link}: {e}"))?;
    let meta = std::fs::metadata(link).map_err(|e| format!("cannot stat {link}: {e}"))?;
    if !meta.file_type().is_file() {
        return Err(if is_null_device(&meta) {
            DISCARDED.to_string()
        } else {
            not_file(&path)
        });
    }
    Ok(((meta.dev(), meta.ino()), path))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `access_log /dev/null` / `error_log /dev/null`: said as discarded writes, not as
    /// "not a regular file"; a fifo is still refused as one.
    #[test]
    fn a_log_to_dev_null_is_discarded_not_a_wrong_file() {
        let dir = tempfile::tempdir().unwrap();
        let null = dir.path().join("null");
        std::os::unix::fs::symlink("/dev/null", &null).unwrap();
        let not_file = |t: &str| format!("{t} is not a regular file");
        let err = target(null.to_str().unwrap(), &not_file).unwrap_err();
        assert_eq!(err, DISCARDED);
        assert!(!err.contains("not a regular file"), "{err}");
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let link = dir.path().join("to_fifo");
        std::os::unix::fs::symlink(&fifo, &link).unwrap();
        let err = target(link.to_str().unwrap(), &not_file).unwrap_err();
        assert!(err.ends_with("fifo is not a regular file"), "{err}");
    }
}
