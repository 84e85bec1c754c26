//! The house plan, checked (docs/architecture.md): every file of the host library imports only
//! its own layer and the layers below, the policy runtime and the backends never import each
//! other, and no file's imports lead back to it. Tests (`#[cfg(test)]` modules and `tests.rs`
//! files) may reach anywhere. Between the crates (the vocabulary in `wasmsched-core`, the live
//! backends in `wasmsched-docker` and `wasmsched-kubernetes`, the rest in `wasmsched`) cargo
//! holds the layers; this checks the files inside `wasmsched`, and which crates depend on which.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layers, bottom up; a file imports files of its layer or below. The runtime and the
/// backends share a level and never import each other.
fn layer(file: &str) -> (u8, &'static str) {
    let top = file.split('/').next().unwrap_or(file);
    match top {
        "lib" => (1, "vocabulary"),
        "runtime" | "validate" | "admission" | "shipped" | "oci" => (2, "runtime"),
        "backend" => (2, "backends"),
        "control" | "host" | "reload" | "resources" | "shadow" | "budget" | "record" | "config" | "watchdog" => {
            (4, "the loop")
        }
        "scenario" | "experiment" | "replay" | "calibrate" | "whatif" => (5, "scenarios and experiments"),
        "api" | "scaffold" => (6, "the face"),
        other => {
            panic!("host/src/{other}.rs is in no layer: add it to tests/tests/architecture.rs and docs/architecture.md")
        }
    }
}

/// Each library file (path under host/src without `.rs`) and the files it imports.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../host/src");
    let mut texts = BTreeMap::new();
    collect(&src, &src, &mut texts);
    let modules: BTreeMap<Vec<String>, String> = texts.keys().map(|f| (module_path(f), f.clone())).collect();
    let resolve = |segments: &[String]| (1..=segments.len()).rev().find_map(|n| modules.get(&segments[..n]).cloned());
    texts
        .iter()
        .map(|(file, text)| {
            let me = module_path(file);
            let absolute = |path: &[String]| -> Option<Vec<String>> {
                match path[0].as_str() {
                    "crate" => Some(path[1..].to_vec()),
                    "super" if !me.is_empty() => Some([&me[..me.len() - 1], &path[1..]].concat()),
                    "self" => Some([&me[..], &path[1..]].concat()),
                    _ => None,
                }
            };
            // A path may also start at a module the file names by itself: one of its own
            // (`sim::workload::Workload` in backend.rs) or one it imported (`use
            // crate::experiment::report;` then `report::tables::…`).
            let mut aliases: BTreeMap<String, Vec<String>> = modules
                .keys()
                .filter(|m| m.len() == me.len() + 1 && m.starts_with(&me))
                .map(|m| (m[me.len()].clone(), m.clone()))
                .collect();
            for path in paths(text, &[]) {
                if let Some(module) = absolute(&path).filter(|m| modules.contains_key(m)) {
                    aliases.insert(module.last().cloned().unwrap_or_default(), module);
                }
            }
            let names: Vec<String> = aliases.keys().cloned().collect();
            let mut found = BTreeSet::new();
            for path in paths(text, &names) {
                let Some(segments) = absolute(&path).or_else(|| Some([&aliases[&path[0]][..], &path[1..]].concat()))
                else {
                    continue;
                };
                // A module's own submodules are part of it.
                let own = segments.len() > me.len() && segments.starts_with(&me);
                if let Some(target) = resolve(&segments).filter(|t| t != file && !own) {
                    found.insert(target);
                }
            }
            (file.clone(), found)
        })
        .collect()
}

/// The library's files (not the binary's `main.rs` and `cli/`, not `tests.rs` files), with
/// their text up to their test module.
fn collect(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).expect("host/src is readable") {
        let path = entry.expect("an entry").path();
        let rel = path.strip_prefix(root).expect("under src").to_string_lossy().replace('\\', "/");
        if path.is_dir() {
            if rel != "cli" {
                collect(root, &path, out);
            }
        } else if let Some(name) = rel.strip_suffix(".rs")
            && name != "main"
            && !name.ends_with("tests")
            && !name.starts_with("cli")
        {
            let text = std::fs::read_to_string(&path).expect("readable");
            let code = text.split("#[cfg(test)]").next().unwrap_or("").to_string();
            out.insert(name.to_string(), code);
        }
    }
}

/// `backend/sim/placement` → [backend, sim, placement]; `lib` → [].
fn module_path(file: &str) -> Vec<String> {
    if file == "lib" { Vec::new() } else { file.split('/').map(String::from).collect() }
}

