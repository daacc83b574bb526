//! `wiretape generate` (hidden): the man pages and shell completions, printed
//! from the very clap definitions that parse the command line, so that
//! `--help`, `man wiretape-record` and tab completion cannot disagree
//! (ripgrep's way: `rg --generate man`). `scripts/package.sh` runs the binary
//! it packages to make them; a build script could not, since the definitions
//! live in this binary crate, and a generated copy committed to the
//! repository would go stale.

use anyhow::{Context, Result};
use clap::CommandFactory;
use clap_complete::Shell;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(clap::Subcommand)]
enum What {
    /// Man pages, one per subcommand (wiretape.1, wiretape-record.1,
    /// wiretape-certs-init.1, ...), written into DIR.
    Man {
        /// Directory to write the pages into (created).
        dir: PathBuf,
    },
    /// The bash completion script, on standard output.
    CompleteBash,
    /// The zsh completion script, on standard output.
    CompleteZsh,
    /// The fish completion script, on standard output.
    CompleteFish,
}

pub(crate) fn run(a: Args) -> Result<i32> {
    let mut cmd = crate::Cli::command();
    cmd.build();
    let shell = match a.what {
        What::Man { dir } => {
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            let source = format!("wiretape {}", env!("CARGO_PKG_VERSION"));
            let n = man_pages(&cmd, &dir, &source)?;
            eprintln!("wiretape: {n} man pages written to {}", dir.display());
            return Ok(0);
        }
        What::CompleteBash => Shell::Bash,
        What::CompleteZsh => Shell::Zsh,
        What::CompleteFish => Shell::Fish,
    };
    clap_complete::generate(shell, &mut cmd, "wiretape", &mut std::io::stdout());
    Ok(0)
}

/// Writes the page of `cmd` and of each of its visible subcommands (their
/// names joined by dashes: wiretape-certs-init.1) into `dir`; how many.
fn man_pages(cmd: &clap::Command, dir: &Path, source: &str) -> Result<usize> {
    let mut n = 0;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        if sub.get_name() == "help" {
            continue;
        }
        n += man_pages(sub, dir, source)?;
    }
    let man = clap_mangen::Man::new(cmd.clone())
        .source(source)
        .manual("wiretape manual");
    let path = dir.join(man.get_filename());
    let mut out = Vec::new();
    man.render(&mut out)?;
    std::fs::write(&path, out).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(n + 1)
}
