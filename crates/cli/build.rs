//! `wiretape --version` names the commit it was built from: this asks
//! `git rev-parse HEAD` in the workspace and hands the answer to the crate as
//! `WIRETAPE_COMMIT` (12 hex digits, or `unknown commit` where there is no
//! git repository of this source: a tarball, a crate from a registry).
//! A packager building from a tarball may set `WIRETAPE_COMMIT` itself.
//!
//! Cargo runs this again when HEAD moves (a commit, a checkout): it watches
//! the HEAD file and the ref of the branch checked out.

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(root: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-env-changed=WIRETAPE_COMMIT");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    // crates/cli -> the workspace root.
    let root = manifest
        .parent()
        .and_then(Path::parent)
        .unwrap_or(&manifest)
        .to_path_buf();
    if let Ok(c) = std::env::var("WIRETAPE_COMMIT") {
        if !c.trim().is_empty() {
            println!("cargo:rustc-env=WIRETAPE_COMMIT=commit {}", c.trim());
            return;
        }
    }
    // Only this source's own repository: a tarball unpacked inside some other
    // git work tree must not take that tree's commit.
    let ours = git(&root, &["rev-parse", "--show-toplevel"])
        .map(PathBuf::from)
        .and_then(|t| t.canonicalize().ok())
        .is_some_and(|t| Some(t) == root.canonicalize().ok());
    let commit = if ours {
        git(&root, &["rev-parse", "--short=12", "HEAD"])
    } else {
        None
    };
    match &commit {
        Some(c) => println!("cargo:rustc-env=WIRETAPE_COMMIT=commit {c}"),
        None => println!("cargo:rustc-env=WIRETAPE_COMMIT=unknown commit"),
    }
    if ours {
        // HEAD (a checkout, a detached commit), the branch's ref (a commit on
        // it; where it is packed, the directory a new loose ref will appear
        // in) and packed-refs (after `git gc`), where they exist.
        let branch = git(&root, &["symbolic-ref", "-q", "HEAD"]);
        for p in ["HEAD", "packed-refs"].into_iter().chain(branch.as_deref()) {
            let Some(path) = git(&root, &["rev-parse", "--git-path", p]) else {
                continue;
            };
            let path = root.join(path);
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            } else if Some(p) == branch.as_deref() {
                if let Some(dir) = path.parent().filter(|d| d.exists()) {
                    println!("cargo:rerun-if-changed={}", dir.display());
                }
            }
        }
    } else {
        // No repository: nothing to watch but this file.
        println!("cargo:rerun-if-changed=build.rs");
    }
}
