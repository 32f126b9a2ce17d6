#!/usr/bin/env python3
"""Lists nginx's error-log message formats at warn or above.

usage: extract_nginx_formats.py NGINX_1.22_DIR NGINX_1.26_DIR
  -> lines "level<TAB>versions<TAB>format" on stdout (versions: both, 1.22, 1.26),
     C escapes undone; the sources unpacked outside the repository (see the
     fixture's header: apt-get source --download-only nginx, suites bookworm/trixie).
Scans ngx_log_error(NGX_LOG_{WARN,ERR,CRIT,ALERT,EMERG}, ...) and
ngx_ssl_error(NGX_LOG_..., ...) calls with a literal format (adjacent C string
literals joined) in the core, event, http (core + upstream, proxy, fastcgi, uwsgi,
scgi, grpc, ssl, v2, v3, limit_req, limit_conn), stream and os/unix process code.
"""
import os, re, sys

LEVELS = {"NGX_LOG_EMERG": "emerg", "NGX_LOG_ALERT": "alert", "NGX_LOG_CRIT": "crit",
          "NGX_LOG_ERR": "error", "NGX_LOG_WARN": "warn"}
HTTP_MODULES = ["ngx_http_upstream", "ngx_http_proxy_module", "ngx_http_fastcgi_module",
                "ngx_http_uwsgi_module", "ngx_http_scgi_module", "ngx_http_grpc_module",
                "ngx_http_ssl_module", "ngx_http_limit_req_module", "ngx_http_limit_conn_module"]

def files(root):
    src = os.path.join(root, "src")
    for d, _, fs in os.walk(src):
        rel = os.path.relpath(d, src)
        for f in sorted(fs):
            if not f.endswith(".c"):
                continue
            top = rel.split(os.sep)[0]
            keep = False
            if top in ("core", "event", "stream"):
                keep = True
            elif rel == "http":
                keep = True
            elif rel in ("http/v2", "http/v3"):
                keep = True
            elif rel == "http/modules":
                keep = any(f.startswith(m) for m in HTTP_MODULES)
            elif rel == "os/unix":
                keep = f in ("ngx_process_cycle.c", "ngx_process.c", "ngx_channel.c",
                             "ngx_daemon.c", "ngx_posix_init.c")
            if keep:
                yield os.path.join(d, f), os.path.join(rel, f)

MACRO_DEF = re.compile(r'^#define\s+(ngx_[a-z0-9_]+_n)\s+"((?:[^"\\]|\\.)*)"', re.M)

def macros(root):
    """ngx_*_n name macros ("open()", "socket()", ...): the first definition wins,
    Linux's files read first."""
    out = {}
    unix = os.path.join(root, "src", "os", "unix")
    order = [os.path.join(unix, f) for f in ("ngx_linux_config.h",)]
    for d, _, fs in os.walk(os.path.join(root, "src")):
        order += [os.path.join(d, f) for f in sorted(fs) if f.endswith((".h", ".c"))]
    for path in order:
        if "win32" in path or "freebsd" in path or "darwin" in path or "solaris" in path:
            continue
        for m in MACRO_DEF.finditer(open(path, encoding="latin-1").read()):
            out.setdefault(m.group(1), m.group(2))
    return out

TOKEN = re.compile(r'\s*(ngx_[a-z0-9_]+_n)\b')

CALL = re.compile(r"\bngx_(?:log_error|ssl_error)\s*\(\s*(NGX_LOG_[A-Z]+)\s*,")
STR = re.compile(r'\s*"((?:[^"\\]|\\.)*)"')

def formats(text, names):
    for m in CALL.finditer(text):
        level = LEVELS.get(m.group(1))
        if not level:
            continue
        # skip the log and err arguments: up to the first string literal in the call
        i = m.end()
        depth = 0
        while i < len(text):
            c = text[i]
            if c == '"' and depth == 0:
                break
            if c == '(':
                depth += 1
            elif c == ')':
                if depth == 0:
                    i = -1
                    break
                depth -= 1
            elif c == ';':
                i = -1
                break
            i += 1
        if i < 0:
            continue
        # a name macro right before the literal: ngx_open_file_n " \"%s\" failed"
        head = text[m.end():i]
        mac = re.search(r'(ngx_[a-z0-9_]+_n)\s*$', head)
        parts = [names.get(mac.group(1), mac.group(1))] if mac else []
        while True:
            s = STR.match(text, i)
            if not s:
                t = TOKEN.match(text, i)
                if t and t.group(1) in names and STR.match(text, t.end()):
                    parts.append(names[t.group(1)])
                    i = t.end()
                    continue
                # a build-time macro between literals (NGX_USER, NGX_PRIu64): "%s"
                t = re.match(r'\s*([A-Z][A-Z0-9_]+)\b', text[i:])
                if t and STR.match(text, i + t.end()):
                    parts.append("%s")
                    i += t.end()
                    continue
                break
            parts.append(s.group(1))
            i = s.end()
            # NGX_* macros between literals (e.g. "%" NGX_PRIu64) are rare; stop there
        fmt = "".join(parts)
        if fmt:
            yield level, fmt

def extract(root):
    out = {}
    names = macros(root)
    for path, rel in files(root):
        text = open(path, encoding="latin-1").read()
        text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
        # code never built: #if 0 ... #endif (not nested in these files)
        text = re.sub(r"^#if 0\b.*?^#endif", "", text, flags=re.S | re.M)
        for level, fmt in formats(text, names):
            fmt = fmt.encode("latin-1").decode("unicode_escape")
            out.setdefault((level, fmt), rel)
    return out

def main():
    a, b = extract(sys.argv[1]), extract(sys.argv[2])
    for k in sorted(set(a) | set(b), key=lambda k: (a.get(k) or b.get(k), k[1])):
        v = "both" if k in a and k in b else ("1.22" if k in a else "1.26")
        print(f"{k[0]}\t{v}\t{k[1]}")

main()
