//! The timeline as a self-contained SVG (`wiretape timeline -o x.svg`, and
//! the source of `-o x.png`): bars of frames/s per bin (stacked per series),
//! the filter's bound as a line, axes with UTC time labels, and the
//! window's total frames and bytes written as text (`<text id="total">`).
//! Bins without frames draw nothing: gaps are blank.

use crate::timeline::{self, Timeline};
use std::fmt::Write;

/// Series colours, in order.
const PALETTE: &[&str] = &[
    "#3572b0", "#2a9d8f", "#e9c46a", "#8e6bb8", "#e76f51", "#6c8a3b", "#b0356f", "#5b6770",
];
/// The filter bound's colour.
const BOUND: &str = "#d9480f";

/// Text for XML: `&`, `<`, `>`, quotes escaped.
pub fn xml_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c if (c as u32) < 0x20 && c != '\t' => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

/// 1234567 as "1.23M" (k, M, G, T).
pub fn si(v: f64) -> String {
    let (d, u) = match v.abs() {
        a if a >= 1e12 => (1e12, "T"),
        a if a >= 1e9 => (1e9, "G"),
        a if a >= 1e6 => (1e6, "M"),
        a if a >= 1e3 => (1e3, "k"),
        _ => (1.0, ""),
    };
    let x = v / d;
    let s = if x == x.trunc() || x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    };
    format!("{s}{u}")
}

/// A bin width or duration in words: "1 ms", "15 min", "1 day".
pub fn duration(ns: u64) -> String {
    const UNITS: &[(u64, &str)] = &[
        (86_400_000_000_000, "day"),
        (3_600_000_000_000, "h"),
        (60_000_000_000, "min"),
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "µs"),
        (1, "ns"),
    ];
    for &(u, name) in UNITS {
        if ns >= u && ns.is_multiple_of(u) {
            let n = ns / u;
            let plural = if name == "day" && n > 1 { "s" } else { "" };
            return format!("{n} {name}{plural}");
        }
    }
    format!("{ns} ns")
}

/// The label of a tick at `ns` with ticks `step` apart: the date when
/// steps are days, else the time of day to the step's precision.
fn tick_label(ns: u64, step: u64) -> String {
    let t = wiretape_timestamp::format_rfc3339(ns);
    // YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ
    if step >= 86_400_000_000_000 {
        t[..10].to_string()
    } else if step >= 60_000_000_000 {
        t[11..16].to_string()
    } else if step >= 1_000_000_000 {
        t[11..19].to_string()
    } else if step >= 1_000_000 {
        t[11..23].to_string()
    } else if step >= 1_000 {
        t[11..26].to_string()
    } else {
        t[11..29].to_string()
    }
}

/// The smallest of 1, 2, 5 × 10^k at or above `v`.
fn nice_ceil(v: f64) -> f64 {
    if v <= 0.0 {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * p >= v * 0.999_999 {
            return m * p;
        }
    }
    10.0 * p
}

