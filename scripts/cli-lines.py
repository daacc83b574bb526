#!/usr/bin/env python3
"""The CLI's size, by kind of line: how much of crates/cli/src is code.

Each line of each .rs file under crates/cli/src (or the directory given) is
one of:

  code     a line with code on it (a trailing comment does not change that)
  doc      a doc comment, `///` or `//!` (clap's help text comes from these)
  comment  another comment: `//`, or a line inside or of a `/* */` block
  blank    nothing but white space
  test     any line of a `#[cfg(test)] mod NAME { ... }` block, from the
           attribute to its closing brace (counted here, not above)

Strings, raw strings, character literals and nested block comments are
followed across lines, so `"https://..."` is code and a brace in a string
does not end a test module. Prints a one-line summary, then a table per
file (largest code first). No dependencies; Python 3.8 or later.

    python3 scripts/cli-lines.py [DIR] [--total]
"""

import os
import re
import sys

KINDS = ("code", "doc", "comment", "blank", "test")


class Lexer:
    """Carries the state of a Rust file from one line to the next."""

    def __init__(self):
        self.block = 0  # depth of nested /* */
        self.string = None  # None, '"', or a raw string's closing: '"##'

    def line(self, text):
        """Classify the start of `text`, scan it to its end, and return
        (kind, opening braces, closing braces) of its code."""
        i, n = 0, len(text)
        has_code = False
        comment = False
        doc = False
        opens = closes = 0
        if self.string is not None:
            has_code = True
        elif self.block:
            comment = True
        while i < n:
            if self.string is not None:
                end = self.string
                if end == '"':
                    if text[i] == "\\":
                        i += 2
                        continue
                    if text[i] == '"':
                        self.string = None
                    i += 1
                    continue
                if text.startswith(end, i):
                    self.string = None
                    i += len(end)
                else:
                    i += 1
                continue
            if self.block:
                if text.startswith("/*", i):
                    self.block += 1
                    i += 2
                elif text.startswith("*/", i):
                    self.block -= 1
                    i += 2
                else:
                    i += 1
                continue
            c = text[i]
            if c.isspace():
                i += 1
                continue
            if text.startswith("//", i):
                if not has_code:
                    comment = True
                    rest = text[i:]
                    doc = (rest.startswith("///") and not rest.startswith("////")) or rest.startswith("//!")
                break
            if text.startswith("/*", i):
                self.block = 1
                if not has_code:
                    comment = True
                i += 2
                continue
            has_code = True
            m = re.match(r'b?r(#*)"', text[i:])
            if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
                self.string = '"' + m.group(1)
                i += m.end()
                continue
            if c == '"':
                self.string = '"'
                i += 1
                continue
            if c == "'":
                # A character literal ('{', '\n', '\u{7f}') or a lifetime ('a).
                m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:])
                i += m.end() if m else 1
                continue
            if c == "{":
                opens += 1
            elif c == "}":
                closes += 1
            i += 1
        if has_code:
            kind = "code"
        elif comment or self.block:
            kind = "doc" if doc else "comment"
        else:
            kind = "blank"
        return kind, opens, closes


def count_file(path):
    counts = dict.fromkeys(KINDS, 0)
    lex = Lexer()
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    pending = []  # kinds of the lines from a `#[cfg(test)]` on, until `mod X {`
    depth = None  # brace depth inside a test module
    for text in lines:
        kind, opens, closes = lex.line(text)
        s = text.strip()
        if depth is not None:
            counts["test"] += 1
            depth += opens - closes
            if depth <= 0:
                depth = None
            continue
        if pending:
            if kind != "code" or s.startswith("#["):
                pending.append(kind)
                continue
            if re.match(r"(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", s):
                counts["test"] += len(pending) + 1
                pending = []
                depth = opens - closes
                if depth <= 0:
                    depth = None
                continue
            for k in pending:  # not a test module: count its lines as they are
                counts[k] += 1
            pending = []
        if kind == "code" and s == "#[cfg(test)]":
            pending = ["code"]
            continue
        counts[kind] += 1
    for k in pending:
        counts[k] += 1
    return counts


def main(argv):
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates", "cli", "src")
    only_total = "--total" in argv
    args = [a for a in argv if a != "--total"]
    if args:
        root = args[0]
    root = os.path.normpath(root)
    rows = []
    for d, _, files in os.walk(root):
        for name in files:
            if name.endswith(".rs"):
                p = os.path.join(d, name)
                rows.append((os.path.relpath(p, root), count_file(p)))
    if not rows:
        sys.exit(f"cli-lines: no .rs file under {root}")
    total = dict.fromkeys(KINDS, 0)
    for _, c in rows:
        for k in KINDS:
            total[k] += c[k]
    all_lines = sum(total.values())
    print(
        f"{root}: {len(rows)} files, {all_lines} lines: {total['code']} code, "
        f"{total['doc']} doc comments, {total['comment']} other comments, "
        f"{total['blank']} blank, {total['test']} in test modules"
    )
    if only_total:
        return
    rows.sort(key=lambda r: (-r[1]["code"], r[0]))
    w = max(len(r[0]) for r in rows + [("total", None)])
    head = f"{'file':<{w}} " + " ".join(f"{k:>7}" for k in KINDS) + f" {'lines':>7}"
    print(head)
    for name, c in rows + [("total", total)]:
        print(f"{name:<{w}} " + " ".join(f"{c[k]:>7}" for k in KINDS) + f" {sum(c.values()):>7}")


if __name__ == "__main__":
    main(sys.argv[1:])
