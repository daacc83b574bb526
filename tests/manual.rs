//! The manual (README.md and the chapters in docs/) checked against itself and
//! against the binary: every relative link points at a file that exists and
//! every `#anchor` at a heading of that file (GitHub's slugs), every chapter
//! is reachable from the README, and every long flag of every subcommand's
//! `--help` appears somewhere in the manual. No network, no root.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every docs/*.md, sorted.
fn manual_files() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = fs::read_dir(root().join("docs"))
        .expect("docs/ exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    assert!(!docs.is_empty(), "docs/ holds no chapter");
    files.extend(docs);
    files
}

/// The text of a Markdown file as paragraphs, without fenced code blocks.
fn paragraphs(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut fence: Option<String> = None;
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(f) = &fence {
            if t.starts_with(f.as_str()) {
                fence = None;
            }
            continue;
        }
        if t.starts_with("```") || t.starts_with("~~~") {
            let ch = t.chars().next().unwrap();
            fence = Some(t.chars().take_while(|&c| c == ch).collect());
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            continue;
        }
        if t.is_empty() {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
        } else {
            cur.push_str(line);
            cur.push('\n');
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// A paragraph with its code spans (`...`, ``...``) removed, as CommonMark
/// pairs them: a run of N backticks closes at the next run of exactly N.
fn without_code_spans(p: &str) -> String {
    let b: Vec<char> = p.chars().collect();
    let run = |i: usize| b[i..].iter().take_while(|&&c| c == '`').count();
    let mut out = String::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != '`' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let n = run(i);
        let mut j = i + n;
        let mut close = None;
        while j < b.len() {
            if b[j] == '`' {
                let m = run(j);
                if m == n {
                    close = Some(j + m);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match close {
            Some(end) => {
                out.push(' ');
                i = end;
            }
            None => {
                out.extend(&b[i..i + n]);
                i += n;
            }
        }
    }
    out
}

/// GitHub's anchor for a heading's text: the rendered text lowercased, every
/// character that is not a letter, digit, space, `-` or `_` dropped, spaces
/// turned into `-`.
fn slug(heading: &str) -> String {
    // Rendered text: code spans keep their content, links their text.
    let mut text = String::new();
    let mut chars = heading.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '`' => {}
            ']' if chars.peek() == Some(&'(') => {
                for c in chars.by_ref() {
                    if c == ')' {
                        break;
                    }
                }
            }
            '[' => {}
            _ => text.push(c),
        }
    }
    text.trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a file's ATX headings, with GitHub's `-1`, `-2` for repeats.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for p in paragraphs(text) {
        for line in p.lines() {
            let t = line.trim_start();
            let hashes = t.chars().take_while(|&c| c == '#').count();
            if !(1..=6).contains(&hashes) || !t[hashes..].starts_with(' ') {
                continue;
            }
            let s = slug(t[hashes..].trim().trim_end_matches('#'));
            let n = seen.entry(s.clone()).or_insert(0);
            out.insert(if *n == 0 {
                s.clone()
            } else {
                format!("{s}-{n}")
            });
            *n += 1;
        }
    }
    out
}

/// The targets of a paragraph's links and images: `[text](target)`,
/// `![alt](target "title")` and `[label]: target`.
fn link_targets(p: &str) -> Vec<String> {
    let p = without_code_spans(p);
    let mut out = Vec::new();
    let mut rest = p.as_str();
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        let end = after
            .find(|c: char| c == ')' || c.is_whitespace())
            .unwrap_or(after.len());
        out.push(after[..end].trim_matches(['<', '>']).to_string());
        rest = &after[end..];
    }
    for line in p.lines() {
        let t = line.trim_start();
        if let (true, Some(i)) = (t.starts_with('['), t.find("]: ")) {
            if let Some(target) = t[i + 3..].split_whitespace().next() {
                out.push(target.to_string());
            }
        }
    }
    out
}

#[test]
fn links_and_anchors_resolve() {
    let files = manual_files();
    let mut anchor_cache: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    let mut anchors_of = |p: &Path| -> BTreeSet<String> {
        anchor_cache
            .entry(p.to_path_buf())
            .or_insert_with(|| anchors(&fs::read_to_string(p).unwrap()))
            .clone()
    };
    let mut bad = Vec::new();
    let mut checked = 0;
    let mut linked_from_readme = BTreeSet::new();
    for file in &files {
        let text = fs::read_to_string(file).unwrap();
        let name = file.strip_prefix(root()).unwrap().display().to_string();
        for p in paragraphs(&text) {
            for target in link_targets(&p) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                checked += 1;
                let (path, anchor) = match target.split_once('#') {
                    Some((p, a)) => (p, Some(a)),
                    None => (target.as_str(), None),
                };
                let dest = if path.is_empty() {
                    file.clone()
                } else {
                    file.parent().unwrap().join(path)
                };
                if !dest.exists() {
                    bad.push(format!("{name}: link to {target}: no such file"));
                    continue;
                }
                if name == "README.md" {
                    if let Ok(d) = dest.canonicalize() {
                        linked_from_readme.insert(d);
                    }
                }
                if let Some(a) = anchor {
                    let is_md = dest.extension().is_some_and(|e| e == "md");
                    if !is_md || !anchors_of(&dest).contains(a) {
                        bad.push(format!(
                            "{name}: link to {target}: no heading with the anchor #{a} in {}",
                            dest.strip_prefix(root()).unwrap_or(&dest).display()
                        ));
                    }
                }
            }
        }
    }
    for f in files.iter().skip(1) {
        let is_chapter = f
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with(|c: char| c.is_ascii_digit());
        if is_chapter && !linked_from_readme.contains(&f.canonicalize().unwrap()) {
            bad.push(format!(
                "README.md does not link to the chapter {}",
                f.strip_prefix(root()).unwrap().display()
            ));
        }
    }
    assert!(
        checked > 20,
        "only {checked} links found: the parser is broken"
    );
    assert!(
        bad.is_empty(),
        "{} broken links in the manual:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

#[test]
fn readme_stays_a_first_read() {
    let readme = fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 250,
        "README.md has {lines} lines: it is what a newcomer reads first (under ~250); move detail into a chapter in docs/"
    );
    for must in ["./scripts/demo.sh", "./scripts/test.sh", "wiretape demo"] {
        assert!(readme.contains(must), "README.md must show `{must}`");
    }
}

/// `wiretape SUB... --help`'s subcommands and long flags.
fn help(args: &[&str]) -> (Vec<String>, Vec<String>) {
    let out = Command::new(common::bin())
        .args(args)
        .arg("--help")
        .output()
        .expect("run wiretape --help");
    assert!(out.status.success(), "wiretape {args:?} --help failed");
    let text = String::from_utf8(out.stdout).unwrap();
    let (mut subs, mut flags) = (Vec::new(), Vec::new());
    let mut section = "";
    for line in text.lines() {
        if !line.starts_with(' ') {
            section = line.trim_end_matches(':');
            continue;
        }
        let t = line.trim_start();
        match section {
            "Commands" => {
                let name = t.split_whitespace().next().unwrap_or("");
                if !name.is_empty() && name != "help" {
                    subs.push(name.to_string());
                }
            }
            "Options" => {
                let t = t
                    .strip_prefix('-')
                    .and_then(|s| s.get(1..))
                    .and_then(|s| s.strip_prefix(", "))
                    .unwrap_or(t);
                if let Some(long) = t.strip_prefix("--") {
                    let name: String = long
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                        .collect();
                    if name != "help" && name != "version" {
                        flags.push(format!("--{name}"));
                    }
                }
            }
            _ => {}
        }
    }
    (subs, flags)
}

#[test]
fn every_long_flag_is_in_the_manual() {
    let manual: String = manual_files()
        .iter()
        .map(|f| fs::read_to_string(f).unwrap())
        .collect::<Vec<_>>()
        .join("\n");
    let mentioned = |flag: &str| {
        manual.match_indices(flag).any(|(i, _)| {
            !manual[i + flag.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '-')
        })
    };
    let mut todo: Vec<Vec<String>> = vec![vec![]];
    let (mut missing, mut seen) = (Vec::new(), 0);
    while let Some(path) = todo.pop() {
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let (subs, flags) = help(&args);
        for s in subs {
            let mut p = path.clone();
            p.push(s);
            todo.push(p);
        }
        for f in flags {
            seen += 1;
            if !mentioned(&f) {
                missing.push(format!("wiretape {} {f}", path.join(" ")));
            }
        }
    }
    assert!(
        seen > 100,
        "only {seen} flags found: the --help parser is broken"
    );
    assert!(
        missing.is_empty(),
        "flags in --help that README.md and docs/ never mention:\n{}",
        missing.join("\n")
    );
}

#[test]
fn slugs_follow_github() {
    assert_eq!(
        slug("The packet engine (TPACKET_V3)"),
        "the-packet-engine-tpacket_v3"
    );
    assert_eq!(
        slug("The timeline: `wiretape timeline`"),
        "the-timeline-wiretape-timeline"
    );
    assert_eq!(slug("A disk held to 150 MB/s"), "a-disk-held-to-150-mbs");
    assert_eq!(
        anchors("# A\n\n## A\n\n```\n# not a heading\n```\n\n### A\n"),
        ["a", "a-1", "a-2"].iter().map(|s| s.to_string()).collect()
    );
    assert_eq!(
        link_targets("see [x](a.md#b) and `[y](no.md)` and ![p](c.png \"t\")\n[r]: d.md\n"),
        vec!["a.md#b", "c.png", "d.md"]
    );
}
