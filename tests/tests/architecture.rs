//! The house plan, checked (docs/architecture.md). Between the crates: each depends only on
//! the crates the plan gives it, so Cargo keeps the code of a layer from reaching up (the
//! sandbox and the backends never name each other; nothing below the lab and the binary names
//! the shipped policies). Inside every crate: no module imports its way back to itself —
//! neither a file through the files it imports, nor a module through its siblings (`host`
//! → `record` → `host` is a cycle even when no one file closes it). Tests (`#[cfg(test)]`
//! modules and `tests.rs` files) may reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::OnceLock;

use wasmsched_tests::common::repo;

/// Modules (paths under `src`, `[]` for the crate's root) and the modules each imports.
type Graph = BTreeMap<Vec<String>, BTreeSet<Vec<String>>>;

/// The workspace's crates, bottom up: folder, and the workspace crates its `[dependencies]`
/// may name. Dev-dependencies are free: a test may use what it likes.
const CRATES: &[(&str, &[&str])] = &[
    // 0. The contract's rules and the models of training: nothing of ours.
    ("rules", &[]),
    ("goodput", &[]),
    // 1. The vocabulary.
    ("core", &["wasmsched-rules"]),
    // 2. The sandbox, the simulator and the live backends, side by side.
    ("runtime", &["wasmsched-core", "wasmsched-rules"]),
    ("sim", &["wasmsched-core", "wasmsched-goodput", "wasmsched-rules"]),
    ("docker", &["wasmsched-core", "wasmsched-rules"]),
    ("kubernetes", &["wasmsched-core", "wasmsched-rules", "wasmsched-goodput"]),
    // 3. The loop; policies in registries.
    ("loop", &["wasmsched-core", "wasmsched-rules", "wasmsched-runtime"]),
    ("oci", &["wasmsched-core", "wasmsched-runtime"]),
    // 4. The lab (offline) and the live host.
    (
        "lab",
        &[
            "wasmsched-core",
            "wasmsched-rules",
            "wasmsched-goodput",
            "wasmsched-runtime",
            "wasmsched-sim",
            "wasmsched-loop",
            "wasmsched-shipped",
            "wasmsched-docker",
        ],
    ),
    (
        "host",
        &[
            "wasmsched-core",
            "wasmsched-rules",
            "wasmsched-runtime",
            "wasmsched-sim",
            "wasmsched-loop",
            "wasmsched-oci",
            "wasmsched-docker",
            "wasmsched-kubernetes",
        ],
    ),
    // 5. The binary.
    (
        "cli",
        &[
            "wasmsched-core",
            "wasmsched-runtime",
            "wasmsched-sim",
            "wasmsched-loop",
            "wasmsched-lab",
            "wasmsched-oci",
            "wasmsched-host",
            "wasmsched-docker",
            "wasmsched-kubernetes",
            "wasmsched-shipped",
            "wasmsched-workspace-hack",
        ],
    ),
];

#[test]
fn each_crate_depends_only_on_the_crates_the_plan_gives_it() {
    let mut wrong = Vec::new();
    for (folder, allowed) in CRATES {
        let manifest = std::fs::read_to_string(repo().join(folder).join("Cargo.toml")).expect("a manifest");
        let table: toml::Table = toml::from_str(&manifest).expect("a TOML manifest");
        let deps = table.get("dependencies").and_then(|d| d.as_table()).cloned().unwrap_or_default();
        for name in deps.keys().filter(|n| n.starts_with("wasmsched") || n.starts_with("policy-")) {
            if !allowed.contains(&name.as_str()) {
                wrong.push(format!("{folder}/ depends on {name}"));
            }
        }
    }
    assert!(wrong.is_empty(), "dependencies against the layers (docs/architecture.md):\n{}", wrong.join("\n"));
}

#[test]
fn every_crate_of_the_workspace_is_in_the_plan() {
    let manifest = std::fs::read_to_string(repo().join("Cargo.toml")).expect("the workspace manifest");
    let table: toml::Table = toml::from_str(&manifest).expect("TOML");
    let members = table["workspace"]["members"].as_array().expect("members");
    let planned: BTreeSet<&str> = CRATES.iter().map(|(f, _)| *f).collect();
    // Besides the plan's: the policies' side (the SDK, the policies, their fixtures), the build
    // of the shipped components, the tests, the training job and the scale harness, none of
    // which the host's library depends on; and the binary's feature pins (workspace-hack).
    let outside =
        ["sdk", "build-support", "shipped", "tests", "tests/artifacts", "jobs/trainer", "scale", "workspace-hack"];
    let missing: Vec<&str> = members
        .iter()
        .filter_map(|m| m.as_str())
        .filter(|m| !m.starts_with("policies/") && !m.starts_with("tests/fixtures/"))
        .filter(|m| !planned.contains(m) && !outside.contains(m))
        .collect();
    assert!(missing.is_empty(), "crates in no layer (add them to CRATES and docs/architecture.md): {missing:?}");
}

