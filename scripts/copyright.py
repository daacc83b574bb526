#!/usr/bin/env python3
"""The Debian package's copyright file (machine-readable, DEP-5): wiretape's
own licence, then every crate compiled into /usr/bin/wiretape with its
version, its licence expression and the copyright lines of its own licence
files, then the text of each licence named (Debian's copy in
/usr/share/common-licenses where it has one, else the text a crate of the
build ships).

    scripts/copyright.py OUT

The crates are those `cargo metadata` resolves for wiretape-cli on
x86_64-unknown-linux-gnu through normal dependencies (build and dev
dependencies are not in the binary), read from Cargo's own download of
their sources: no other tool, nothing fetched beyond what the build has.
A licence with no text to be found is an error naming it.
"""

import json
import os
import re
import subprocess
import sys

# In Debian's base-files: referred to, not copied (lintian's wish).
COMMON = {
    "Apache-2.0": "Apache-2.0",
    "CC0-1.0": "CC0-1.0",
    "LGPL-2.1-only": "LGPL-2.1",
    "LGPL-2.1": "LGPL-2.1",
    "MPL-2.0": "MPL-2.0",
    "GPL-2.0-only": "GPL-2",
    "GPL-2.0": "GPL-2",
}
# Licence file names that hold one licence's text, by SPDX id.
FILE_HINTS = {
    "MIT": ["LICENSE-MIT", "LICENSE.MIT", "LICENSE-MIT.md", "license-mit", "LICENSE_MIT"],
    "BSD-2-Clause": ["LICENSE-BSD", "LICENSE.BSD-2-Clause", "LICENSE-BSD-2-Clause"],
    "BSD-3-Clause": ["LICENSE-BSD", "LICENSE-BSD-3-Clause", "LICENSE.BSD-3-Clause"],
    "Zlib": ["LICENSE-ZLIB", "LICENSE-ZLIB.md", "LICENSE-Zlib", "LICENSE.Zlib"],
    "Unlicense": ["UNLICENSE", "LICENSE-UNLICENSE"],
    "ISC": ["LICENSE-ISC", "LICENSE.ISC"],
    "0BSD": ["LICENSE-0BSD", "LICENSE-0BSD.md"],
    "Unicode-3.0": ["LICENSE-UNICODE", "LICENSE-Unicode", "UNICODE-LICENSE"],
}
# Words a licence text is recognised by, when a crate has one licence and
# a plain LICENSE file.
MARKS = {
    "MIT": "Permission is hereby granted, free of charge",
    "BSD-2-Clause": "Redistributions in binary form must reproduce",
    "BSD-3-Clause": "Neither the name",
    "ISC": "Permission to use, copy, modify, and/or distribute",
    "Zlib": "This notice may not be removed or altered from any source",
    "Unlicense": "This is free and unencumbered software",
    "0BSD": "Permission to use, copy, modify, and/or distribute",
    "Unicode-3.0": "UNICODE LICENSE V3",
}


def crates(root):
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--locked",
             "--filter-platform", "x86_64-unknown-linux-gnu"],
            cwd=root, check=True, capture_output=True, text=True).stdout)
    pkgs = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    start = next(p["id"] for p in meta["packages"] if p["name"] == "wiretape-cli")
    seen, todo = set(), [start]
    while todo:
        i = todo.pop()
        if i in seen:
            continue
        seen.add(i)
        for d in nodes[i]["deps"]:
            if any(k["kind"] is None for k in d["dep_kinds"]):
                todo.append(d["pkg"])
    # Ours (path dependencies) are wiretape's own stanza.
    out = [pkgs[i] for i in seen if pkgs[i]["source"] is not None]
    return sorted(out, key=lambda p: (p["name"], p["version"]))


def spdx_ids(expr):
    return [t for t in re.split(r"[\s()/]+", expr) if t and t not in ("OR", "AND", "WITH")]


def dep5_expr(expr):
    # SPDX "MIT OR Apache-2.0" (and the old "MIT/Apache-2.0") -> DEP-5 "MIT or Apache-2.0".
    expr = expr.replace("/", " OR ")
    return re.sub(r"\s+", " ", expr.replace(" OR ", " or ").replace(" AND ", " and ")).strip()


