//! `wiretape record --config FILE` and `wiretape api --config FILE`: the
//! flags of `record` or `api` from a TOML file, read by the library
//! ([`wiretape::pipeline::options::file`]: the keys, their checks and
//! errors). Here: which flags the command line gives (a lenient first look
//! with clap), the command's flags as the library's [`Flag`]s, and the
//! file's arguments spliced into the command line, which clap then parses
//! as one: so every flag, its checks and its defaults work the same from a
//! file.

use anyhow::Result;
use clap::parser::ValueSource;
use clap::{ArgAction, CommandFactory};
use std::ffi::OsString;
use wiretape::pipeline::options::file::{self, Command, Flag};

/// The subcommands that take `--config FILE`.
const WITH_CONFIG: [&str; 2] = ["record", "api"];

/// The command line with the arguments of `record|api --config FILE` added
/// (those the command line does not give itself); unchanged without
/// `--config`.
pub(crate) fn expand<C: CommandFactory>(args: Vec<OsString>) -> Result<Vec<OsString>> {
    // A lenient first look: which flags does the command line give?
    let mut cmd = C::command().ignore_errors(true);
    for name in WITH_CONFIG {
        cmd = cmd.mut_subcommand(name, |c| c.ignore_errors(true));
    }
    let Ok(m) = cmd.try_get_matches_from(&args) else {
        return Ok(args); // the real parse reports it
    };
    let Some((name, rm)) = m.subcommand() else {
        return Ok(args);
    };
    if !WITH_CONFIG.contains(&name) {
        return Ok(args);
    }
    let Some(path) = rm.get_one::<std::path::PathBuf>("config") else {
        return Ok(args);
    };
    let given = |id: &str| rm.value_source(id) == Some(ValueSource::CommandLine);
    let sub = C::command()
        .find_subcommand(name)
        .cloned()
        .expect("a subcommand of WITH_CONFIG");
    let flags = flags(&sub, &given);
    let title = format!("wiretape {name}");
    let mut command = Command::new(&title, &flags);
    command.filter = sub.get_arguments().any(|a| a.get_id() == "expression");
    command.filter_given = given("expression") || given("after") || given("filter_file");
    command.examples = if command.filter {
        &["rotate-size"]
    } else {
        &["listen", "tls-cert"]
    };
    let from_file = file::read(path, &command).map_err(|e| crate::usage(e.to_string()))?;
    let at = args
        .iter()
        .position(|a| a == name)
        .expect("the subcommand was parsed");
    let mut out: Vec<OsString> = args[..=at].to_vec();
    out.extend(from_file.flags.into_iter().map(OsString::from));
    out.extend(args[at + 1..].iter().cloned());
    if !from_file.filter.is_empty() {
        out.push("--".into());
        out.extend(from_file.filter.into_iter().map(OsString::from));
    }
    Ok(out)
}

/// `sub`'s flags a file may give (not `--config`, `--check`, `--help`),
/// each marked `given` where the command line has it.
fn flags<'a>(sub: &'a clap::Command, given: &dyn Fn(&str) -> bool) -> Vec<Flag<'a>> {
    sub.get_arguments()
        .filter(|a| !matches!(a.get_id().as_str(), "config" | "check" | "help"))
        .filter_map(|a| {
            let long = a.get_long()?;
            let mut flag = match a.get_action() {
                ArgAction::SetTrue => Flag::switch(long),
                ArgAction::Append => Flag::repeated(long),
                _ => Flag::value(long),
            };
            flag.given = given(a.get_id().as_str());
            Some(flag)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file's arguments for `wiretape SUB --config FILE EXTRA...`.
    fn expanded(sub: &str, text: &str, extra: &[&str]) -> Result<Vec<String>> {
        // One file per call: the tests run in parallel in one process.
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("wt-config-{}-{sub}-{n}", std::process::id()));
        std::fs::write(&dir, text)?;
        let mut args: Vec<OsString> = vec!["wiretape".into(), sub.into(), "--config".into()];
        args.push(dir.clone().into());
        args.extend(extra.iter().map(OsString::from));
        let out = expand::<crate::Cli>(args);
        let _ = std::fs::remove_file(&dir);
        Ok(out?
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .filter(|a| a != "--config" && !a.starts_with(std::env::temp_dir().to_str().unwrap()))
            .collect())
    }

    #[test]
    fn record_flags_from_clap_and_the_command_line_wins() {
        let text = r#"
            interface = ["a", "b"]
            keep_files = 10
            queues = [0, 1]
            wait-iface = true
            filter = "tcp port 443"
        "#;
        // The store's limit and a volume's own, as two flags.
        let args = expanded("record", "keep-bytes = [\"10T\", \"/disk3=400G\"]", &[]).unwrap();
        assert_eq!(
            args,
            [
                "wiretape",
                "record",
                "--keep-bytes=10T",
                "--keep-bytes=/disk3=400G"
            ]
        );
        let args = expanded("record", text, &["--keep-files", "3", "-w", "/d"]).unwrap();
        assert_eq!(
            args,
            [
                "wiretape",
                "record",
                "--interface=a",
                "--interface=b",
                "--queues=0,1",
                "--wait-iface",
                "--keep-files",
                "3",
                "-w",
                "/d",
                "--",
                "tcp",
                "port",
                "443"
            ]
        );
        // A filter on the command line: the file's is left out.
        let args = expanded("record", text, &["-i", "x", "-w", "/d", "udp"]).unwrap();
        assert!(!args.contains(&"tcp".to_string()), "{args:?}");
        assert!(
            !args.iter().any(|a| a.starts_with("--interface")),
            "{args:?}"
        );
    }

    #[test]
    fn api_keys_and_config_itself_are_checked() {
        let args = expanded("api", "allow_client = [\"a\", \"b\"]\nquiet = true", &[]).unwrap();
        assert_eq!(
            args,
            [
                "wiretape",
                "api",
                "--allow-client=a",
                "--allow-client=b",
                "--quiet"
            ]
        );
        for (sub, text, want) in [
            (
                "api",
                "filter = \"udp\"",
                "`wiretape api`, e.g. listen, tls-cert)",
            ),
            ("record", "config = \"x\"", "unknown key 'config'"),
            ("record", "check = true", "unknown key 'check'"),
        ] {
            let e = expanded(sub, text, &[]).unwrap_err();
            assert!(e.downcast_ref::<crate::Usage>().is_some());
            assert!(e.to_string().contains(want), "{text}: {e}");
        }
    }
}