/// The dependencies and their features as `cargo tree` resolves them for `args`, one line each.
fn resolved(args: &[&str]) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args(["tree", "--offline", "-f", "{p} {f}", "--prefix", "none"])
        .args(args)
        .current_dir(repo())
        .output()
        .expect("cargo runs");
    assert!(out.status.success(), "cargo tree {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    text.lines().map(|l| l.trim_end_matches(" (*)").to_string()).filter(|l| !l.is_empty()).collect()
}

/// The binary, whole (`cargo build`) or the lab alone (the README's first command, `cargo run
/// --no-default-features -- demo`), and `cargo test --workspace` give every dependency the
/// same features, so that none of them rebuilds what another built (docs/architecture.md, "One
/// build of each dependency"): a line of the binary's graph that the tests' lacks is a
/// dependency the two build differently. Of the workspace's own crates, the lab alone leaves
/// the lab's and the binary's Docker side out; those two are built again for the tests.
#[test]
fn the_binary_and_the_tests_build_each_dependency_alike() {
    let tests = resolved(&["--workspace"]);
    for (build, args) in [
        ("the binary", &["-p", "wasmsched", "-e", "no-dev"][..]),
        ("the lab alone", &["-p", "wasmsched", "-e", "no-dev", "--no-default-features"][..]),
    ] {
        let binary = resolved(args);
        assert!(binary.len() > 150, "{build}'s graph is read: {} lines", binary.len());
        let ours = |l: &&String| l.starts_with("wasmsched ") || l.starts_with("wasmsched-lab ");
        let twice: Vec<&String> =
            binary.difference(&tests).filter(|l| !(build == "the lab alone" && ours(l))).collect();
        assert!(
            twice.is_empty(),
            "built with other features for {build} than for the tests (add them, with the features the tests' \
             graph gives them, to workspace-hack/Cargo.toml):\n{}",
            twice.iter().map(|l| l.as_str()).collect::<Vec<_>>().join("\n")
        );
    }
}

/// Cargo resolves the build side (build scripts, derives and what they use) apart from the code,
/// so a dependency both use with other features is built twice, and so is all that stands on it
/// on either side: a build side's semver without serde built wasmparser and wasm-encoder twice,
/// 25 s of CPU each in the demo's build. Such a dependency is a package on two lines of one
/// graph; give the build side the code's features in workspace-hack's `[build-dependencies]`.
/// Cranelift's build script's Pulley (its instruction set, without the interpreter) stays apart:
/// built as wasmtime's, it would sit in front of Cranelift, the longest chain of the build.
#[test]
fn the_build_side_and_the_code_build_each_dependency_alike() {
    const APART: [&str; 3] = ["pulley-interpreter", "wasmtime-internal-core", "cranelift-bitset"];
    for args in [
        &["-p", "wasmsched", "-e", "no-dev", "--no-default-features"][..],
        &["-p", "wasmsched", "-e", "no-dev"],
        &["--workspace"],
    ] {
        let graph = resolved(args);
        let mut lines: BTreeMap<String, Vec<&String>> = BTreeMap::new();
        for line in &graph {
            let package: Vec<&str> = line.split_whitespace().take(2).collect();
            lines.entry(package.join(" ")).or_default().push(line);
        }
        assert!(lines.len() > 150, "the graph of {args:?} is read: {} packages", lines.len());
        let twice: Vec<String> = lines
            .iter()
            .filter(|(package, lines)| lines.len() > 1 && !APART.iter().any(|a| package.split(' ').next() == Some(*a)))
            .map(|(_, lines)| lines.iter().map(|l| l.as_str()).collect::<Vec<_>>().join("  |  "))
            .collect();
        assert!(
            twice.is_empty(),
            "built twice for {args:?}, once with each set of features (give workspace-hack's \
             [build-dependencies] the code's):\n{}",
            twice.join("\n")
        );
    }
}