/// The SVG of `tl`, `width` × `height` pixels.
pub fn svg(tl: &Timeline, width: u32, height: u32) -> String {
    let (w, h) = (f64::from(width.max(200)), f64::from(height.max(120)));
    let (left, right, top, bottom) = (64.0, 16.0, 46.0, 36.0);
    let (pw, ph) = (w - left - right, h - top - bottom);
    let span = (tl.to_ns.saturating_sub(tl.from_ns)).max(1) as f64;
    let x_of = |ns: u64| left + (ns.saturating_sub(tl.from_ns) as f64).min(span) / span * pw;
    let per_s = 1e9 / tl.bin_ns.max(1) as f64;
    let n = tl.len();
    let peak = (0..n)
        .map(|i| {
            let c = tl.bin(i);
            c.frames.max(c.may_match)
        })
        .max()
        .unwrap_or(0) as f64
        * per_s;
    let ymax = nice_ceil(peak);
    let y_of = |rate: f64| top + ph - rate / ymax * ph;
    let totals = tl.totals();
    let mut s = String::with_capacity(4096 + n * 120);
    let _ = write!(
        s,
        r##"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="DejaVu Sans, Verdana, sans-serif" font-size="11">
<title>wiretape timeline {} to {}</title>
<rect width="100%" height="100%" fill="#ffffff"/>
"##,
        wiretape_timestamp::format_rfc3339(tl.from_ns),
        wiretape_timestamp::format_rfc3339(tl.to_ns),
        width = width.max(200),
        height = height.max(120),
    );
    // Title line: the totals (the id lets a reader find them).
    let bound = tl
        .filter
        .as_ref()
        .map(|f| {
            format!(
                "; filter {}: at most {} frames (flow index bound)",
                xml_escape(f),
                totals.may_match
            )
        })
        .unwrap_or_default();
    let _ = writeln!(
        s,
        r##"<text id="total" x="{left}" y="16" font-size="13" font-weight="bold" fill="#222">{} frames, {} bytes of records</text>
<text x="{left}" y="32" fill="#555">{} to {} UTC, bins of {}, peak {} frames/s{bound}</text>"##,
        totals.frames,
        totals.bytes,
        wiretape_timestamp::format_rfc3339(tl.from_ns),
        wiretape_timestamp::format_rfc3339(tl.to_ns),
        duration(tl.bin_ns),
        si(peak),
    );
    // Grid and y labels.
    for k in 0..=4 {
        let v = ymax * f64::from(k) / 4.0;
        let y = y_of(v);
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e3e3e3"/><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#444">{}</text>"##,
            left + pw,
            left - 6.0,
            y + 4.0,
            si(v)
        );
    }
    let _ = writeln!(
        s,
        r##"<text transform="translate(12 {:.1}) rotate(-90)" text-anchor="middle" fill="#444">frames/s</text>"##,
        top + ph / 2.0
    );
    // Bars: per bin, the series stacked.
    let _ = writeln!(s, r#"<g id="bars" shape-rendering="crispEdges">"#);
    for i in 0..n {
        let b0 = tl.bin_start(i).max(tl.from_ns);
        let b1 = (tl.bin_start(i) + tl.bin_ns).min(tl.to_ns);
        let (x0, x1) = (x_of(b0), x_of(b1));
        let bw = (x1 - x0).max(0.6);
        let mut acc = 0.0;
        for (k, series) in tl.counts.iter().enumerate() {
            let f = series[i].frames;
            if f == 0 {
                continue;
            }
            let r = f as f64 * per_s;
            let (ya, yb) = (y_of(acc + r), y_of(acc));
            acc += r;
            let _ = writeln!(
                s,
                r#"<rect x="{x0:.2}" y="{ya:.2}" width="{bw:.2}" height="{:.2}" fill="{}"/>"#,
                (yb - ya).max(0.5),
                PALETTE[k % PALETTE.len()]
            );
        }
    }
    let _ = writeln!(s, "</g>");
    // The filter's bound: a step line.
    if tl.filter.is_some() && n > 0 {
        let mut d = String::new();
        for i in 0..n {
            let y = y_of(tl.bin(i).may_match as f64 * per_s);
            let x0 = x_of(tl.bin_start(i).max(tl.from_ns));
            let x1 = x_of((tl.bin_start(i) + tl.bin_ns).min(tl.to_ns));
            let _ = write!(
                d,
                "{}{x0:.2} {y:.2} L{x1:.2} {y:.2} ",
                if i == 0 { "M" } else { "L" }
            );
        }
        let _ = writeln!(
            s,
            r#"<path id="bound" d="{}" fill="none" stroke="{BOUND}" stroke-width="1.5"/>"#,
            d.trim_end()
        );
    }
    // Axes and time ticks.
    let _ = writeln!(
        s,
        r##"<line x1="{left}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#333"/><line x1="{left}" y1="{top}" x2="{left}" y2="{:.1}" stroke="#333"/>"##,
        top + ph,
        left + pw,
        top + ph,
        top + ph
    );
    let step = timeline::round_width(
        tl.from_ns,
        tl.to_ns,
        u64::from((pw / 110.0).max(1.0) as u32),
    );
    let mut t = tl.from_ns.div_ceil(step) * step;
    while t < tl.to_ns {
        let x = x_of(t);
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#333"/><text x="{x:.1}" y="{:.1}" text-anchor="{}" fill="#444">{}</text>"##,
            top + ph,
            top + ph + 4.0,
            top + ph + 16.0,
            if x > w - 50.0 { "end" } else { "middle" },
            tick_label(t, step)
        );
        t += step;
    }
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="#777">UTC</text>"##,
        left + pw,
        top + ph + 30.0
    );
    // Legend, with series.
    if tl.counts.len() > 1 || tl.filter.is_some() {
        let mut x = left + pw;
        let mut items: Vec<(String, &str)> = Vec::new();
        if tl.counts.len() > 1 {
            for (k, name) in tl.series.iter().enumerate() {
                items.push((name.clone(), PALETTE[k % PALETTE.len()]));
            }
        }
        if tl.filter.is_some() {
            items.push(("filter bound".into(), BOUND));
        }
        for (name, colour) in items.iter().rev() {
            let tw = 7.0 * name.chars().count() as f64 + 18.0;
            x -= tw;
            let _ = writeln!(
                s,
                r##"<rect x="{x:.1}" y="{:.1}" width="10" height="10" fill="{colour}"/><text x="{:.1}" y="{:.1}" fill="#333">{}</text>"##,
                top - 12.0,
                x + 13.0,
                top - 3.0,
                xml_escape(name)
            );
        }
    }
    s.push_str("</svg>\n");
    s
}

