//! Finds and reads the configuration a running nginx master loaded: the main file from
//! the master's `-c`/`-p` and its `-g` directives (read back from its title in
//! `/proc/<pid>/cmdline`, which joins its arguments with spaces: see [`title`]; when
//! the title does not say where the main file is, every setting is unknown), else
//! `--conf-path=`/`--prefix=` from the configure arguments compiled into its
//! binary (a bounded scan of `/proc/<pid>/exe`; the binary is never run). Every path is
//! opened with `openat2(RESOLVE_IN_ROOT)` under the master's own root
//! (`/proc/<pid>/root`: nginx in a container or chroot), so no symlink leads out of it.
//! `include` is followed as nginx does (relative to the main file's directory, globs
//! sorted), within [`Limits`]. Parsing is `nginx_lint_parser` (any directive, with its
//! line); the effective values are [`crate::model::config::evaluate`]'s. A problem is
//! one line in [`ConfigReport::errors`] and never stops profiling.

use std::{
    io::Read,
    os::fd::{FromRawFd, OwnedFd},
    path::{Component, Path, PathBuf},
};

use nix::fcntl::{OFlag, OpenHow, ResolveFlag};

use crate::model::config::{self, BuildDefaults, ConfigFile, ConfigReport, Directive};

#[path = "config_exe.rs"]
mod exe;
pub use exe::{scan_binary, BinaryFacts};
#[path = "config_title.rs"]
pub mod title;

/// Bounds on what a config may make the probe read.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Files read, the main one included.
    pub max_files: usize,
    /// Bytes of one file; a larger one is not read.
    pub max_file_bytes: u64,
    /// Bytes of all files together.
    pub max_total_bytes: u64,
    /// Nested includes.
    pub max_depth: usize,
    /// Files one include glob may match.
    pub max_glob_matches: usize,
    /// Nested blocks in one file (`{` depth), checked before parsing.
    pub max_nesting: usize,
    /// Directives kept over all files.
    pub max_directives: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_files: 512,
            max_file_bytes: 4 << 20,
            max_total_bytes: 16 << 20,
            max_depth: 16,
            max_glob_matches: 256,
            max_nesting: 64,
            max_directives: 100_000,
        }
    }
}

/// Errors kept, one line each.
pub const MAX_ERRORS: usize = 32;

/// nginx's `ngx_conf_full_name`: `name` as is when absolute, else under `prefix`.
fn full_name(prefix: &str, name: &str) -> String {
    if name.starts_with('/') {
        name.to_string()
    } else {
        format!("{prefix}{name}")
    }
}

fn with_slash(mut s: String) -> String {
    if !s.ends_with('/') {
        s.push('/');
    }
    s
}

/// Where the main file is, as nginx finds it from its command line and its binary.
#[derive(Clone, Debug)]
pub struct Located {
    /// The main file inside the master's root; Err: why it is not known.
    pub main: Result<String, String>,
    /// `-c`, `--conf-path`, `default`, or `unknown` (see [`ConfigReport::found_by`]).
    pub found_by: &'static str,
    /// The prefix and the compiled-in log paths.
    pub build: BuildDefaults,
    /// The master's `-g`.
    pub globals: Option<String>,
}

/// The main file, how it was found and the build defaults of one reading of the
/// command line, nginx's rules: the prefix is `-p`, else the binary's `--prefix=`,
/// else `/usr/local/nginx/`; the main file is `-c`, else the binary's `--conf-path=`,
/// else `conf/nginx.conf`; the error log without an `error_log` is `-e`, else the
/// binary's `--error-log-path=`; each relative to the prefix.
fn place(r: &title::Reading, bin: &BinaryFacts) -> (String, &'static str, BuildDefaults) {
    let prefix = with_slash(
        r.prefix
            .clone()
            .or_else(|| bin.prefix.clone())
            .unwrap_or_else(|| "/usr/local/nginx/".to_string()),
    );
    let (conf, found_by) = match &r.conf {
        Some(c) => (c.clone(), "-c"),
        None => match &bin.conf_path {
            Some(c) => (c.clone(), "--conf-path"),
            None => ("conf/nginx.conf".to_string(), "default"),
        },
    };
    let build = BuildDefaults {
        prefix: prefix.clone(),
        // `-e` (the title's) or `--error-log-path=`; `stderr` is nginx's standard error,
        // not a file under the prefix (auto/options empties the path; ngx_log_init then
        // logs to stderr).
        error_log: r
            .error_log
            .as_ref()
            .or(bin.error_log_path.as_ref())
            .map(|p| match p.as_str() {
                config::STDERR => p.clone(),
                _ => full_name(&prefix, p),
            }),
        http_log: bin.http_log_path.as_ref().map(|p| full_name(&prefix, p)),
    };
    (full_name(&prefix, &conf), found_by, build)
}

