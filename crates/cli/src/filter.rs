//! `wiretape filter`: checks a capture filter expression and, with
//! `--explain`, shows the classic BPF libpcap makes of it (as `tcpdump -d`)
//! and the eBPF program wiretape loads into the XDP program.

use crate::common::exit_code;
use anyhow::Result;
use std::path::PathBuf;
use wiretape::capture::xdpfilter::{explain, tail_program, FilterMaps};
use wiretape::capture::CaptureFilter;
use wiretape::filter::LINKTYPE_ETHERNET;

#[derive(clap::Args)]
#[command(
    after_help = "Exit codes: 0 the expression can be recorded with; 2 a syntax error \
(libpcap's message, with the word where it fails and the keyword a typo is nearest to) or an \
ambiguous word; 1 the expression compiles but cannot run in XDP (the instruction is named).\n\n\
The words are the expression; everything after -- is too. A first word that is both an existing \
file here and a filter word (tcp, host, ...) is refused as ambiguous: -F WORD reads the expression \
from the file, -- WORD takes it as the expression.\n\n\
Examples:\n  wiretape filter --explain 'tcp port 80'\n  wiretape filter -F filter.txt"
)]
pub(crate) struct Args {
    /// Print the classic BPF (as tcpdump -d) and the eBPF program loaded
    /// into the XDP program, one instruction per line.
    #[arg(long)]
    explain: bool,
    /// Snap length the expression is compiled for (as record -s).
    #[arg(short = 's', long, value_name = "SNAPLEN", default_value_t = wiretape::DEFAULT_SNAPLEN)]
    snaplen: u32,
    /// Read the expression from FILE (`#` starts a comment).
    #[arg(short = 'F', value_name = "FILE", conflicts_with = "expression")]
    filter_file: Option<PathBuf>,
    /// The expression (man pcap-filter), for Ethernet frames.
    #[arg(value_name = "FILTER EXPRESSION")]
    expression: Vec<String>,
    /// The expression, after `--`.
    #[arg(last = true, value_name = "FILTER", conflicts_with = "filter_file")]
    after: Vec<String>,
}

pub(crate) fn run(a: Args) -> Result<i32> {
    let words = match crate::common::inputs::filter_only(&a.expression, &a.after) {
        Ok(w) => w,
        Err(e) => return crate::common::usage_exit(e),
    };
    let expr =
        crate::common::filter_expression(&words, a.filter_file.as_deref())?.unwrap_or_default();
    let f = match CaptureFilter::compile(&expr, LINKTYPE_ETHERNET, a.snaplen) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("wiretape: error: {e}");
            return Ok(exit_code(&e));
        }
    };
    if a.explain {
        print!("{}", explain(&f)?);
        return Ok(0);
    }
    let ebpf = tail_program(
        &f.program,
        FilterMaps {
            xsks: 0,
            qstats: 0,
            cutoff: None,
        },
    )
    .map_err(|source| wiretape::capture::CaptureError::FilterTranslate {
        expr: f.expr.clone(),
        source,
    })?;
    println!(
        "ok: '{}': {} classic BPF instructions, {} eBPF instructions in the XDP program{}",
        f.expr,
        f.program.insns().len(),
        ebpf.len(),
        if f.needs_perfmon() {
            "; loading it needs CAP_PERFMON (it reads the frame length)"
        } else {
            ""
        }
    );
    Ok(0)
}
