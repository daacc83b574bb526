//! A store's description: `record` with several volumes (`-w A -w B`)
//! writes [`DESCRIPTION`] (`store.toml`) into each, naming all of them:
//!
//! ```toml
//! # wiretape store: the volumes (directories) of one recording.
//! volumes = ["/data/a", "/data/b"]
//! ```
//!
//! A reader given any one volume, or the description file itself, reads
//! every volume ([`expand`]); users do not repeat the list.

use crate::kept::Kept;
use std::path::{Path, PathBuf};

/// The description's file name, in each volume.
pub const DESCRIPTION: &str = "store.toml";

/// The description's text naming `dirs` (absolute paths).
pub fn describe(dirs: &[PathBuf]) -> String {
    let mut s = String::from(
        "# wiretape store: the volumes (directories) of one recording, written by\n\
         # `wiretape record`. A reader given one of them, or this file, reads them all.\n\
         volumes = [\n",
    );
    for d in dirs {
        let p = d.to_string_lossy();
        let q = p.replace('\\', "\\\\").replace('"', "\\\"");
        s.push_str(&format!("  \"{q}\",\n"));
    }
    s.push_str("]\n");
    s
}

/// The volumes a description file names (None: not a description, or
/// unreadable).
pub fn read(file: &Path) -> Option<Vec<PathBuf>> {
    let text = std::fs::read_to_string(file).ok()?;
    let t: toml::Table = text.parse().ok()?;
    let v = t.get("volumes")?.as_array()?;
    Some(
        v.iter()
            .filter_map(|x| x.as_str())
            .map(PathBuf::from)
            .collect(),
    )
}

/// What a reader given `input` (a directory or a description file) reads:
/// the volumes the description names (the given directory first, then the
/// others that exist, in their order), else `input` itself. A volume the
/// description names that is missing is returned in the second list.
pub fn expand(input: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    expand_in(input, None)
}

/// [`expand`], a directory's description looked for in its kept listing
/// where `kept` keeps one ([`crate::ReadOptions::with_kept_listings`]):
/// a directory whose listing, kept at its mtime now, names no
/// [`DESCRIPTION`] has none, and it is not opened (on a cold page cache,
/// looking up a name a directory does not hold reads its blocks).
pub(crate) fn expand_in(input: &Path, kept: Option<&Kept>) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let meta = match kept {
        Some(k) => k.stat(input).ok(),
        None => std::fs::metadata(input).ok(),
    };
    let (file, dir) = if meta.as_ref().is_some_and(|m| m.is_dir()) {
        (input.join(DESCRIPTION), Some(input))
    } else if input.file_name().is_some_and(|n| n == DESCRIPTION) {
        (input.to_owned(), None)
    } else {
        return (vec![input.to_owned()], Vec::new());
    };
    let mtime = meta.and_then(|m| m.modified().ok());
    if let (Some(_), Some(k), Some(t)) = (dir, kept, mtime) {
        if k.lacks(input, t, DESCRIPTION) {
            return (vec![input.to_owned()], Vec::new());
        }
    }
    let Some(named) = read(&file) else {
        return (vec![input.to_owned()], Vec::new());
    };
    let mut found: Vec<PathBuf> = dir.map(Path::to_owned).into_iter().collect();
    let mut missing = Vec::new();
    for v in named {
        let same = found.iter().any(|f| same_dir(f, &v));
        if same {
            continue;
        }
        if v.is_dir() {
            found.push(v);
        } else {
            missing.push(v);
        }
    }
    (found, missing)
}

/// Every input expanded ([`expand`]), each directory once (giving all the
/// volumes, or one and its description, reads each once). Volumes a
/// description names that are missing are left out.
pub fn expand_inputs(inputs: &[PathBuf]) -> Vec<PathBuf> {
    expand_inputs_in(inputs, None)
}

/// [`expand_inputs`], descriptions looked for as [`expand_in`] does.
pub(crate) fn expand_inputs_in(inputs: &[PathBuf], kept: Option<&Kept>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for i in inputs {
        for p in expand_in(i, kept).0 {
            if !out.iter().any(|o| same_dir(o, &p)) {
                out.push(p);
            }
        }
    }
    out
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With kept listings, a directory whose listing is kept at its mtime
    /// now is asked for no description its listing does not name; one
    /// written since (the mtime moved) is read; without kept listings it
    /// is looked for every time.
    #[test]
    fn a_kept_listing_says_a_volume_has_no_description() {
        let base = std::env::temp_dir().join(format!("wt-store-kept-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let (a, b) = (base.join("a"), base.join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let past = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        let age = |t| std::fs::File::open(&a).unwrap().set_modified(t).unwrap();
        age(past);
        let opts = crate::ReadOptions::new()
            .with_kept_listings()
            .with_kept_index_pages(1 << 20);
        let only_a = vec![a.clone()];
        assert_eq!(opts.expand_inputs(&only_a), only_a);
        // Listed (a query lists the store): kept at its mtime.
        opts.list_any(&a, None).unwrap();
        // A description written while the mtime is put back: the kept
        // listing answers (it is not looked for); readers that keep
        // nothing find it.
        std::fs::write(a.join(DESCRIPTION), describe(&[a.clone(), b.clone()])).unwrap();
        age(past);
        assert_eq!(opts.expand_inputs(&only_a), only_a);
        let both = vec![a.clone(), b.clone()];
        assert_eq!(expand_inputs(&only_a), both);
        assert_eq!(crate::ReadOptions::new().expand_inputs(&only_a), both);
        // The mtime moved: the description is read.
        age(std::time::SystemTime::now() - std::time::Duration::from_secs(30));
        assert_eq!(opts.expand_inputs(&only_a), both);
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_volume_or_the_file_names_every_volume() {
        let base = std::env::temp_dir().join(format!("wt-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let (a, b) = (base.join("a \"x\""), base.join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let gone = base.join("gone");
        let text = describe(&[a.clone(), b.clone(), gone.clone()]);
        for d in [&a, &b] {
            std::fs::write(d.join(DESCRIPTION), &text).unwrap();
        }
        assert_eq!(
            read(&a.join(DESCRIPTION)).unwrap(),
            [a.clone(), b.clone(), gone.clone()]
        );
        assert_eq!(expand(&b), (vec![b.clone(), a.clone()], vec![gone.clone()]));
        assert_eq!(
            expand(&a.join(DESCRIPTION)),
            (vec![a.clone(), b.clone()], vec![gone])
        );
        assert_eq!(
            expand_inputs(&[a.clone(), b.clone(), b.join(DESCRIPTION)]),
            [a.clone(), b.clone()],
            "each volume once"
        );
        // A plain directory or file is itself.
        assert_eq!(expand(&base), (vec![base.clone()], vec![]));
        std::fs::remove_dir_all(base).unwrap();
    }
}
