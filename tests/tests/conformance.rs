//! The conformance vectors in `wit/conformance/`, which every SDK runs in its own test suite:
//! per-tick deltas exactly as the host's encoder (`World::snapshot_for`) cuts them from
//! scripted worlds, with the job table a decoder must end up with ([`snapshots`]), and
//! decisions on small worlds with the outcome the host's validator gives each action
//! ([`checks`]). The files are generated here and committed; this test fails when they differ
//! from what the host produces now, and `WASMSCHED_BLESS=1` rewrites them.

use serde_json::Value;

mod checks;
mod snapshots;

/// Compare `vectors` with the committed `file`, or rewrite it when blessing.
fn committed(file: &str, vectors: &Value) {
    wasmsched_tests::common::committed(
        &format!("wit/conformance/{file}"),
        &pretty(vectors),
        "the encoder, the checks or the scripted worlds changed",
        "conformance",
    );
}

#[test]
fn the_committed_snapshot_vectors_are_what_the_host_encodes() {
    committed("snapshots.json", &snapshots::vectors());
}

#[test]
fn the_committed_check_vectors_are_what_the_host_validates() {
    committed("checks.json", &checks::generate().json);
}

#[test]
fn the_check_vectors_cover_every_problem_and_every_action_kind() {
    let generated = checks::generate();
    let cases = generated.json["cases"].as_array().expect("cases");
    let actions: Vec<&Value> = cases.iter().flat_map(|c| c["decision"].as_array().expect("a decision")).collect();
    for kind in ["set-cpu", "set-memory", "migrate", "deliver", "stop", "set-gpu-share", "place", "preempt", "resize"] {
        assert!(actions.iter().any(|a| a["kind"] == kind), "no vector acts with {kind}");
    }
    let missing: Vec<&&str> = checks::PROBLEMS.iter().filter(|p| !generated.problems.contains(**p)).collect();
    assert!(missing.is_empty(), "no vector is refused with {missing:?}");
    assert!(cases.iter().any(|c| c["refused_whole"].is_string()), "no vector is an oversized decision");
}

/// JSON as the vectors are committed: two-space indents, keys in serde_json's (sorted) order,
/// an array of numbers or strings on one line, anything else on one line when it fits.
fn pretty(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value, 0);
    out.push('\n');
    out
}

const WIDTH: usize = 110;

fn write_value(out: &mut String, value: &Value, indent: usize) {
    let compact = spaced(&serde_json::to_string(value).expect("JSON values serialize"));
    let scalars = |items: &[Value]| items.iter().all(|v| !v.is_array() && !v.is_object());
    let fits = indent + compact.len() <= WIDTH;
    match value {
        Value::Array(items) if !(fits || scalars(items)) => {
            out.push_str("[\n");
            for (i, item) in items.iter().enumerate() {
                out.push_str(&" ".repeat(indent + 2));
                write_value(out, item, indent + 2);
                out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
            }
            out.push_str(&" ".repeat(indent));
            out.push(']');
        }
        Value::Object(fields) if !fits => {
            out.push_str("{\n");
            for (i, (key, item)) in fields.iter().enumerate() {
                out.push_str(&" ".repeat(indent + 2));
                out.push_str(&serde_json::to_string(key).expect("keys serialize"));
                out.push_str(": ");
                write_value(out, item, indent + 2);
                out.push_str(if i + 1 < fields.len() { ",\n" } else { "\n" });
            }
            out.push_str(&" ".repeat(indent));
            out.push('}');
        }
        _ => out.push_str(&compact),
    }
}

/// Compact JSON with a space after each `:` and `,` outside strings, to read like the rest.
fn spaced(compact: &str) -> String {
    let mut out = String::with_capacity(compact.len() * 5 / 4);
    let (mut in_string, mut escaped) = (false, false);
    for ch in compact.chars() {
        out.push(ch);
        if in_string {
            (in_string, escaped) = (ch != '"' || escaped, ch == '\\' && !escaped);
        } else if ch == '"' {
            in_string = true;
        } else if ch == ':' || ch == ',' {
            out.push(' ');
        }
    }
    out
}