def licence_files(p):
    d = os.path.dirname(p["manifest_path"])
    names = sorted(f for f in os.listdir(d)
                   if re.match(r"(?i)^(licen[cs]e|copying|unlicense|copyright|notice)", f))
    return [os.path.join(d, f) for f in names if os.path.isfile(os.path.join(d, f))]


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def copyright_lines(p):
    lines = []
    for f in licence_files(p):
        for line in read(f).splitlines():
            s = line.strip().strip("*#/ ").strip()
            if re.match(r"(?i)^copyright\b", s) and not re.search(r"[\[{<]yyyy|\[name|\{name|<year>|owner\]", s, re.I) \
                    and re.search(r"\d{4}|\(c\)|©", s, re.I) and len(s) < 200:
                s = re.sub(r"(?i)^copyright\s*(\(c\)|©)?\s*", "", s).strip()
                if s and s not in lines:
                    lines.append(s)
    if not lines:
        lines = [a for a in p.get("authors") or []] or [f"the {p['name']} developers"]
    return lines


def licence_text(lid, pkgs):
    """The standard text of `lid` as a crate of the build ships it, its own
    copyright lines taken off (they are in that crate's stanza)."""
    for p in pkgs:
        if lid not in spdx_ids(p["license"] or ""):
            continue
        files = licence_files(p)
        hinted = [f for f in files if os.path.basename(f) in FILE_HINTS.get(lid, [])]
        single = [f for f in files if len(spdx_ids(p["license"] or "")) == 1]
        for f in hinted + single:
            t = read(f)
            if lid in MARKS and MARKS[lid].lower() not in t.lower():
                continue
            body = [l for l in t.splitlines() if not re.match(r"(?i)^\s*copyright\b.*(\d{4}|\(c\)|©)", l)]
            while body and not body[0].strip():
                body.pop(0)
            return "\n".join(body).rstrip()
    return None


def field(text):
    """A DEP-5 multi-line field body: each line indented, empty ones as ' .'."""
    return "\n".join(" " + l.rstrip() if l.strip() else " ." for l in text.splitlines())


def main():
    out = sys.argv[1]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    pkgs = crates(root)
    parts = ["""Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: wiretape
Comment: wiretape is one static Rust binary; the crates listed below are
 compiled into /usr/bin/wiretape (libelf, zlib and libpcap are Debian's, linked
 dynamically). Each crate's stanza gives its version, its licence expression
 as its Cargo.toml states it, and the copyright lines of its licence files
 (its authors where those have none).

Files: *
Copyright: the wiretape developers
License: MIT or Apache-2.0
"""]
    ids = {"MIT", "Apache-2.0"}
    for p in pkgs:
        expr = p["license"]
        if not expr:
            sys.exit(f"copyright.py: crate {p['name']} {p['version']} states no licence: read its files and add it by hand")
        ids.update(spdx_ids(expr))
        cr = copyright_lines(p)
        parts.append(
            f"Files: rust-crates/{p['name']}-{p['version']}/*\n"
            f"Copyright: {cr[0]}\n" + "".join(f" {c}\n" for c in cr[1:]) +
            f"License: {dep5_expr(expr)}\n"
            f"Comment: the crate {p['name']} {p['version']}"
            + (f", {p['repository']}" if p.get("repository") else "") + "\n")
    for lid in sorted(ids):
        if lid in COMMON:
            parts.append(f"License: {lid}\n On Debian systems the full text of this licence is in\n"
                         f" /usr/share/common-licenses/{COMMON[lid]}.\n")
            continue
        text = licence_text(lid, pkgs + [])
        if text is None:
            sys.exit(f"copyright.py: no text of the licence {lid} in the crates that name it: add it to scripts/copyright.py")
        parts.append(f"License: {lid}\n{field(text)}\n")
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(parts))
    print(f"copyright.py: {len(pkgs)} crates, {len(ids)} licences -> {out}")


if __name__ == "__main__":
    main()
