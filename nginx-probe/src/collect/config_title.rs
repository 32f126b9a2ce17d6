//! nginx's `-p`, `-c` and `-g` read back from the master's title. nginx overwrites its
//! argv (and the environment after it) with `nginx: master process <argv joined by
//! spaces>` and NUL padding, so `/proc/<pid>/cmdline` has no argument boundaries: a
//! path with a space is two words. The title is split at every space and read as
//! nginx's `ngx_get_options` would: every argument after the binary starts with `-`,
//! flags (`-t`, `-q`, ...) may be grouped, and `-c`/`-p`/`-g`/`-e`/`-s` take the rest
//! of their word or the next argument. A `-c`, `-p` or `-e` value (a path) may span
//! words: each way of joining them that leaves a valid command line is one
//! [`Reading`]; the caller keeps the readings whose files exist ([`pick`]). A `-g` (or
//! `-s`) value runs to the next word nginx would parse as an option. A cmdline that still has its NUL
//! separators (a master that was not retitled) gives its arguments exactly.
//! Everything here is text others control: bounded, never run, never trusted.

/// Words of the title looked at, at most (a longer title: the rest is not read).
pub const MAX_WORDS: usize = 512;
/// Readings kept, at most: more means the title cannot be told apart.
pub const MAX_READINGS: usize = 64;
/// Bytes of one joined value, at most (Linux's PATH_MAX).
pub const MAX_VALUE_BYTES: usize = 4096;
/// Steps of the walk over the readings, at most (a title built so that every way of
/// joining fails late would otherwise take exponential time).
const MAX_STEPS: usize = 20_000;

/// One way of reading the master's command line: what it says of the configuration.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reading {
    /// `-c`: the main file (relative to the prefix when not absolute).
    pub conf: Option<String>,
    /// `-p`: the prefix.
    pub prefix: Option<String>,
    /// `-g`: main-context directives nginx applies on top of the file.
    pub globals: Option<String>,
    /// `-e`: the error log nginx opens at start and when the configuration names none
    /// (relative to the prefix when not absolute; `stderr`: the standard error).
    pub error_log: Option<String>,
    /// Words nginx would parse as options taken into a `-c`, `-p` or `-e` value
    /// (`-c /a -p /b` read as the one path `/a -p /b`): 0 for the plain reading.
    pub absorbed: usize,
}

/// The words of `cmdline` after the binary, and whether they are exact (NUL
/// separated) rather than a title's space-joined ones.
fn words(cmdline: &str) -> (Vec<&str>, bool) {
    if let Some((_, rest)) = cmdline.split_once("master process ") {
        let title = rest.split('\0').next().unwrap_or("");
        let all: Vec<&str> = title.split(' ').take(MAX_WORDS).collect();
        // The binary's path may have spaces too: it runs to the first option.
        let first = all
            .iter()
            .skip(1)
            .position(|w| w.starts_with('-'))
            .map_or(all.len(), |i| i + 1);
        return (all[first..].to_vec(), false);
    }
    let trimmed = cmdline.trim_end_matches('\0');
    if trimmed.contains('\0') {
        let all: Vec<&str> = trimmed.split('\0').take(MAX_WORDS).collect();
        return (all.get(1..).unwrap_or_default().to_vec(), true);
    }
    let all: Vec<&str> = trimmed
        .split(' ')
        .filter(|w| !w.is_empty())
        .take(MAX_WORDS)
        .collect();
    (all.get(1..).unwrap_or_default().to_vec(), false)
}

/// An argument nginx would parse as options: `-` then flags, optionally ending with
/// one of `cpgse` followed by its value. Some(letter taking a value, the rest of the
/// word), None when nginx would refuse it.
fn option(word: &str) -> Option<(Option<char>, &str)> {
    let body = word.strip_prefix('-')?;
    for (i, c) in body.char_indices() {
        match c {
            '?' | 'h' | 'v' | 'V' | 't' | 'T' | 'q' => continue,
            'c' | 'p' | 'g' | 'e' | 's' => return Some((Some(c), &body[i + 1..])),
            _ => return None,
        }
    }
    Some((None, ""))
}

