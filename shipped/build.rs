//! Builds the shipped policies (every crate directly under `policies/`) to wasm32-wasip2
//! components, in one cargo call with a target directory of its own, and writes `shipped.rs`:
//! their bytes, and the files `wasmsched new` writes from. Nothing here is for the tests: the
//! hostile fixtures, the other languages' policies and the training job are built by
//! `tests/artifacts/build.rs`.

use std::fmt::Write as _;
use std::path::Path;

use wasmsched_build_support::{build_components, files_under, shipped_policies, wasm_path, watch, write_generated};

/// What `wasmsched new` writes besides the templates and the Python SDK package (whole
/// folders): single files, from the repository root.
const SCAFFOLD_SINGLE_FILES: [&str; 7] = [
    "wit/policy.wit",
    "wit/0.3.0/policy.wit",
    "toolchains/requirements.txt",
    "toolchains/package.json",
    "sdk/js/wasmsched.js",
    "sdk/js/testing.js",
    "sdk/js/rules.js",
];

/// The folders `wasmsched new` writes every file of.
const SCAFFOLD_FOLDERS: [&str; 2] = ["templates/new", "sdk/python/wasmsched"];

fn main() {
    let root = wasmsched_build_support::workspace_root();
    let crates = shipped_policies(&root);
    // What a shipped component is built from: its folder, the SDK and the rules it calls, the
    // contract, the workspace's manifest (a new policy joins its members) and lock file, and
    // the flags it is compiled with.
    watch(&root, crates.iter().map(|c| Path::new("policies").join(&c.name)));
    watch(&root, ["sdk/Cargo.toml", "sdk/src", "rules", "wit", "Cargo.toml", "Cargo.lock", ".cargo/config.toml"]);
    watch(&root, SCAFFOLD_FOLDERS.iter().chain(&SCAFFOLD_SINGLE_FILES));

    build_components(&root, &crates);

    let mut code = String::new();
    code.push_str("/// The shipped policies, embedded: name and component bytes.\n");
    code.push_str("pub const SHIPPED: &[Shipped] = &[\n");
    for c in &crates {
        let path = wasm_path(&root, c);
        writeln!(code, "    Shipped {{ name: {:?}, wasm: include_bytes!({:?}) }},", c.name, path.display().to_string())
            .unwrap();
    }
    code.push_str("];\n\n");
    embed_scaffold_files(&root, &mut code);
    write_generated("shipped.rs", &code);
}

/// What `wasmsched new` writes, embedded so that an installed binary needs no source tree:
/// the templates (`templates/new/<language>/`), the contract, the toolchains' pins, and the
/// Python and JavaScript SDKs, which a new project carries a copy of.
fn embed_scaffold_files(root: &Path, code: &mut String) {
    let skip = |name: &str| name.starts_with('.') && name != ".gitignore" && name != ".cargo" || name == "__pycache__";
    let mut found = Vec::new();
    for folder in SCAFFOLD_FOLDERS {
        files_under(&root.join(folder), &skip, &mut found);
    }
    let mut files: Vec<String> =
        found.iter().map(|p| p.strip_prefix(root).unwrap().to_string_lossy().into_owned()).collect();
    files.extend(SCAFFOLD_SINGLE_FILES.map(String::from));
    code.push_str("/// Files `wasmsched new` writes from: path from the repository root, and contents.\n");
    code.push_str("pub const SCAFFOLD_FILES: &[(&str, &str)] = &[\n");
    for file in files {
        let path = root.join(&file);
        writeln!(code, "    ({file:?}, include_str!({:?})),", path.display().to_string()).unwrap();
    }
    code.push_str("];\n");
}