/// Where the main file of the master with `cmdline` is ([`place`]). The title joins
/// nginx's arguments with spaces: of its readings ([`title::pick`]), the one whose
/// `-p` directory and main file exist (`exists(prefix from -p, main file)`), checked
/// in the master's root (of several, the one whose `-e` file exists:
/// `exists(None, error log)`); none or several: the main file is unknown, and why.
pub fn locate(
    cmdline: &str,
    bin: &BinaryFacts,
    exists: impl Fn(Option<&str>, &str) -> bool,
) -> Located {
    let picked = title::pick(
        cmdline,
        |r| exists(r.prefix.as_deref(), &place(r, bin).0),
        |r| {
            let prefix = place(r, bin).2.prefix;
            r.error_log
                .as_ref()
                .is_some_and(|e| exists(None, &full_name(&prefix, e)))
        },
    );
    match picked {
        Ok(r) => {
            let (main, found_by, build) = place(&r, bin);
            Located {
                main: Ok(main),
                found_by,
                build,
                globals: r.globals,
            }
        }
        Err(why) => Located {
            main: Err(why),
            found_by: "unknown",
            build: place(&title::Reading::default(), bin).2,
            globals: None,
        },
    }
}

/// The boot time, seconds since the Unix epoch: `CLOCK_REALTIME - CLOCK_BOOTTIME`
/// (`/proc/stat` btime is cut to whole seconds, too coarse to date a reload).
fn boot_unix_s() -> Option<f64> {
    let now = |clock| {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec we own.
        (unsafe { libc::clock_gettime(clock, &mut ts) } == 0)
            .then(|| ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9)
    };
    Some(now(libc::CLOCK_REALTIME)? - now(libc::CLOCK_BOOTTIME)?)
}

/// `/proc/<pid>/stat` starttime of `pid` (clock ticks since boot) as seconds since
/// the Unix epoch.
pub fn start_time_unix_s(pid: u32) -> Option<f64> {
    let stat = procfs::process::Process::new(pid as i32)
        .ok()?
        .stat()
        .ok()?;
    Some(boot_unix_s()? + stat.starttime as f64 / procfs::ticks_per_second() as f64)
}

/// Reads the configuration of the master `pid`, whose live workers are `workers`
/// (their start times date the last reload).
pub fn read_for_master(pid: u32, workers: &[u32]) -> ConfigReport {
    let root = format!("/proc/{pid}/root");
    let cmdline = std::fs::File::open(format!("/proc/{pid}/cmdline"))
        .and_then(|f| {
            let mut s = Vec::new();
            f.take(64 << 10).read_to_end(&mut s).map(|_| s)
        })
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let bin = scan_binary(Path::new(&format!("/proc/{pid}/exe")));
    let loaded = std::iter::once(pid)
        .chain(workers.iter().copied())
        .filter_map(start_time_unix_s)
        .fold(None, |m: Option<f64>, t| Some(m.map_or(t, |m| m.max(t))));
    read_config(Path::new(&root), &cmdline, &bin, loaded, Limits::default())
}