/// Walks the words from `i` on with `at` read so far, adding every complete reading
/// nginx would have accepted to `out` (at most [`MAX_READINGS`]).
struct Walk<'a> {
    words: &'a [&'a str],
    exact: bool,
    out: Vec<Reading>,
    /// More readings than [`MAX_READINGS`] or steps than [`MAX_STEPS`]: the title
    /// cannot be told apart.
    overflow: bool,
    steps: usize,
}

impl Walk<'_> {
    fn walk(&mut self, i: usize, at: Reading) {
        self.steps += 1;
        if self.out.len() >= MAX_READINGS || self.steps > MAX_STEPS {
            self.overflow = true;
            return;
        }
        let Some(word) = self.words.get(i) else {
            self.out.push(at);
            return;
        };
        let Some((letter, rest)) = option(word) else {
            return; // nginx: "invalid option"
        };
        let Some(letter) = letter else {
            return self.walk(i + 1, at);
        };
        // The value: the rest of the word, else the next argument.
        let (first, next) = match (rest.is_empty(), self.words.get(i + 1)) {
            (false, _) => (rest.to_string(), i + 1),
            (true, Some(w)) => (w.to_string(), i + 2),
            (true, None) => return, // nginx: "option requires an argument"
        };
        let path = matches!(letter, 'c' | 'p' | 'e');
        for (value, after, absorbed) in self.values(first, next, path) {
            let mut r = at.clone();
            r.absorbed += absorbed;
            match letter {
                'c' => r.conf = Some(value),
                'p' => r.prefix = Some(value),
                'g' => r.globals = Some(value),
                'e' => r.error_log = Some(value),
                _ => {}
            }
            self.walk(after, r);
        }
    }

    /// The values an option's argument may have, starting with `first` and going on
    /// at word `next`: each with the word after it and the option words it took. A
    /// title's value may take more words up to one nginx would parse as an option; a
    /// path (`every`) at each such word, another value (`-g`) only up to the first.
    fn values(&self, first: String, next: usize, every: bool) -> Vec<(String, usize, usize)> {
        if self.exact {
            return vec![(first, next, 0)];
        }
        let mut out = Vec::new();
        let mut value = first;
        let mut j = next;
        let mut absorbed = 0;
        loop {
            let ends = self.words.get(j).is_none_or(|w| option(w).is_some());
            if ends {
                out.push((value.clone(), j, absorbed));
                if !every {
                    break;
                }
                absorbed += 1;
            }
            let Some(w) = self.words.get(j) else { break };
            if value.len() + 1 + w.len() > MAX_VALUE_BYTES {
                break;
            }
            value.push(' ');
            value.push_str(w);
            j += 1;
        }
        out
    }
}

/// Every reading of `cmdline` (the master's `/proc/<pid>/cmdline`: its title) that
/// nginx would have accepted, distinct, at most [`MAX_READINGS`]; Err when there are
/// more (the title cannot be told apart).
pub fn readings(cmdline: &str) -> Result<Vec<Reading>, String> {
    let (words, exact) = words(cmdline);
    let mut w = Walk {
        words: &words,
        exact,
        out: Vec::new(),
        overflow: false,
        steps: 0,
    };
    w.walk(0, Reading::default());
    if w.overflow {
        return Err(format!(
            "its title reads as over {MAX_READINGS} different command lines, or too many to try"
        ));
    }
    let mut out: Vec<Reading> = Vec::new();
    for r in w.out {
        if !out.contains(&r) {
            out.push(r);
        }
    }
    Ok(out)
}

/// `-p X -c Y -e Z -g W` of a reading, for a reason (values quoted with backticks).
pub fn describe(r: &Reading) -> String {
    let parts: Vec<String> = [
        ("-p", &r.prefix),
        ("-c", &r.conf),
        ("-e", &r.error_log),
        ("-g", &r.globals),
    ]
    .iter()
    .filter_map(|(o, v)| v.as_ref().map(|v| format!("{o} `{v}`")))
    .collect();
    if parts.is_empty() {
        "no -p, -c, -e or -g".to_string()
    } else {
        parts.join(" ")
    }
}