/// The vocabulary is types, no engine: core, and the live backends above it, build without
/// wasmtime, Cranelift or (core without its `async` feature) tokio, so neither backend waits
/// for Cranelift and an edit to either never rebuilds it.
#[test]
fn core_and_the_backends_build_without_wasmtime() {
    let engine = |line: &String| line.starts_with("wasmtime") || line.starts_with("cranelift");
    for krate in ["wasmsched-core", "wasmsched-docker", "wasmsched-kubernetes"] {
        let graph = resolved(&["-p", krate, "-e", "normal"]);
        assert!(graph.iter().any(|l| l.starts_with("serde ")), "{krate}'s graph is read: {graph:?}");
        let found: Vec<&String> = graph.iter().filter(|l| engine(l)).collect();
        assert!(found.is_empty(), "{krate} builds the policy engine: {found:?}");
    }
    let core = resolved(&["-p", "wasmsched-core", "-e", "normal", "--no-default-features"]);
    assert!(!core.iter().any(|l| l.starts_with("tokio ")), "core builds tokio without its async feature");
}

/// Each file of a crate (its module path under `src`, `[]` for the crate's root, with its text
/// up to its test module) and the files of the crate it imports.
fn imports(modules: &BTreeMap<Vec<String>, String>) -> Graph {
    let resolve = |segments: &[String]| {
        (0..=segments.len()).rev().find(|&n| modules.contains_key(&segments[..n])).map(|n| segments[..n].to_vec())
    };
    modules
        .iter()
        .map(|(me, text)| {
            let absolute = |path: &[String]| -> Option<Vec<String>> {
                match path[0].as_str() {
                    "crate" => Some(path[1..].to_vec()),
                    "super" if !me.is_empty() => Some([&me[..me.len() - 1], &path[1..]].concat()),
                    "self" => Some([&me[..], &path[1..]].concat()),
                    _ => None,
                }
            };
            // A path may also start at a module the file names by itself: one of its own
            // (`sim::workload::Workload`) or one it imported (`use crate::report;`
            // then `report::tables::…`).
            let mut aliases: BTreeMap<String, Vec<String>> = modules
                .keys()
                .filter(|m| m.len() == me.len() + 1 && m.starts_with(me))
                .map(|m| (m[me.len()].clone(), m.clone()))
                .collect();
            for path in paths(text, &[]) {
                if let Some(module) = absolute(&path).filter(|m| !m.is_empty() && modules.contains_key(m)) {
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
                let own = segments.len() > me.len() && segments.starts_with(me);
                if let Some(target) = resolve(&segments).filter(|t| t != me && !own) {
                    found.insert(target);
                }
            }
            (me.clone(), found)
        })
        .collect()
}

/// The files under `dir` that `keep` keeps (by path under `src` without `.rs`), not `tests.rs`
/// files, with their text up to their test module; `root_file` (`lib` or `main`) is the root.
fn collect(
    src: &Path,
    dir: &Path,
    root_file: &str,
    keep: &dyn Fn(&str) -> bool,
    out: &mut BTreeMap<Vec<String>, String>,
) {
    for entry in std::fs::read_dir(dir).expect("src is readable") {
        let path = entry.expect("an entry").path();
        let rel = path.strip_prefix(src).expect("under src").to_string_lossy().replace('\\', "/");
        if path.is_dir() {
            collect(src, &path, root_file, keep, out);
        } else if let Some(name) = rel.strip_suffix(".rs")
            && keep(name)
            && !name.ends_with("tests")
        {
            let text = std::fs::read_to_string(&path).expect("readable");
            let code = text.split("#[cfg(test)]").next().unwrap_or("").to_string();
            let module = if name == root_file { Vec::new() } else { name.split('/').map(String::from).collect() };
            out.insert(module, code);
        }
    }
}

/// Each crate's files and the files each imports, by crate: the libraries, and the binary's own
/// modules apart (read once for every test here).
fn every_crate_imports() -> &'static [(String, Graph)] {
    static GRAPHS: OnceLock<Vec<(String, Graph)>> = OnceLock::new();
    GRAPHS.get_or_init(|| {
        let read = |folder: &str, root_file: &str, keep: &dyn Fn(&str) -> bool| {
            let src = repo().join(folder).join("src");
            let mut files = BTreeMap::new();
            collect(&src, &src, root_file, keep, &mut files);
            imports(&files)
        };
        let binary = |n: &str| n == "main" || n == "cli" || n.starts_with("cli/");
        let mut crates = Vec::new();
        for (folder, _) in CRATES {
            if folder == &"cli" {
                crates.push(("cli (binary)".to_string(), read(folder, "main", &binary)));
                crates.push(("cli".to_string(), read(folder, "lib", &|n: &str| !binary(n))));
            } else {
                crates.push((folder.to_string(), read(folder, "lib", &|_: &str| true)));
            }
        }
        crates
    })
}

