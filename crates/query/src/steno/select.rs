//! A parsed query made into what the merge runs: disjoint time windows in
//! order, each with a program (or every frame), and what the flow index
//! may skip.
//!
//! The time bounds of a query cut the time line at their instants; within
//! each piece every `before`/`after` is constant, so the query there is a
//! formula of the other primitives (folded: a piece where it is false is
//! dropped; neighbours with the same formula are joined). `host`/`net`,
//! `port`, `ip proto`, `vlan` and `mpls` of one kind joined by `or` become
//! one condition on a set of values (tested by a binary search).

use super::bpf::{self, Atom, CompileError, Formula, Kind};
use super::parse::Query;
use crate::extract::Window;
use wiretape_filter::flow::{Key, Needs};
use wiretape_filter::Program;

/// A query compiled: its pieces of time, in order, without overlap.
#[derive(Clone, Debug)]
pub struct Selection {
    /// The query (its canonical text: [`Query`]'s `Display`).
    pub query: Query,
    /// The pieces; frames outside all of them are not selected.
    pub parts: Vec<Part>,
}

/// One piece of time and what is selected in it.
#[derive(Clone, Debug)]
pub struct Part {
    /// The piece (`from` inclusive, `to` exclusive).
    pub window: Window,
    /// The program, or None: every frame of the piece.
    pub program: Option<Program>,
    /// What a block must hold to have a selected frame (None: any block).
    pub needs: Option<Needs>,
    /// The formula in the piece, in the query language.
    pub text: String,
}

/// Pieces of time a query may cut the time line into (its distinct time
/// bounds, plus one).
pub const MAX_PARTS: usize = 257;

/// Why a parsed query cannot be run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SelectError {
    /// A program could not be made.
    #[error(transparent)]
    Compile(#[from] CompileError),
    /// Too many distinct time bounds.
    #[error(
        "the query has {0} different time bounds: at most {max} are taken",
        max = MAX_PARTS - 1
    )]
    TooManyTimes(usize),
}

/// The atoms of a query, each once.
#[derive(Default)]
struct Atoms(Vec<Atom>);

impl Atoms {
    fn id(&mut self, a: Atom) -> usize {
        match self.0.iter().position(|x| *x == a) {
            Some(i) => i,
            None => {
                self.0.push(a);
                self.0.len() - 1
            }
        }
    }
}