/// Marks the files of `cfg` (read for master `pid`) whose mtime is not the one read
/// (modified, replaced, or gone: `ConfigFile::changed_since_read`), looking each up
/// again inside the master's root (`openat2` beneath `/proc/<pid>/root`, `O_PATH`:
/// nothing is read). A mark stays; an error other than the file being gone (EMFILE,
/// EACCES), or opening the root, marks nothing (not a fact about the files).
pub fn mark_changed_since_read(pid: u32, cfg: &mut ConfigReport) {
    use std::os::unix::fs::MetadataExt;
    let Ok(root) = open_root(Path::new(&format!("/proc/{pid}/root"))) else {
        return;
    };
    for f in cfg.files.iter_mut().filter(|f| !f.changed_since_read) {
        // Gone (ENOENT, ENOTDIR) is a fact; any other error (EMFILE, EACCES) is not.
        let now = match open_in_root(&root, &f.path, OFlag::O_PATH) {
            Ok(fd) => match std::fs::File::from(fd).metadata() {
                Ok(m) => Some(m.mtime() as f64 + m.mtime_nsec() as f64 / 1e9),
                Err(_) => continue,
            },
            Err(nix::errno::Errno::ENOENT | nix::errno::Errno::ENOTDIR) => None,
            Err(_) => continue,
        };
        f.changed_since_read = match (now, f.mtime_unix_s) {
            (Some(now), Some(read)) => (now - read).abs() > 1e-6,
            (None, _) => true,
            (Some(_), None) => false,
        };
    }
}

/// Reads and evaluates the configuration under `root` for a master with `cmdline`,
/// built as `bin` says, last loaded at `loaded_unix_s`.
pub fn read_config(
    root: &Path,
    cmdline: &str,
    bin: &BinaryFacts,
    loaded_unix_s: Option<f64>,
    limits: Limits,
) -> ConfigReport {
    let mut r = Reader {
        root: None,
        limits,
        files: Vec::new(),
        errors: Vec::new(),
        total_bytes: 0,
        directives: 0,
        stack: Vec::new(),
        conf_prefix: String::new(),
        loaded_unix_s,
    };
    match open_root(root) {
        Ok(fd) => r.root = Some(fd),
        Err(e) => r.error(format!(
            "{}: cannot open the master's root: {e}",
            root.display()
        )),
    }
    let loc = locate(cmdline, bin, |prefix, main| r.exists(prefix, main));
    let main = loc.main.clone().unwrap_or_default();
    r.conf_prefix = main
        .rsplit_once('/')
        .map(|(d, _)| format!("{d}/"))
        .unwrap_or_default();
    let mut tree = match &loc.globals {
        Some(g) => r.globals(g),
        None => Vec::new(),
    };
    let errors_before = r.errors.len();
    let main_tree = match &loc.main {
        Ok(m) if r.root.is_some() => r.file(m, 0, None),
        _ => None,
    };
    let mut report = match (main_tree, &loc.main) {
        (Some(t), _) => {
            tree.extend(t);
            config::evaluate(&tree, &r.files, &loc.build)
        }
        (None, Err(why)) => config::evaluate_unread(&tree, &r.files, &loc.build, why.clone()),
        (None, Ok(_)) => {
            let why = r.errors.get(errors_before).or(r.errors.first());
            let why = format!(
                "the main file was not read ({})",
                why.map_or("no reason recorded", |e| e.as_str())
            );
            config::evaluate_unread(&tree, &r.files, &loc.build, why)
        }
    };
    // Whatever was not read (a file over the size limits, matches past an include
    // glob's limit, a file that failed to parse) may set any directive: no value,
    // default or not, is vouched for as nginx's then.
    if !r.errors.is_empty() {
        for v in report.values.iter_mut().chain(report.error_logs.iter_mut()) {
            v.unread_may_set = true;
        }
    }
    report.main_file = main;
    report.found_by = loc.found_by.to_string();
    report.globals = loc.globals;
    report.root = root.display().to_string();
    report.nginx_version = bin.version.clone();
    crate::model::config_version::for_version(&mut report.values, bin.version.as_deref());
    report.loaded_unix_s = loaded_unix_s;
    report.files = r.files;
    report.errors = r.errors;
    report
}

struct Reader {
    root: Option<OwnedFd>,
    limits: Limits,
    files: Vec<ConfigFile>,
    errors: Vec<String>,
    total_bytes: u64,
    directives: usize,
    /// (dev, ino) of the files being read, outermost first: an include loop.
    stack: Vec<(u64, u64)>,
    conf_prefix: String,
    loaded_unix_s: Option<f64>,
}