fn shown(module: &[String]) -> String {
    if module.is_empty() { "(root)".to_string() } else { module.join("/") }
}

/// The cycles of a graph, each once (from its smallest node), as `a → b → a`.
fn cycles(graph: &Graph) -> Vec<String> {
    let mut found = Vec::new();
    for start in graph.keys() {
        let mut stack = vec![(start.clone(), vec![start.clone()])];
        let mut seen = BTreeSet::new();
        while let Some((at, trail)) = stack.pop() {
            for next in graph.get(&at).into_iter().flatten() {
                if next == start {
                    if trail.iter().all(|f| f >= start) {
                        let names: Vec<String> = trail.iter().map(|m| shown(m)).collect();
                        found.push(format!("{} → {}", names.join(" → "), shown(start)));
                    }
                } else if seen.insert(next.clone()) {
                    stack.push((next.clone(), [trail.clone(), vec![next.clone()]].concat()));
                }
            }
        }
    }
    found
}

#[test]
fn no_file_imports_its_way_back_to_itself() {
    let mut wrong = Vec::new();
    for (name, graph) in every_crate_imports() {
        for cycle in cycles(graph) {
            wrong.push(format!("{name}: {cycle}"));
        }
    }
    assert!(wrong.is_empty(), "import cycles between files:\n{}", wrong.join("\n"));
}

#[test]
fn no_module_imports_its_way_back_to_itself_through_its_siblings() {
    let mut wrong = Vec::new();
    for (name, graph) in every_crate_imports() {
        for cycle in cycles(&siblings(graph)) {
            wrong.push(format!("{name}: {cycle}"));
        }
    }
    assert!(wrong.is_empty(), "import cycles between modules:\n{}", wrong.join("\n"));
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
        // The cheap test first: a path starts only where an identifier does.
        let starts = (i == 0
            || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_' || bytes[i - 1] == b':'))
            && roots.iter().any(|r| rest.starts_with(r.as_str()) && rest[r.len()..].starts_with("::"));
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

/// The imports between sibling modules that a graph of files makes. Each import between two
/// files is one between the modules that hold them, at the level where their paths part:
/// `host/status` → `record` is `host` → `record`. A module that uses its parent's items, or its
/// own children, is inside that parent, not beside it.
fn siblings(graph: &Graph) -> Graph {
    let mut siblings: Graph = BTreeMap::new();
    for (from, targets) in graph {
        for to in targets {
            let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
            if common == from.len() || common == to.len() {
                continue;
            }
            siblings.entry(from[..=common].to_vec()).or_default().insert(to[..=common].to_vec());
        }
    }
    siblings
}

#[test]
fn a_cycle_through_a_submodule_is_one_between_modules_and_a_child_using_its_parent_is_none() {
    let m = |s: &str| s.split('/').map(String::from).collect::<Vec<_>>();
    let files = |edges: &[(&str, &str)]| {
        let mut graph: Graph = BTreeMap::new();
        for (from, to) in edges {
            graph.entry(m(from)).or_default().insert(m(to));
            graph.entry(m(to)).or_default();
        }
        graph
    };
    let through_status = files(&[("host", "record"), ("record", "host/status"), ("host", "host/status")]);
    assert!(cycles(&through_status).is_empty(), "no file closes it");
    assert_eq!(cycles(&siblings(&through_status)), ["host → record → host"]);
    let parent_and_child = files(&[("host", "host/status"), ("host/status", "host"), ("host/status", "host/pacer")]);
    assert!(cycles(&siblings(&parent_and_child)).is_empty());
}

#[test]
fn the_checker_reads_use_trees_and_paths_in_code() {
    let text =
        "use crate::{a::{b, c}, d};\nlet x = crate::e::f(super::g);\n// crate::not\nsim::h::I; self::j; xsim::k;\n";
    let found = paths(text, &["sim".to_string()]);
    let found: Vec<String> = found.iter().map(|p| p.join("::")).collect();
    assert_eq!(found, ["crate::a::b", "crate::a::c", "crate::d", "crate::e::f", "super::g", "sim::h::I", "self::j"]);
}