/// The one reading of `cmdline` to use: the only one whose files exist (`exists`:
/// its prefix directory and main file, inside the master's root; `log_exists`: its
/// `-e` error log is a file, asked only of a reading with an `-e` path, not
/// `stderr`); else, when no reading has all of them, the only one whose prefix and
/// main file exist (an error log moved away); else the only plain one (the fewest
/// option words taken into a path: opening its file then says what is wrong). Err
/// with why the title does not say where the configuration is: no reading nginx would
/// accept, several whose files exist, or none whose files exist and no single plain
/// one.
pub fn pick(
    cmdline: &str,
    exists: impl Fn(&Reading) -> bool,
    log_exists: impl Fn(&Reading) -> bool,
) -> Result<Reading, String> {
    const WHY: &str = "the master's title does not say where its configuration is";
    let all = readings(cmdline).map_err(|e| format!("{WHY}: {e}"))?;
    if all.len() == 1 {
        return Ok(all.into_iter().next().expect("one reading"));
    }
    // `-p /a -e /a -c b/e.log -c /a -c b/n.conf` reads with `-e` as `/a` (and a `-c`
    // given twice) as well as `/a -c b/e.log`; an `-e` that took `-c FILE` in leaves
    // the binary's own main file, which may exist too: the error log nginx opened is
    // a file.
    let stderr = |r: &Reading| matches!(r.error_log.as_deref(), None | Some("stderr" | ""));
    let with_files: Vec<&Reading> = all.iter().filter(|r| exists(r)).collect();
    let with_log: Vec<&Reading> = with_files
        .iter()
        .copied()
        .filter(|r| stderr(r) || log_exists(r))
        .collect();
    let found = if with_log.is_empty() && with_files.len() == 1 {
        with_files
    } else {
        with_log
    };
    let fewest = all.iter().map(|r| r.absorbed).min();
    let plain: Vec<&Reading> = all.iter().filter(|r| Some(r.absorbed) == fewest).collect();
    match (found.len(), plain.len()) {
        (1, _) => Ok(found[0].clone()),
        (0, 1) => Ok(plain[0].clone()),
        (0, _) if all.is_empty() => Err(format!(
            "{WHY}: nginx would not accept its options as they read there"
        )),
        (0, _) => Err(format!(
            "{WHY}: its arguments were joined with spaces, and none of its {} readings names a prefix, main file and -e error log that exist ({})",
            all.len(),
            listed(&all.iter().collect::<Vec<_>>())
        )),
        (n, _) => Err(format!(
            "{WHY}: its arguments were joined with spaces, and {n} readings name files that exist ({})",
            listed(&found)
        )),
    }
}