/// Sorted, joined ranges.
fn normalize(mut set: Vec<(u128, u128)>) -> Vec<(u128, u128)> {
    set.sort_unstable();
    let mut out: Vec<(u128, u128)> = Vec::with_capacity(set.len());
    for (lo, hi) in set {
        match out.last_mut() {
            Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

fn one(kind: Kind, v: u128) -> Atom {
    Atom {
        kind,
        set: vec![(v, v)],
    }
}

/// The formula of `q` for frames stamped in `[from, to)` (one piece: no
/// time bound inside it), folded, with same-kind atoms under `or` joined.
fn formula(q: &Query, from: Option<i128>, to: Option<i128>, atoms: &mut Atoms) -> Formula {
    let atom = |atoms: &mut Atoms, a: Atom| Formula::Atom(atoms.id(a));
    match q {
        Query::Net4(lo, hi) => atom(
            atoms,
            Atom {
                kind: Kind::Ip4,
                set: vec![(u128::from(*lo), u128::from(*hi))],
            },
        ),
        Query::Net6(lo, hi) => atom(
            atoms,
            Atom {
                kind: Kind::Ip6,
                set: vec![(*lo, *hi)],
            },
        ),
        Query::Port(p) => atom(atoms, one(Kind::Port, u128::from(*p))),
        Query::Proto(p) => atom(atoms, one(Kind::Proto, u128::from(*p))),
        Query::Vlan(v) => atom(atoms, one(Kind::Vlan, u128::from(*v))),
        Query::Mpls(m) => atom(atoms, one(Kind::Mpls, u128::from(*m))),
        // In a piece, a bound is at or before its start, or at or after its end.
        Query::After(t) => bool_f(from.is_some_and(|f| f >= *t)),
        Query::Before(t) => bool_f(to.is_some_and(|e| e <= *t)),
        Query::And(v) => {
            let mut out = Vec::new();
            for c in v {
                match formula(c, from, to, atoms) {
                    Formula::True => {}
                    Formula::False => return Formula::False,
                    Formula::And(w) => out.extend(w),
                    g => out.push(g),
                }
            }
            out.dedup();
            match out.len() {
                0 => Formula::True,
                1 => out.remove(0),
                _ => Formula::And(out),
            }
        }
        Query::Or(v) => {
            let mut out = Vec::new();
            for c in v {
                match formula(c, from, to, atoms) {
                    Formula::False => {}
                    Formula::True => return Formula::True,
                    Formula::Or(w) => out.extend(w),
                    g => out.push(g),
                }
            }
            // One atom per kind: the union of their sets.
            let mut joined: Vec<(Kind, Vec<(u128, u128)>)> = Vec::new();
            let mut rest = Vec::new();
            for g in out {
                match g {
                    Formula::Atom(i) => {
                        let a = atoms.0[i].clone();
                        match joined.iter_mut().find(|(k, _)| *k == a.kind) {
                            Some((_, s)) => s.extend(a.set),
                            None => joined.push((a.kind, a.set)),
                        }
                    }
                    g => rest.push(g),
                }
            }
            let mut out: Vec<Formula> = joined
                .into_iter()
                .map(|(kind, set)| {
                    atom(
                        atoms,
                        Atom {
                            kind,
                            set: normalize(set),
                        },
                    )
                })
                .collect();
            out.extend(rest);
            out.dedup();
            match out.len() {
                0 => Formula::False,
                1 => out.remove(0),
                _ => Formula::Or(out),
            }
        }
    }
}

fn bool_f(b: bool) -> Formula {
    if b {
        Formula::True
    } else {
        Formula::False
    }
}

fn times(q: &Query, out: &mut Vec<i128>) {
    match q {
        Query::After(t) | Query::Before(t) => out.push(*t),
        Query::And(v) | Query::Or(v) => v.iter().for_each(|c| times(c, out)),
        _ => {}
    }
}

/// The formula over only the atoms it uses, renumbered.
fn compact(f: &Formula, all: &[Atom], used: &mut Vec<Atom>) -> Formula {
    match f {
        Formula::Atom(i) => {
            let a = &all[*i];
            let j = match used.iter().position(|x| x == a) {
                Some(j) => j,
                None => {
                    used.push(a.clone());
                    used.len() - 1
                }
            };
            Formula::Atom(j)
        }
        Formula::And(v) => Formula::And(v.iter().map(|c| compact(c, all, used)).collect()),
        Formula::Or(v) => Formula::Or(v.iter().map(|c| compact(c, all, used)).collect()),
        g => g.clone(),
    }
}

/// The formula as a query's text.
fn text(f: &Formula, atoms: &[Atom]) -> String {
    let list = |v: &[Formula], op: &str| {
        let parts: Vec<String> = v.iter().map(|c| text(c, atoms)).collect();
        format!("({})", parts.join(op))
    };
    match f {
        Formula::True => "every frame".into(),
        Formula::False => "no frame".into(),
        Formula::And(v) => list(v, " and "),
        Formula::Or(v) => list(v, " or "),
        Formula::Atom(i) => {
            let a = &atoms[*i];
            let each: Vec<String> = a
                .set
                .iter()
                .map(|&(lo, hi)| {
                    let q = match a.kind {
                        Kind::Ip4 => Query::Net4(lo as u32, hi as u32),
                        Kind::Ip6 => Query::Net6(lo, hi),
                        Kind::Port if lo == hi => Query::Port(lo as u16),
                        Kind::Proto if lo == hi => Query::Proto(lo as u8),
                        Kind::Vlan if lo == hi => Query::Vlan(lo as u16),
                        Kind::Mpls if lo == hi => Query::Mpls(lo as u32),
                        k => return format!("{k:?} {lo}-{hi}").to_lowercase(),
                    };
                    q.to_string()
                })
                .collect();
            if each.len() == 1 {
                each[0].clone()
            } else {
                format!("({})", each.join(" or "))
            }
        }
    }
}

/// Values a condition may list in the flow index's needs (more: it does
/// not narrow).
const MAX_KEYS: u128 = 64;
/// Alternatives a query's needs keep at most.
const MAX_ALTS: usize = 256;

/// The EtherTypes of frames whose layers the flow index does not follow
/// as stenotype does (an Ethernet header inside, tags of 0x9200/0x9300,
/// MPLS, a third VLAN tag): a block holding one of them may hold a match
/// of any condition beyond the first two tags.
const ESCAPE: [u16; 8] = [0, 0x8100, 0x88a8, 0x9100, 0x9200, 0x9300, 0x8847, 0x8848];

/// What a block must hold for a frame of it to satisfy `f`, as the flow
/// index records frames ([`wiretape_filter::flow::FrameKeys`]): None when
/// that cannot be said shortly (the block is read).
fn needs(f: &Formula, atoms: &[Atom]) -> Option<Vec<Vec<Key>>> {
    match f {
        Formula::True => None,
        Formula::False => Some(Vec::new()),
        Formula::Atom(i) => {
            let a = &atoms[*i];
            let count: u128 = a
                .set
                .iter()
                .map(|(lo, hi)| hi.saturating_sub(*lo).saturating_add(1))
                .fold(0u128, u128::saturating_add);
            let values = || a.set.iter().flat_map(|&(lo, hi)| lo..=hi);
            let mut alts: Vec<Vec<Key>> = ESCAPE.iter().map(|&e| vec![Key::EtherType(e)]).collect();
            if matches!(a.kind, Kind::Proto | Kind::Port) {
                // IPv6 extension headers: the flow index keeps the first next header.
                alts.extend([0u8, 43, 44, 60, 135].map(|p| vec![Key::Proto(p)]));
            }
            if a.kind == Kind::Mpls {
                return Some(alts);
            }
            match a.kind {
                // Addresses and ports: each range of the set one key (a
                // net is a range of the key index's sorted hosts).
                Kind::Ip4 | Kind::Ip6 | Kind::Port => {
                    if a.set.len() > MAX_ALTS {
                        return None;
                    }
                    alts.extend(a.set.iter().map(|&(lo, hi)| {
                        vec![match a.kind {
                            Kind::Ip4 => Key::net4(lo as u32, hi as u32),
                            Kind::Ip6 => Key::net6(lo, hi),
                            _ => Key::ports(lo as u16, hi as u16),
                        }]
                    }));
                }
                _ => {
                    if count > MAX_KEYS {
                        return None;
                    }
                    for v in values() {
                        let k = match a.kind {
                            Kind::Proto => Key::Proto(v as u8),
                            Kind::Vlan if v < 4096 => Key::Vlan(v as u16),
                            _ => continue,
                        };
                        alts.push(vec![k]);
                    }
                }
            }
            Some(alts)
        }
        Formula::Or(v) => {
            let mut out = Vec::new();
            for c in v {
                out.extend(needs(c, atoms)?);
                if out.len() > MAX_ALTS {
                    return None;
                }
            }
            Some(out)
        }
        Formula::And(v) => {
            // The conjuncts that can say something, fewest alternatives
            // first; as many as keep the product small (leaving one out
            // only asks less of a block).
            let mut each: Vec<Vec<Vec<Key>>> = v.iter().filter_map(|c| needs(c, atoms)).collect();
            each.sort_by_key(Vec::len);
            let mut acc: Option<Vec<Vec<Key>>> = None;
            for alts in each {
                acc = Some(match acc {
                    None => alts,
                    Some(a) if a.len() * alts.len() <= MAX_ALTS => a
                        .iter()
                        .flat_map(|x| {
                            alts.iter().map(move |y| {
                                let mut z = x.clone();
                                z.extend(y.iter().copied());
                                z
                            })
                        })
                        .collect(),
                    Some(a) => a,
                });
            }
            acc
        }
    }
}

impl Selection {
    /// Compiles a parsed query.
    pub fn new(query: Query) -> Result<Selection, SelectError> {
        let mut bounds = Vec::new();
        times(&query, &mut bounds);
        bounds.sort_unstable();
        bounds.dedup();
        if bounds.len() >= MAX_PARTS {
            return Err(SelectError::TooManyTimes(bounds.len()));
        }
        let mut atoms = Atoms::default();
        // The pieces: (-inf, b0), [b0, b1), ..., [bn, +inf).
        let mut pieces: Vec<(Option<i128>, Option<i128>, Formula)> = Vec::new();
        for i in 0..=bounds.len() {
            let from = i.checked_sub(1).map(|j| bounds[j]);
            let to = bounds.get(i).copied();
            let f = formula(&query, from, to, &mut atoms);
            match pieces.last_mut() {
                Some(last) if last.2 == f => last.1 = to,
                _ => pieces.push((from, to, f)),
            }
        }
        let mut parts = Vec::new();
        for (from, to, f) in pieces {
            if f == Formula::False {
                continue;
            }
            // Stamps are ns since the epoch in a u64.
            if to.is_some_and(|t| t <= 0) || from.is_some_and(|f| f > i128::from(u64::MAX)) {
                continue;
            }
            let window = Window {
                from_ns: from.filter(|&f| f > 0).map(|f| f as u64),
                to_ns: to.and_then(|t| u64::try_from(t).ok()),
            };
            let mut used = Vec::new();
            let g = compact(&f, &atoms.0, &mut used);
            let (program, needs) = match g {
                Formula::True => (None, None),
                ref g => (
                    Some(bpf::compile(g, &used)?),
                    needs(g, &used).map(Needs::from_alternatives),
                ),
            };
            parts.push(Part {
                window,
                program,
                needs,
                text: text(&g, &used),
            });
        }
        Ok(Selection { query, parts })
    }

    /// The same selection within `w` only.
    pub fn within(&self, w: Window) -> Selection {
        let parts = self
            .parts
            .iter()
            .filter_map(|p| {
                let from = match (p.window.from_ns, w.from_ns) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                };
                let to = match (p.window.to_ns, w.to_ns) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                if let (Some(f), Some(t)) = (from, to) {
                    if t <= f {
                        return None;
                    }
                }
                let mut p = p.clone();
                p.window = Window {
                    from_ns: from,
                    to_ns: to,
                };
                Some(p)
            })
            .collect();
        Selection {
            query: self.query.clone(),
            parts,
        }
    }

    /// The window holding every piece (the plan's); None when there is
    /// no piece (nothing is selected).
    pub fn hull(&self) -> Option<Window> {
        let first = self.parts.first()?;
        let last = self.parts.last()?;
        Some(Window {
            from_ns: first.window.from_ns,
            to_ns: last.window.to_ns,
        })
    }

    /// The piece a frame stamped `ts_ns` falls in, if any.
    #[inline]
    pub fn part(&self, ts_ns: u64) -> Option<&Part> {
        let i = self
            .parts
            .partition_point(|p| p.window.to_ns.is_some_and(|t| t <= ts_ns));
        self.parts.get(i).filter(|p| p.window.contains(ts_ns))
    }

    /// Whether the frame `data` (its captured bytes) stamped `ts_ns` is
    /// selected.
    #[inline]
    pub fn matches(&self, data: &[u8], ts_ns: u64) -> bool {
        self.part(ts_ns).is_some_and(|p| {
            p.program
                .as_ref()
                .is_none_or(|prog| prog.matches(data, data.len() as u32))
        })
    }

    /// Whether a block holding stamps `first..=last` whose flow set is
    /// asked by `may` may hold a selected frame.
    pub fn may_hold(&self, first: u64, last: u64, may: impl Fn(&Needs) -> bool) -> bool {
        self.parts
            .iter()
            .any(|p| p.window.overlaps(first, last) && p.needs.as_ref().is_none_or(&may))
    }
}