/// A directory fd (`O_PATH`) of `root` (a master's `/proc/<pid>/root`), to open files
/// beneath with [`open_in_root`].
pub fn open_root(root: &Path) -> nix::Result<OwnedFd> {
    let fd = nix::fcntl::open(
        root,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )?;
    // SAFETY: open returned a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens `path` under the directory `root` (a process's `/proc/<pid>/root`) as if
/// `root` were `/`: every symlink, `..` included, is resolved inside it
/// (`openat2` RESOLVE_IN_ROOT, no magic links). Close-on-exec; non-blocking and
/// without a controlling tty unless `flags` has O_PATH (which opens nothing).
///
/// Errors: the errno of openat2 (ENOENT, ELOOP, EXDEV, ...).
pub fn open_in_root(root: &OwnedFd, path: &str, flags: OFlag) -> nix::Result<OwnedFd> {
    use std::os::fd::AsRawFd;
    // openat2 refuses O_PATH with any flag but O_CLOEXEC, O_DIRECTORY, O_NOFOLLOW.
    let extra = if flags.contains(OFlag::O_PATH) {
        OFlag::O_CLOEXEC
    } else {
        OFlag::O_CLOEXEC | OFlag::O_NOCTTY | OFlag::O_NONBLOCK
    };
    let how = OpenHow::new()
        .flags(flags | extra)
        .resolve(ResolveFlag::RESOLVE_IN_ROOT | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    let fd = nix::fcntl::openat2(root.as_raw_fd(), path, how)?;
    // SAFETY: openat2 returned a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Whether `s` has a glob metacharacter (nginx passes such includes to glob()).
fn has_glob(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// One file as read: its bytes, its (dev, ino), its mtime (Unix seconds).
type ReadFile = (Vec<u8>, (u64, u64), f64);

impl Reader {
    fn error(&mut self, e: String) {
        // The same problem met through two includes is one (trial 10: an include
        // cycle reached twice was said twice).
        if self.errors.contains(&e) {
            return;
        }
        if self.errors.len() < MAX_ERRORS {
            self.errors.push(e);
        } else if self.errors.len() == MAX_ERRORS {
            self.errors.push("more problems not listed".to_string());
        }
    }

    /// Opens `path` (absolute, inside the root) resolving every symlink inside it.
    fn open(&self, path: &str, flags: OFlag) -> nix::Result<OwnedFd> {
        let root = self.root.as_ref().ok_or(nix::errno::Errno::EBADF)?;
        open_in_root(root, path, flags)
    }

    /// Reads, parses and expands one file; None when it could not be read.
    fn file(&mut self, path: &str, depth: usize, from: Option<&str>) -> Option<Vec<Directive>> {
        let whence = from
            .map(|f| format!(" (included at {f})"))
            .unwrap_or_default();
        if self.files.len() >= self.limits.max_files {
            self.error(format!(
                "{path}{whence}: not read: {} files already read (the limit)",
                self.limits.max_files
            ));
            return None;
        }
        let (bytes, id, mtime) = match self.read_bounded(path) {
            Ok(Some(read)) => read,
            // `include /dev/null`: nginx reads nothing from it; neither do we.
            Ok(None) => return Some(Vec::new()),
            Err(e) => {
                self.error(format!("{path}{whence}: {e}"));
                return None;
            }
        };
        // starttime counts whole clock ticks (10 ms): a file written just before the
        // load may have an mtime up to one tick after the start read.
        let changed = self.loaded_unix_s.is_some_and(|l| mtime > l + 0.01);
        self.total_bytes += bytes.len() as u64;
        let index = self.files.len();
        self.files.push(ConfigFile {
            path: path.to_string(),
            bytes: bytes.len() as u64,
            mtime_unix_s: Some(mtime),
            changed_since_load: changed,
            changed_since_read: false,
        });
        let text = String::from_utf8_lossy(&bytes);
        let ast = self.parse(path, &text)?;
        self.stack.push(id);
        let out = self.convert(ast.directives(), index, depth);
        self.stack.pop();
        Some(out)
    }

    /// `text` (of `label`: a file's path, or `-g`) parsed; None, with the error
    /// kept, when nested too deep or not parsed.
    fn parse(&mut self, label: &str, text: &str) -> Option<nginx_lint_parser::ast::Config> {
        if nesting(text) > self.limits.max_nesting {
            self.error(format!(
                "{label}: not parsed: blocks nested deeper than {}",
                self.limits.max_nesting
            ));
            return None;
        }
        match nginx_lint_parser::parse_string(text) {
            Ok(a) => Some(a),
            Err(e) => {
                let line = e.position().map(|p| p.line).unwrap_or(0);
                self.error(format!("{label}:{line}: not parsed: {e}"));
                None
            }
        }
    }

    /// The master's `-g` directives, parsed as a file is (their `at` is `-g`).
    fn globals(&mut self, text: &str) -> Vec<Directive> {
        match self.parse(config::FROM_G, text) {
            Some(ast) => self.convert(ast.directives(), config::G_FILE, 0),
            None => Vec::new(),
        }
    }

    /// Whether the prefix directory `prefix` (when given) and the regular file `main`
    /// exist inside the root (symlinks resolved inside it; nothing is read).
    fn exists(&self, prefix: Option<&str>, main: &str) -> bool {
        let is = |path: &str, dir: bool| {
            self.open(path, OFlag::O_PATH)
                .ok()
                .and_then(|fd| std::fs::File::from(fd).metadata().ok())
                .is_some_and(|m| if dir { m.is_dir() } else { m.is_file() })
        };
        prefix.is_none_or(|p| is(p, true)) && is(main, false)
    }

    /// Where directives of `file` are written: its path, or `-g`.
    fn label(&self, file: usize) -> String {
        self.files
            .get(file)
            .map_or_else(|| config::FROM_G.to_string(), |f| f.path.clone())
    }

    /// Opens and reads `path` within the limits; else why not (a one-line reason).
    /// None for the null device (`include /dev/null`, a deliberate way to include
    /// nothing: nothing in it, nothing read, nothing flagged); another device, a FIFO
    /// or a directory is never read.
    fn read_bounded(&self, path: &str) -> Result<Option<ReadFile>, String> {
        use std::os::unix::fs::MetadataExt;
        let fd = self
            .open(path, OFlag::O_RDONLY)
            .map_err(|e| format!("cannot open: {}", e.desc()))?;
        let mut f = std::fs::File::from(fd);
        let meta = f.metadata().map_err(|e| format!("cannot stat: {e}"))?;
        if super::tail::is_null_device(&meta) {
            return Ok(None);
        }
        if !meta.is_file() {
            return Err("not a regular file".to_string());
        }
        let id = (meta.dev(), meta.ino());
        if self.stack.contains(&id) {
            return Err("include loop: the file is already being read (it includes itself, directly or through the files that include it)".to_string());
        }
        let mtime = meta.mtime() as f64 + meta.mtime_nsec() as f64 / 1e9;
        if meta.len() > self.limits.max_file_bytes {
            return Err(format!(
                "not read: {} bytes, over the {} byte limit",
                meta.len(),
                self.limits.max_file_bytes
            ));
        }
        let budget = self.limits.max_total_bytes.saturating_sub(self.total_bytes);
        let mut bytes = Vec::new();
        let cap = self.limits.max_file_bytes.min(budget);
        if let Err(e) = (&mut f).take(cap + 1).read_to_end(&mut bytes) {
            return Err(format!("cannot read: {e}"));
        }
        if bytes.len() as u64 > cap {
            return Err(format!(
                "not read: over the {} byte limit of all files",
                self.limits.max_total_bytes
            ));
        }
        Ok(Some((bytes, id, mtime)))
    }

    fn convert<'a>(
        &mut self,
        items: impl Iterator<Item = &'a nginx_lint_parser::ast::Directive>,
        file: usize,
        depth: usize,
    ) -> Vec<Directive> {
        let mut out = Vec::new();
        for d in items {
            if self.directives >= self.limits.max_directives {
                self.error(format!(
                    "{}: directives past {} not read",
                    self.label(file),
                    self.limits.max_directives
                ));
                break;
            }
            self.directives += 1;
            let args = words(&d.args);
            let line = d.span.start.line;
            if d.name == "include" && d.block.is_none() {
                let at = format!("{}:{line}", self.label(file));
                if let Some(pattern) = args.first() {
                    out.extend(self.include(pattern, depth + 1, &at));
                }
                continue;
            }
            let block = d
                .block
                .as_ref()
                .map(|b| self.convert(b.directives(), file, depth));
            out.push(Directive {
                name: d.name.clone(),
                args,
                file,
                line,
                block,
            });
        }
        out
    }

    /// The directives of every file `pattern` names, as nginx's `include`.
    fn include(&mut self, pattern: &str, depth: usize, at: &str) -> Vec<Directive> {
        if depth > self.limits.max_depth {
            self.error(format!(
                "{at}: include {pattern}: not read: includes nested deeper than {}",
                self.limits.max_depth
            ));
            return Vec::new();
        }
        let path = full_name(&self.conf_prefix, pattern);
        let paths = if has_glob(&path) {
            self.glob(&path, at)
        } else {
            vec![path]
        };
        let mut out = Vec::new();
        for p in paths {
            if let Some(d) = self.file(&p, depth, Some(at)) {
                out.extend(d);
            }
        }
        out
    }

    /// Expands an absolute glob one component at a time inside the root, sorted as
    /// glob(3) does, at most `max_glob_matches` files.
    fn glob(&mut self, pattern: &str, at: &str) -> Vec<String> {
        let max = self.limits.max_glob_matches;
        let opts = glob::MatchOptions {
            case_sensitive: true,
            require_literal_separator: true,
            require_literal_leading_dot: true,
        };
        let mut found = vec![PathBuf::from("/")];
        let mut truncated = false;
        for comp in Path::new(pattern).components() {
            let Component::Normal(c) = comp else { continue };
            let c = c.to_string_lossy();
            if !has_glob(&c) {
                found.iter_mut().for_each(|p| p.push(&*c));
                continue;
            }
            // glob(3) reads a `[` with no closing `]` as itself; the crate refuses the
            // pattern, so it is matched literally as nginx would.
            let pat = glob::Pattern::new(&c)
                .or_else(|_| glob::Pattern::new(&glob::Pattern::escape(&c)))
                .expect("an escaped pattern is valid");
            let mut next = Vec::new();
            for dir in &found {
                let Ok(fd) =
                    self.open(&dir.to_string_lossy(), OFlag::O_RDONLY | OFlag::O_DIRECTORY)
                else {
                    continue;
                };
                use std::os::fd::AsRawFd;
                let Ok(rd) = std::fs::read_dir(format!("/proc/self/fd/{}", fd.as_raw_fd())) else {
                    continue;
                };
                let mut names: Vec<String> = Vec::new();
                // Bounded: a directory of a million entries is listed only so far.
                for e in rd.flatten().take(max * 16) {
                    let n = e.file_name().to_string_lossy().into_owned();
                    if pat.matches_with(&n, opts) {
                        names.push(n);
                    }
                }
                names.sort();
                for n in names {
                    if next.len() >= max {
                        truncated = true;
                        break;
                    }
                    next.push(dir.join(n));
                }
            }
            found = next;
        }
        if truncated {
            self.error(format!(
                "{at}: include {pattern}: only the first {max} matches read"
            ));
        }
        found
            .into_iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect()
    }
}

/// Deepest `{` nesting of `text`, ignoring quotes and comments roughly: an upper
/// bound the parser's recursion is checked against.
fn nesting(text: &str) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("");
        for c in line.chars() {
            match c {
                '{' => {
                    depth += 1;
                    max = max.max(depth);
                }
                '}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
    }
    max
}

/// A directive's arguments as nginx reads them: one word per whitespace-separated
/// token. The parser splits a token at a variable (`access-$logdate.log` comes as
/// `access-`, `$logdate`, `.log`, with touching spans); touching pieces are joined
/// back, a variable as written (`$logdate`, `${logdate}`), quoted strings without
/// their quotes.
fn words(args: &[nginx_lint_parser::ast::Argument]) -> Vec<String> {
    use nginx_lint_parser::ast::ArgumentValue;
    let mut out: Vec<String> = Vec::with_capacity(args.len());
    let mut end = None;
    for a in args {
        let text = match &a.value {
            ArgumentValue::Variable(_) => a.raw.as_str(),
            _ => a.as_str(),
        };
        match out.last_mut() {
            Some(last) if end == Some(a.span.start.offset) => last.push_str(text),
            _ => out.push(text.to_string()),
        }
        end = Some(a.span.end.offset);
    }
    out
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