/// Every `crate::…`, `super::…` and `self::…` path in `text`, and every path that starts at one
/// of `names` (modules the file names by themselves), `use` trees expanded; comments skipped.
fn paths(text: &str, names: &[String]) -> Vec<Vec<String>> {
    let roots: Vec<String> =
        ["crate", "super", "self"].iter().map(|r| r.to_string()).chain(names.iter().cloned()).collect();
    let code: String = text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < code.len() {
        let rest = &code[i..];
        let starts = roots.iter().any(|r| rest.starts_with(r.as_str()) && rest[r.len()..].starts_with("::"))
            && (i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_' || bytes[i - 1] == b':'));
        if !starts {
            i += rest.chars().next().map_or(1, char::len_utf8);
            continue;
        }
        let (tree, used) = use_tree(rest);
        for p in tree {
            out.push(p);
        }
        i += used.max(1);
    }
    out
}

/// The paths of one path or `use` tree at the start of `text`, and how many bytes it took.
fn use_tree(text: &str) -> (Vec<Vec<String>>, usize) {
    let mut prefix = Vec::new();
    let mut i = 0;
    loop {
        let ident: String = text[i..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if ident.is_empty() {
            break;
        }
        i += ident.len();
        prefix.push(ident);
        if text[i..].starts_with("::{") {
            i += 3;
            let mut all = Vec::new();
            loop {
                let rest = text[i..].trim_start();
                i += text[i..].len() - rest.len();
                if rest.starts_with('}') {
                    i += 1;
                    break;
                }
                let (inner, used) = use_tree(rest);
                i += used.max(1);
                all.extend(inner.into_iter().map(|p| [prefix.clone(), p].concat()));
                let rest = text[i..].trim_start();
                i += text[i..].len() - rest.len();
                if rest.starts_with(',') {
                    i += 1;
                }
            }
            return (if all.is_empty() { vec![prefix] } else { all }, i);
        }
        if text[i..].starts_with("::") {
            i += 2;
        } else {
            break;
        }
    }
    (vec![prefix], i)
}

#[test]
fn every_library_file_imports_only_its_layer_and_the_layers_below() {
    let mut wrong = Vec::new();
    for (file, targets) in imports() {
        let (level, name) = layer(&file);
        for target in targets {
            let (to_level, to_name) = layer(&target);
            let sideways = level == to_level && name != to_name && level == 2;
            if to_level > level || sideways {
                wrong.push(format!("{file} ({name}) imports {target} ({to_name})"));
            }
        }
    }
    assert!(wrong.is_empty(), "imports against the layers (docs/architecture.md):\n{}", wrong.join("\n"));
}

#[test]
fn no_file_of_the_library_imports_its_way_back_to_itself() {
    let graph = imports();
    let mut cycles = Vec::new();
    for start in graph.keys() {
        // Depth-first from `start`; a path back to it is a cycle (reported once, from its
        // smallest file).
        let mut stack = vec![(start.clone(), vec![start.clone()])];
        let mut seen = BTreeSet::new();
        while let Some((at, trail)) = stack.pop() {
            for next in &graph[&at] {
                if next == start {
                    if trail.iter().all(|f| f >= start) {
                        cycles.push(format!("{} → {start}", trail.join(" → ")));
                    }
                } else if seen.insert(next.clone()) {
                    stack.push((next.clone(), [trail.clone(), vec![next.clone()]].concat()));
                }
            }
        }
    }
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
}

#[test]
fn the_checker_reads_use_trees_and_paths_in_code() {
    let text =
        "use crate::{a::{b, c}, d};\nlet x = crate::e::f(super::g);\n// crate::not\nsim::h::I; self::j; xsim::k;\n";
    let found = paths(text, &["sim".to_string()]);
    let found: Vec<String> = found.iter().map(|p| p.join("::")).collect();
    assert_eq!(found, ["crate::a::b", "crate::a::c", "crate::d", "crate::e::f", "super::g", "sim::h::I", "self::j"]);
}

/// The crates, bottom up, and the workspace crates each may depend on (besides the rules and
/// goodput crates, which depend on nothing of ours).
const CRATES: &[(&str, &[&str])] = &[
    ("core", &[]),
    ("kubernetes", &["wasmsched-core"]),
    ("docker", &["wasmsched-core"]),
    ("host", &["wasmsched-core", "wasmsched-docker", "wasmsched-kubernetes", "wasmsched-shipped"]),
];

#[test]
fn each_crate_depends_only_on_the_crates_below_it_and_only_the_top_one_on_the_shipped_policies() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut wrong = Vec::new();
    for (folder, allowed) in CRATES {
        let manifest = std::fs::read_to_string(root.join(folder).join("Cargo.toml")).expect("a manifest");
        let table: toml::Table = toml::from_str(&manifest).expect("a TOML manifest");
        let deps = table.get("dependencies").and_then(|d| d.as_table()).cloned().unwrap_or_default();
        for name in deps.keys().filter(|n| n.starts_with("wasmsched") || n.starts_with("policy-")) {
            if !allowed.contains(&name.as_str()) && !["wasmsched-rules", "wasmsched-goodput"].contains(&name.as_str()) {
                wrong.push(format!("{folder}/ depends on {name}"));
            }
        }
    }
    assert!(wrong.is_empty(), "dependencies against the layers (docs/architecture.md):\n{}", wrong.join("\n"));
}
