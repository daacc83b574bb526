#!/usr/bin/env python3
"""The public API of wiretape's library crates as text, one file per crate
in public-api/, from the HTML rustdoc wrote (scripts/test.sh builds it with
the MSRV toolchain, pinned, so the rendering does not move under us).

    scripts/public-api.py            compare with public-api/*.txt (exit 1 on a difference)
    scripts/public-api.py --bless    write public-api/*.txt

Each line is one declaration as rustdoc prints it: every public item (its
declaration: a struct's public fields, an enum's variants, a trait's
methods, a function's signature), each `pub use`, each inherent method and
each trait an item implements by hand. Auto traits and blanket impls are
left out (they follow from the rest and change with the toolchain). Why
not cargo-public-api: it reads rustdoc's JSON, which only nightly writes;
a pinned nightly and the tool's own build would add minutes to every CI
run, this reads what the doc step already made, in about a second.
"""
import html
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "doc")
OUT = os.path.join(ROOT, "public-api")
KINDS = ("struct", "enum", "trait", "fn", "constant", "type", "macro", "static", "union", "derive", "attr")


def text(fragment):
    """The text of an HTML fragment, whitespace folded."""
    fragment = re.sub(r"<span class=\"comment\">.*?</span>", "", fragment, flags=re.S)
    fragment = re.sub(r"<[^>]+>", "", fragment)
    return re.sub(r"\s+", " ", html.unescape(fragment)).strip()


def section(page, list_id):
    """The part of an item page in the <div id=LIST_ID>, up to the next such list."""
    m = re.search(r'id="%s"' % list_id, page)
    if not m:
        return ""
    end = re.search(r'id="[a-z-]+-list"|<h2 id="(?!implementations)', page[m.end():])
    return page[m.end(): m.end() + end.start() if end else len(page)]


def crate_lines(crate):
    base = os.path.join(DOC, crate)
    lines = []
    for d, _, files in os.walk(base):
        rel = os.path.relpath(d, base)
        path = crate if rel == "." else crate + "::" + rel.replace(os.sep, "::")
        for f in sorted(files):
            if not f.endswith(".html"):
                continue
            page = open(os.path.join(d, f), encoding="utf-8").read()
            if f == "index.html":
                lines.append("mod %s" % path)
                for r in re.findall(r'<dt id="reexport\.[^"]*"><code>(.*?)</code>', page, re.S):
                    lines.append("%s: %s" % (path, text(r)))
                continue
            kind = f.split(".")[0]
            if kind not in KINDS:
                continue
            name = f.split(".")[1]
            me = "%s::%s" % (path, name)
            for decl in re.findall(r'<pre class="rust item-decl">(.*?)</pre>', page, re.S):
                lines.append("%s: %s" % (me, text(decl)))
            for h in re.findall(r'<h4 class="code-header">(.*?)</h4>', section(page, "implementations-list"), re.S):
                lines.append("%s: %s" % (me, text(h)))
            for h in re.findall(r'<h3 class="code-header">(.*?)</h3>', section(page, "trait-implementations-list"), re.S):
                lines.append("%s: %s" % (me, text(h)))
            if kind == "trait":
                for h in re.findall(r'<h3 class="code-header">(.*?)</h3>', section(page, "implementors-list"), re.S):
                    lines.append("%s: %s" % (me, text(h)))
    return sorted(set(lines))


def crates():
    """The library crates of the workspace (the CLI is a binary)."""
    names = ["wiretape"]
    for m in re.findall(r'"crates/([^"]+)"', open(os.path.join(ROOT, "Cargo.toml")).read()):
        toml = open(os.path.join(ROOT, "crates", m, "Cargo.toml")).read()
        name = re.search(r'^name = "([^"]+)"', toml, re.M).group(1)
        if name != "wiretape-cli":
            names.append(name.replace("-", "_"))
    return sorted(set(names))


def main():
    bless = "--bless" in sys.argv[1:]
    os.makedirs(OUT, exist_ok=True)
    differ = []
    for c in crates():
        if not os.path.isdir(os.path.join(DOC, c)):
            sys.exit("public-api: no docs for %s in %s: run cargo doc first" % (c, DOC))
        new = "\n".join(crate_lines(c)) + "\n"
        p = os.path.join(OUT, c + ".txt")
        old = open(p).read() if os.path.exists(p) else ""
        if new != old:
            if bless:
                open(p, "w").write(new)
            else:
                a, b = set(old.splitlines()), set(new.splitlines())
                for l in sorted(a - b):
                    print("public-api: %s: - %s" % (c, l))
                for l in sorted(b - a):
                    print("public-api: %s: + %s" % (c, l))
                differ.append(c)
    if differ:
        print("public-api: the public API of %s changed; if that is meant, run "
              "scripts/public-api.py --bless and commit public-api/" % ", ".join(differ), file=sys.stderr)
        sys.exit(1)


main()
