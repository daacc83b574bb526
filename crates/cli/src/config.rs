//! `wiretape record --config FILE` and `wiretape api --config FILE`: the
//! flags of `record` or `api` from a TOML file (what a service reads:
//! `/etc/wiretape/eth0.conf`, `/etc/wiretape/api.conf`). Keys are the long
//! flag names (`rotate-size`, or `rotate_size`), values as on the command
//! line: strings, numbers, `true` for a switch (`false` leaves it off),
//! arrays for lists (`queues = [0, 1]`, `cpus = [2, 3]`, and a repeatable
//! flag: `write = ["/a", "/b"]`); for `record`, `filter` is the capture
//! filter expression. A flag given on the command line overrides the file's.
//!
//! The file is read with the `toml` crate into a table (serde), each key
//! checked against the subcommand's own flags (an unknown key is a usage
//! error naming it), and turned into the arguments it stands for, which clap
//! then parses with the command line's as one: so every flag, its checks and
//! its defaults work the same from a file.

use anyhow::Result;
use clap::parser::ValueSource;
use clap::{ArgAction, CommandFactory};
use std::ffi::OsString;
use std::path::Path;

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
    let Some(file) = rm.get_one::<std::path::PathBuf>("config") else {
        return Ok(args);
    };
    let given = |id: &str| rm.value_source(id) == Some(ValueSource::CommandLine);
    let sub = C::command()
        .find_subcommand(name)
        .cloned()
        .expect("a subcommand of WITH_CONFIG");
    let (flags, words) = from_file(file, &sub, &given)?;
    let at = args
        .iter()
        .position(|a| a == name)
        .expect("the subcommand was parsed");
    let mut out: Vec<OsString> = args[..=at].to_vec();
    out.extend(flags.into_iter().map(OsString::from));
    out.extend(args[at + 1..].iter().cloned());
    if !words.is_empty() {
        out.push("--".into());
        out.extend(words.into_iter().map(OsString::from));
    }
    Ok(out)
}

/// The arguments `file` stands for (flags, filter words), leaving out what
/// `given` says the command line has.
fn from_file(
    file: &Path,
    sub: &clap::Command,
    given: &dyn Fn(&str) -> bool,
) -> Result<(Vec<String>, Vec<String>)> {
    let text = std::fs::read_to_string(file).map_err(|e| {
        crate::usage(format!(
            "cannot read the config file {}: {e}",
            file.display()
        ))
    })?;
    from_text(&text, &file.display().to_string(), sub, given)
}