/// The first readings described, `; ` between, then how many more.
fn listed(rs: &[&Reading]) -> String {
    let shown: Vec<String> = rs.iter().take(4).map(|r| describe(r)).collect();
    match rs.len().saturating_sub(4) {
        0 => shown.join("; "),
        more => format!("{} and {more} more", shown.join("; ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(conf: Option<&str>, prefix: Option<&str>, globals: Option<&str>) -> Reading {
        Reading {
            conf: conf.map(Into::into),
            prefix: prefix.map(Into::into),
            globals: globals.map(Into::into),
            error_log: None,
            absorbed: 0,
        }
    }

    /// The readings that take no option word into a path.
    fn plain(cmdline: &str) -> Vec<Reading> {
        let mut all = readings(cmdline).unwrap();
        all.retain(|r| r.absorbed == 0);
        all
    }

    const T: &str = "nginx: master process ";

    #[test]
    fn plain_titles_have_one_plain_reading() {
        let t = format!("{T}/usr/sbin/nginx -c /x/n.conf -p /pre");
        assert_eq!(plain(&t), vec![r(Some("/x/n.conf"), Some("/pre"), None)]);
        // The other reading takes `-p /pre` into the path.
        let all = readings(&t).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[1].conf.as_deref(), Some("/x/n.conf -p /pre"));
        assert_eq!(all[1].absorbed, 1);
        assert_eq!(
            readings(&format!("{T}nginx -cconf/a.conf -g daemon off;\0\0\0")).unwrap()[0],
            r(Some("conf/a.conf"), None, Some("daemon off;"))
        );
        assert_eq!(
            readings(&format!("{T}/usr/sbin/nginx")).unwrap(),
            vec![Reading::default()]
        );
        // Grouped flags before a value letter, as ngx_get_options reads them.
        assert_eq!(
            plain(&format!("{T}nginx -qp/srv -c x.conf")),
            vec![r(Some("x.conf"), Some("/srv"), None)]
        );
        // Docker's official image: one reading.
        assert_eq!(
            readings(&format!("{T}nginx -g daemon off;")).unwrap(),
            vec![r(None, None, Some("daemon off;"))]
        );
    }

    #[test]
    fn g_runs_to_the_next_option_and_keeps_quotes_and_semicolons() {
        let g = "daemon off; error_log '/tmp/my  log' info; worker_processes 3;";
        assert_eq!(
            readings(&format!("{T}nginx -g {g} -c /e/n.conf")).unwrap(),
            vec![r(Some("/e/n.conf"), None, Some(g))]
        );
        // -g before -c and -p, and the -e value kept.
        assert_eq!(
            plain(&format!(
                "{T}nginx -g daemon off; -e /l/e.log -p /p/ -c c.conf"
            )),
            vec![Reading {
                error_log: Some("/l/e.log".into()),
                ..r(Some("c.conf"), Some("/p/"), Some("daemon off;"))
            }]
        );
    }

    #[test]
    fn a_path_with_spaces_has_a_reading_per_option_boundary() {
        let all = readings(&format!(
            "{T}/usr/sbin/nginx -p /tmp/x/my site/ -c /tmp/x/my site/nginx.conf"
        ))
        .unwrap();
        assert_eq!(
            all,
            vec![
                r(
                    Some("/tmp/x/my site/nginx.conf"),
                    Some("/tmp/x/my site/"),
                    None
                ),
                Reading {
                    absorbed: 1,
                    ..r(
                        None,
                        Some("/tmp/x/my site/ -c /tmp/x/my site/nginx.conf"),
                        None
                    )
                },
            ]
        );
        // Several spaces in a row are kept: the title joins with exactly one.
        assert_eq!(
            readings(&format!("{T}nginx -c /a  b/n.conf")).unwrap(),
            vec![r(Some("/a  b/n.conf"), None, None)]
        );
        // The binary's own path may have spaces.
        assert_eq!(
            readings(&format!("{T}/opt/my nginx/nginx -c /a b")).unwrap(),
            vec![r(Some("/a b"), None, None)]
        );
    }

    #[test]
    fn pick_keeps_the_reading_whose_files_exist_else_says_why() {
        let title = format!("{T}nginx -p /tmp/x/my site/ -c /tmp/x/my site/nginx.conf");
        let exists = |r: &Reading| r.prefix.as_deref() == Some("/tmp/x/my site/");
        assert_eq!(
            pick(&title, exists, |_| true).unwrap().conf.as_deref(),
            Some("/tmp/x/my site/nginx.conf")
        );
        // Nothing exists: the plain reading (opening its file then says why not).
        assert_eq!(
            pick(&title, |_| false, |_| true).unwrap().prefix.as_deref(),
            Some("/tmp/x/my site/")
        );
        // Both exist: ambiguous.
        let e = pick(&title, |_| true, |_| true).unwrap_err();
        assert!(e.contains("2 readings name files that exist"), "{e}");
        // One reading: taken as is, whether its file exists or not.
        let one = format!("{T}nginx -c /does/not/exist.conf");
        assert_eq!(
            pick(&one, |_| false, |_| true).unwrap().conf.as_deref(),
            Some("/does/not/exist.conf")
        );
        // nginx would have refused the title: no reading.
        let e = pick(&format!("{T}nginx -c"), |_| true, |_| true).unwrap_err();
        assert!(e.ends_with("nginx would not accept its options as they read there"));
    }

    #[test]
    fn an_e_path_spans_option_words_like_p_and_c() {
        // nginx -c "/s/a -c b/n.conf" -p "/s/a -c b" -e "/s/a -c b/logs/e.log" (a
        // newcomer's prefix with ` -c ` in it): -e takes words as -p and -c do, so the
        // one reading whose files exist is among the readings.
        let (p, c, e) = ("/s/a -c b", "/s/a -c b/n.conf", "/s/a -c b/logs/e.log");
        let title = format!("{T}/usr/sbin/nginx -c {c} -p {p} -e {e}");
        let all = readings(&title).unwrap();
        let right = Reading {
            error_log: Some(e.into()),
            absorbed: 3,
            ..r(Some(c), Some(p), None)
        };
        assert!(all.contains(&right), "{all:#?}");
        let files = |r: &Reading| r.prefix.as_deref() == Some(p) && r.conf.as_deref() == Some(c);
        assert_eq!(pick(&title, files, |_| false), Ok(right.clone()));
        // The other order (-e before -c): two readings have the prefix and main file,
        // one with `-e /s/a` (no file) and a second `-c`; the error log decides.
        let title = format!("{T}/usr/sbin/nginx -p {p} -e {e} -c {c}");
        let log = |r: &Reading| r.error_log.as_deref() == Some(e);
        assert_eq!(
            pick(&title, files, log).map(|r| r.error_log),
            Ok(Some(e.to_string()))
        );
        let both = pick(&title, files, |_| true).unwrap_err();
        assert!(both.contains("2 readings name files that exist"), "{both}");
        // -e stderr needs no file.
        let title = format!("{T}nginx -p {p} -e stderr");
        let default_conf = |r: &Reading| r.prefix.as_deref() == Some(p) && r.conf.is_none();
        assert_eq!(
            pick(&title, default_conf, |_| false).map(|r| r.error_log),
            Ok(Some("stderr".to_string()))
        );
        // The main file gone (moved after the start): an -e that took `-c FILE` in
        // leaves the binary's main file, which exists; no such -e is a file, so the
        // plain reading is read (and opening its main file says what is wrong).
        let g = "-g worker_processes 3;";
        let title = format!("{T}/usr/sbin/nginx -p {p} -e {e} -c {c} {g}");
        let binary_conf = |r: &Reading| r.prefix.as_deref() == Some(p) && r.conf.is_none();
        let picked = pick(&title, binary_conf, log).unwrap();
        assert_eq!(
            (picked.conf.as_deref(), picked.absorbed),
            (Some("b/n.conf"), 0)
        );
        // The error log moved away too: still the plain reading, never a guess.
        let picked = pick(&title, binary_conf, |_| false).unwrap();
        assert_eq!(picked.absorbed, 0);
        // The bound on readings holds with -e taking words.
        let many = format!("{T}nginx{}", " -e a -c b".repeat(200));
        assert!(readings(&many).unwrap_err().contains("over 64"));
    }

    #[test]
    fn hostile_titles_are_bounded() {
        // Escape bytes and newlines are kept as text (escaped by the renderers).
        let t = format!("{T}nginx -c /a\x1b]0;x\x07 b\n/n.conf\0garbage");
        assert_eq!(
            readings(&t).unwrap(),
            vec![r(Some("/a\x1b]0;x\x07 b\n/n.conf"), None, None)]
        );
        // Many -c with many words: more readings than kept is an error, not a hang.
        let many = format!("{T}nginx{}", " -c a b".repeat(400));
        assert!(readings(&many).unwrap_err().contains("over 64"));
        // Every way of joining fails at the end (a -c without a value): bounded steps.
        let late = format!("{T}nginx{} -c", " -c a".repeat(200));
        assert!(readings(&late).unwrap_err().contains("too many to try"));
        // A huge word stream stays bounded.
        let huge = format!("{T}nginx -p {}", "x ".repeat(100_000));
        let all = readings(&huge).unwrap();
        assert_eq!(all.len(), 1);
        assert!(all[0].prefix.as_ref().unwrap().len() <= MAX_VALUE_BYTES);
    }

    #[test]
    fn a_cmdline_with_its_nul_separators_is_exact() {
        assert_eq!(
            readings("/usr/sbin/nginx\0-p\0/a b/\0-c\0n.conf\0-g\0daemon off;\0").unwrap(),
            vec![r(Some("n.conf"), Some("/a b/"), Some("daemon off;"))]
        );
    }
}
