//! Property tests of every parser that takes outside input: progress lines, container labels,
//! scenario TOML, workload CSVs (Pollux, Philly), calibrated profiles, the host's config,
//! telemetry recordings and audit logs. For each, arbitrary bytes and near-misses of a valid
//! input (a line deleted, duplicated or cut short, a value replaced by a wrong type, NaN, a
//! negative or huge number, a key misspelled, a column added or dropped) never panic, and
//! every error names the input it was handed (its path or name, the label, the line); a valid
//! generated input parses to what was generated.
//!
//! 64 cases a property by default: a few seconds in a debug build. The standard
//! `PROPTEST_CASES` sets another count, which makes the module a bounded fuzz run
//! (`docs/run.md`): `PROPTEST_CASES=20000 cargo test --release -p wasmsched-tests --test
//! integration parsers`.

use std::path::PathBuf;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use wasmsched::error_chain;

mod config;
mod labels;
mod profile;
mod progress;
mod recording;
mod workload;

type Checked = Result<(), TestCaseError>;

/// 64 cases a property, or `PROPTEST_CASES` when it is set (the bounded fuzz run). Nothing is
/// written to a regressions file: a case a property finds is kept as a named unit test.
fn cases() -> ProptestConfig {
    let from_env = ProptestConfig::default();
    let cases = if std::env::var_os("PROPTEST_CASES").is_some() { from_env.cases } else { 64 };
    ProptestConfig { cases, failure_persistence: None, ..from_env }
}

/// The error's whole chain names `input`; any line it gives after it (`input:N`, `input, line
/// N`) is one of the `lines` lines of the input, or just past its end.
fn names(err: &dyn std::error::Error, input: &str, lines: usize) -> Checked {
    let chain = error_chain(err);
    prop_assert!(chain.contains(input), "the error does not name {input:?}: {chain}");
    for (at, _) in chain.match_indices(input) {
        let rest = &chain[at + input.len()..];
        let Some(rest) = rest.strip_prefix(':').or_else(|| rest.strip_prefix(", line ")) else { continue };
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if let Ok(line) = digits.parse::<usize>() {
            prop_assert!((1..=lines + 1).contains(&line), "line {line} of {lines}: {chain}");
        }
    }
    Ok(())
}

/// A file holding `bytes` in a folder of its own.
fn file(name: &str, bytes: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).expect("the file is written");
    (dir, path)
}

/// Bytes as they come: mostly anything, sometimes text in which the formats' own
/// punctuation is frequent.
fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..512),
        "([\\[\\]{}=,:\"\n .#a-z0-9-]|nan|inf|node|job|true){0,64}".prop_map(String::into_bytes),
    ]
}

/// Any finite number, of any exponent (no rejection: every draw is one).
fn finite() -> prop::num::f64::Any {
    use prop::num::f64::{NEGATIVE, NORMAL, POSITIVE, SUBNORMAL, ZERO};
    POSITIVE | NEGATIVE | NORMAL | SUBNORMAL | ZERO
}

/// Any finite number above zero, of any exponent.
fn positive() -> prop::num::f64::Any {
    use prop::num::f64::{NORMAL, POSITIVE, SUBNORMAL};
    POSITIVE | NORMAL | SUBNORMAL
}

/// Close enough not to be another value: equal, or within what a decimal parser may round.
fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-12 * a.abs().max(b.abs()) || (a.abs() < 1e-300 && b.abs() < 1e-300)
}

/// One change that turns a valid text into a near-miss. Line and position indices wrap.
#[derive(Clone, Debug)]
enum Edit {
    Delete(usize),
    Duplicate(usize),
    Truncate(usize, usize),
    /// Doubles a character: a misspelled key or value.
    Misspell(usize, usize),
    Insert(usize, String),
    /// Replaces what follows a TOML line's `=`, or one CSV cell.
    Replace(usize, usize, String),
    DropCell(usize, usize),
    AddCell(usize, String),
}

fn edits(values: Vec<String>, lines: Vec<&'static str>) -> impl Strategy<Value = Vec<Edit>> {
    let (value, line) = (prop::sample::select(values), prop::sample::select(lines));
    let at = || any::<usize>();
    let edit = prop_oneof![
        1 => at().prop_map(Edit::Delete),
        1 => at().prop_map(Edit::Duplicate),
        1 => (at(), at()).prop_map(|(l, c)| Edit::Truncate(l, c)),
        1 => (at(), at()).prop_map(|(l, c)| Edit::Misspell(l, c)),
        1 => (at(), line).prop_map(|(l, s)| Edit::Insert(l, s.to_string())),
        4 => (at(), at(), value.clone()).prop_map(|(l, c, v)| Edit::Replace(l, c, v)),
        1 => (at(), at()).prop_map(|(l, c)| Edit::DropCell(l, c)),
        1 => (at(), value).prop_map(|(l, v)| Edit::AddCell(l, v)),
    ];
    prop::collection::vec(edit, 1..4)
}