fn from_text(
    text: &str,
    name: &str,
    sub: &clap::Command,
    given: &dyn Fn(&str) -> bool,
) -> Result<(Vec<String>, Vec<String>)> {
    // `filter`: the capture filter expression, where the subcommand takes one.
    let has_filter = sub.get_arguments().any(|a| a.get_id() == "expression");
    let table: toml::Table = toml::from_str(text).map_err(|e| {
        crate::usage(format!(
            "config {name}: not valid TOML: {}",
            e.to_string().replace('\n', " ")
        ))
    })?;
    let bad = |msg: String| crate::usage(format!("config {name}: {msg}"));
    let mut flags = Vec::new();
    let mut words = Vec::new();
    for (key, value) in &table {
        let long = key.replace('_', "-");
        // `create = true`: the flag is --mkdir (create the -w path).
        let long = if long == "create" {
            "mkdir".to_string()
        } else {
            long
        };
        if long == "filter" && has_filter {
            if given("expression") || given("after") || given("filter_file") {
                continue;
            }
            match value {
                toml::Value::String(s) => words.extend(s.split_whitespace().map(String::from)),
                _ => {
                    return Err(bad(format!(
                        "'{key}' is the filter expression: give a string"
                    )))
                }
            }
            continue;
        }
        let arg = sub
            .get_arguments()
            .find(|a| a.get_long() == Some(long.as_str()))
            .filter(|a| !matches!(a.get_id().as_str(), "config" | "check" | "help"))
            .ok_or_else(|| {
                let e_g = if has_filter {
                    "e.g. rotate-size, and filter"
                } else {
                    "e.g. listen, tls-cert"
                };
                bad(format!(
                    "unknown key '{key}' (keys are the long flag names of `wiretape {}`, {e_g})",
                    sub.get_name()
                ))
            })?;
        if given(arg.get_id().as_str()) {
            continue; // the command line wins
        }
        let switch = matches!(*arg.get_action(), ArgAction::SetTrue);
        let text = |v: &toml::Value| -> Result<String> {
            Ok(match v {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(f) => f.to_string(),
                _ => return Err(bad(format!("'{key}': give a string or a number"))),
            })
        };
        match value {
            toml::Value::Boolean(b) if switch => {
                if *b {
                    flags.push(format!("--{long}"));
                }
            }
            _ if switch => return Err(bad(format!("'{key}' is a switch: give true or false"))),
            toml::Value::Array(list) => {
                let parts = list.iter().map(text).collect::<Result<Vec<_>>>()?;
                if matches!(*arg.get_action(), ArgAction::Append) {
                    // A flag given once per value (`interface = ["a", "b"]`).
                    flags.extend(parts.iter().map(|p| format!("--{long}={p}")));
                } else {
                    flags.push(format!("--{long}={}", parts.join(",")));
                }
            }
            v => flags.push(format!("--{long}={}", text(v)?)),
        }
    }
    Ok((flags, words))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> clap::Command {
        crate::Cli::command()
            .find_subcommand("record")
            .cloned()
            .unwrap()
    }

    #[test]
    fn keys_are_long_flags_and_the_command_line_wins() {
        let text = r#"
            interface = "eth0"
            write = "/data"
            rotate-size = "1G"
            keep_files = 10
            queues = [0, 1]
            wait-iface = true
            quiet = false
            filter = "tcp port 443"
        "#;
        let (flags, _) =
            from_text("interface = [\"a\", \"b\"]", "t", &record(), &|_| false).unwrap();
        assert_eq!(flags, ["--interface=a", "--interface=b"]);
        // The store's limit and a volume's own, as two flags.
        let (flags, _) = from_text(
            "keep-bytes = [\"10T\", \"/disk3=400G\"]",
            "t",
            &record(),
            &|_| false,
        )
        .unwrap();
        assert_eq!(flags, ["--keep-bytes=10T", "--keep-bytes=/disk3=400G"]);
        let (flags, words) = from_text(text, "t", &record(), &|id| id == "keep_files").unwrap();
        assert_eq!(
            flags,
            [
                "--interface=eth0",
                "--queues=0,1",
                "--rotate-size=1G",
                "--wait-iface",
                "--write=/data"
            ]
        );
        assert_eq!(words, ["tcp", "port", "443"]);
        let (_, words) = from_text(text, "t", &record(), &|id| id == "expression").unwrap();
        assert!(words.is_empty());
    }

    #[test]
    fn api_keys_are_its_long_flags() {
        let api = crate::Cli::command()
            .find_subcommand("api")
            .cloned()
            .unwrap();
        let text = r#"
            write = ["/var/lib/wiretape/eth0", "/var/lib/wiretape/eth1"]
            listen = "0.0.0.0:8443"
            tls-cert = "/etc/wiretape/api/server.pem"
            allow_client = ["analyst1", "soc"]
            max-queries = 2
            quiet = true
        "#;
        let (flags, words) = from_text(text, "t", &api, &|id| id == "max_queries").unwrap();
        assert_eq!(
            flags,
            [
                "--allow-client=analyst1",
                "--allow-client=soc",
                "--listen=0.0.0.0:8443",
                "--quiet",
                "--tls-cert=/etc/wiretape/api/server.pem",
                "--write=/var/lib/wiretape/eth0",
                "--write=/var/lib/wiretape/eth1",
            ]
        );
        assert!(words.is_empty());
        // `filter` is record's: for api an unknown key like any other.
        let e = from_text("filter = \"udp\"", "t", &api, &|_| false).unwrap_err();
        assert!(e.to_string().contains("unknown key 'filter'"), "{e}");
        assert!(e.to_string().contains("`wiretape api`"), "{e}");
    }

    #[test]
    fn unknown_keys_and_wrong_types_are_usage_errors() {
        let never = |_: &str| false;
        for (text, want) in [
            ("rotate-sise = \"1G\"", "unknown key 'rotate-sise'"),
            ("wait-iface = 1", "is a switch"),
            ("count = true", "give a string or a number"),
            ("config = \"x\"", "unknown key 'config'"),
            ("write = ", "not valid TOML"),
        ] {
            let e = from_text(text, "t", &record(), &never).unwrap_err();
            assert!(e.downcast_ref::<crate::Usage>().is_some());
            assert!(e.to_string().contains(want), "{text}: {e}");
        }
    }
}