/// The bins as a text table (`wiretape timeline` without `-o`): a header,
/// then one line per bin with frames (start, frames, bytes, the filter's
/// bound when there is one) and a bar of up to 40 `#` scaled to the
/// busiest bin; every line ends in a newline.
pub fn table(tl: &Timeline) -> String {
    let peak = (0..tl.len())
        .map(|i| tl.bin(i).frames)
        .max()
        .unwrap_or(0)
        .max(1);
    let filter = tl.filter.is_some();
    let mut s = format!(
        "{:<30} {:>12} {:>14}{}\n",
        "bin start (UTC)",
        "frames",
        "bytes",
        if filter { "  filter bound" } else { "" }
    );
    for i in 0..tl.len() {
        let c = tl.bin(i);
        if c.frames == 0 {
            continue;
        }
        let bar = "#".repeat(((c.frames * 40).div_ceil(peak)) as usize);
        let bound = if filter {
            format!("  {:>12}", c.may_match)
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "{:<30} {:>12} {:>14}{bound}  {bar}",
            wiretape_timestamp::format_rfc3339(tl.bin_start(i)),
            c.frames,
            c.bytes
        );
    }
    s
}

/// Why [`png`] made no picture.
#[derive(Debug, thiserror::Error)]
pub enum PngError {
    /// The SVG given does not parse.
    #[error("the timeline's SVG does not parse: {0}")]
    Svg(#[source] resvg::usvg::Error),
    /// A pixmap of that size cannot be made (a side is 0, or too large).
    #[error("a {width}x{height} picture cannot be made")]
    Size {
        /// The width asked, in pixels.
        width: u32,
        /// The height asked, in pixels.
        height: u32,
    },
    /// The pixels do not encode as PNG.
    #[error("cannot encode the PNG: {0}")]
    Encode(String),
}

/// `svg` (e.g. [`svg`]'s) rendered at `width` × `height` pixels as PNG
/// bytes, by resvg with the system's fonts for the labels (`wiretape
/// timeline -o x.png`).
pub fn png(svg: &str, width: u32, height: u32) -> Result<Vec<u8>, PngError> {
    let mut opt = resvg::usvg::Options::default();
    opt.fontdb_mut().load_system_fonts();
    let tree = resvg::usvg::Tree::from_str(svg, &opt).map_err(PngError::Svg)?;
    let mut pixmap =
        resvg::tiny_skia::Pixmap::new(width, height).ok_or(PngError::Size { width, height })?;
    let size = tree.size();
    let t = resvg::tiny_skia::Transform::from_scale(
        width as f32 / size.width(),
        height as f32 / size.height(),
    );
    resvg::render(&tree, t, &mut pixmap.as_mut());
    pixmap
        .encode_png()
        .map_err(|e| PngError::Encode(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_numbers() {
        assert_eq!(si(1_234_567.0), "1.23M");
        assert_eq!(si(500.0), "500");
        assert_eq!(si(2000.0), "2k");
        assert_eq!(duration(60_000_000_000), "1 min");
        assert_eq!(duration(2 * 86_400_000_000_000), "2 days");
        assert_eq!(nice_ceil(3.3), 5.0);
        assert_eq!(nice_ceil(1000.0), 1000.0);
        assert_eq!(xml_escape("q\"'<img>&"), "q&quot;&#39;&lt;img&gt;&amp;");
        assert_eq!(
            tick_label(1_700_000_000_123_000_000, 1_000_000),
            "22:13:20.123"
        );
    }

    #[test]
    fn png_of_an_svg() {
        let svg = r##"<svg xmlns="http://www.w3.org/2000/svg" width="100" height="50"><rect x="0" y="0" width="100" height="50" fill="#3572b0"/></svg>"##;
        let b = png(svg, 300, 120).unwrap();
        assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n");
        // IHDR: the width and height asked, whatever the SVG's own size.
        assert_eq!(&b[12..16], b"IHDR");
        assert_eq!(u32::from_be_bytes(b[16..20].try_into().unwrap()), 300);
        assert_eq!(u32::from_be_bytes(b[20..24].try_into().unwrap()), 120);
        assert!(matches!(png("<svg", 300, 120), Err(PngError::Svg(_))));
        let e = png(svg, 0, 120).unwrap_err();
        assert!(matches!(
            e,
            PngError::Size {
                width: 0,
                height: 120
            }
        ));
        assert_eq!(e.to_string(), "a 0x120 picture cannot be made");
    }
}