/// `text` with `edits` made. `Replace` changes a cell when `csv`, else what follows a line's
/// `=`; cells are split at commas.
fn apply(text: &str, edits: &[Edit], csv: bool) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for edit in edits {
        if lines.is_empty() {
            lines.push(String::new());
        }
        let n = lines.len();
        match edit {
            Edit::Delete(l) => drop(lines.remove(l % n)),
            Edit::Duplicate(l) => lines.insert(l % n, lines[l % n].clone()),
            Edit::Truncate(l, at) => {
                let line = &mut lines[l % n];
                let keep: String = line.chars().take(at % (line.chars().count() + 1)).collect();
                *line = keep;
            }
            Edit::Misspell(l, at) => {
                let mut chars: Vec<char> = lines[l % n].chars().collect();
                if !chars.is_empty() {
                    chars.insert(at % chars.len(), chars[at % chars.len()]);
                }
                lines[l % n] = chars.into_iter().collect();
            }
            Edit::Insert(l, s) => lines.insert(l % (n + 1), s.clone()),
            Edit::Replace(l, c, v) if csv => with_cells(&mut lines[l % n], |cells| {
                let i = c % cells.len();
                cells[i].clone_from(v);
            }),
            Edit::Replace(l, _, v) => {
                if let Some((key, _)) = lines[l % n].split_once('=') {
                    lines[l % n] = format!("{key}= {v}");
                }
            }
            Edit::DropCell(l, c) => with_cells(&mut lines[l % n], |cells| drop(cells.remove(c % cells.len()))),
            Edit::AddCell(l, v) => with_cells(&mut lines[l % n], |cells| cells.push(v.clone())),
        }
    }
    lines.join("\n") + "\n"
}

fn with_cells(line: &mut String, change: impl FnOnce(&mut Vec<String>)) {
    let mut cells: Vec<String> = line.split(',').map(str::to_string).collect();
    change(&mut cells);
    *line = cells.join(",");
}

/// The items of a `|`-separated list: long lists of short values stay readable.
fn list(items: &'static str) -> Vec<&'static str> {
    items.split('|').collect()
}

/// Values a TOML near-miss puts in place of a valid one.
fn toml_values() -> Vec<String> {
    let mut values: Vec<String> = list(
        "\"x\"|\"\"|nan|-nan|inf|-inf|-1|0|-0.0|1e-300|1e300|-1e300|4294967295|4294967296|9223372036854775807|1.5|\
         \"-1s\"|\"0s\"|\"0\"|\"1e999GiB\"|\"-1GiB\"|\"0B\"|\"18446744073709551615s\"|\"1.5\"|[]|[1.0]|[nan, 0.5]|\
         [0.5, 0.5]|true|{}|\"cifar10\"|\"inference\"|\"docker\"|\"0.0.0.0:80\"|\"active\"|\"shadow\"|\"max\"",
    )
    .into_iter()
    .map(String::from)
    .collect();
    values.push(format!("\"{}s\"", "9".repeat(308)));
    values.push(format!("\"{}GiB\"", "9".repeat(30)));
    values
}

/// Lines a TOML near-miss inserts.
fn toml_lines() -> Vec<&'static str> {
    list("colour = \"blue\"|[[job]]|[[node]]|[node]|name = \"x\"|cores = 1|[policy.x]|[backend]|=|[[|\"unterminated")
}

/// Cells a CSV near-miss puts in place of a valid one, or adds.
fn csv_values() -> Vec<String> {
    let cells = "|x|-1|-0|nan|NaN|inf|-inf|1e308|1e999|0|0.5|4294967295|4294967296|18446744073709551616|\"|\"a,b\"|\
                 2017-13-40 25:61:61|2017-10-09 07:01:55|cifar10| 7 ";
    list(cells).into_iter().map(String::from).collect()
}

/// Lines a CSV near-miss inserts.
fn csv_lines() -> Vec<&'static str> {
    list("|#|,,,,|name,time,application,num_replicas,batch_size|a,b,c,d,e,f")
}
