//! wasmsched-build-support: the code the build scripts share — `shipped/build.rs` (the policies
//! the binary embeds), `tests/artifacts/build.rs` (what only the tests use), and `core/build.rs`
//! and `runtime/build.rs` (the contract's types and their conversions, [`contract`]).
//!
//! A policy crate is a folder with a `Cargo.toml` ([`policy_crates`]); [`build_components`]
//! compiles a set of them to wasm32-wasip2 components in one nested cargo call
//! ([`nested_cargo`]) under `target/policies`, where [`wasm_path`] finds each. [`files_under`]
//! walks folders in a fixed order, for content stamps and for embedded files. Start at
//! [`workspace_root`] and [`watch`], which every build script calls first.

pub mod contract;

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

/// The target every policy component is built for.
pub const TARGET: &str = "wasm32-wasip2";

/// The workspace's root: the nearest folder at or above the build script's package that holds
/// `Cargo.lock`.
///
/// # Panics
/// Outside a build script (no `CARGO_MANIFEST_DIR`), or in a package outside the workspace.
pub fn workspace_root() -> PathBuf {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    manifest_dir
        .ancestors()
        .find(|dir| dir.join("Cargo.lock").is_file())
        .unwrap_or_else(|| {
            panic!("{} is not inside the wasmsched workspace (no Cargo.lock above it)", manifest_dir.display())
        })
        .to_path_buf()
}

/// Tells cargo to run the build script again when anything under these paths (relative to
/// `root`) changes.
pub fn watch(root: &Path, paths: impl IntoIterator<Item = impl AsRef<Path>>) {
    for path in paths {
        println!("cargo:rerun-if-changed={}", root.join(path).display());
    }
}

/// Writes the generated `code` to `name` in the build script's `OUT_DIR`, for `include!`.
///
/// # Panics
/// Outside a build script, or when the file cannot be written.
pub fn write_generated(name: &str, code: &str) {
    let dest = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join(name);
    fs::write(&dest, code).unwrap_or_else(|e| panic!("cannot write {}: {e}", dest.display()));
}

/// A policy crate: a folder with a `Cargo.toml`, built to a component.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Crate {
    /// Its package name, from its `Cargo.toml`.
    pub package: String,
    /// The policy's name: its folder's name.
    pub name: String,
}

/// The policy crates directly under `dir`, in folder order.
///
/// # Panics
/// When a crate's `Cargo.toml` has no `name = "…"` line.
pub fn policy_crates(dir: &Path) -> Vec<Crate> {
    dirs_with(dir, "Cargo.toml")
        .into_iter()
        .map(|d| {
            let manifest = fs::read_to_string(d.join("Cargo.toml")).unwrap_or_default();
            let package = manifest
                .lines()
                .find_map(|l| l.trim().strip_prefix("name = \"").and_then(|r| r.strip_suffix('"')))
                .unwrap_or_else(|| panic!("{}: no `name = \"…\"` line in [package]", d.display()))
                .to_string();
            let name = d.file_name().unwrap().to_string_lossy().into_owned();
            Crate { package, name }
        })
        .collect()
}

/// The shipped policies: the crates directly under `policies/` (the hostile fixtures are one
/// folder down, the other languages' policies have no `Cargo.toml`).
pub fn shipped_policies(root: &Path) -> Vec<Crate> {
    policy_crates(&root.join("policies"))
}

/// The target directory of the policy builds, apart from the outer build's.
pub fn components_dir(root: &Path) -> PathBuf {
    root.join("target").join("policies")
}

/// Where [`build_components`] puts the component of `krate`.
pub fn wasm_path(root: &Path, krate: &Crate) -> PathBuf {
    components_dir(root).join(TARGET).join("release").join(format!("{}.wasm", krate.package.replace('-', "_")))
}

/// Builds `crates` to components in one cargo call with a target directory of its own
/// ([`components_dir`]), so that it never waits on the outer build's lock. Cargo rebuilds only
/// what changed; two build scripts building disjoint sets there take turns on its lock.
///
/// # Panics
/// When the build fails, saying how to add the target if that is what is missing.
pub fn build_components(root: &Path, crates: &[Crate]) {
    if crates.is_empty() {
        return;
    }
    let mut args = vec!["build", "--release", "--target", TARGET];
    for c in crates {
        args.extend(["-p", &c.package]);
    }
    let status = nested_cargo(root, &components_dir(root), &args, None);
    if !status.success() {
        panic!(
            "building the policies for {TARGET} failed (see above). If the target is missing, run \
             `rustup target add {TARGET}` and build again."
        );
    }
}

/// Runs cargo on this workspace with its own target dir and without the outer build's
/// host-only settings; `rustflags` are the nested build's own.
///
/// # Panics
/// When cargo cannot be started.
pub fn nested_cargo(root: &Path, target_dir: &Path, args: &[&str], rustflags: Option<&str>) -> ExitStatus {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root).args(args).arg("--target-dir").arg(target_dir);
    // The outer build's settings are for its own target: drop them.
    for (key, _) in env::vars_os() {
        let key = key.to_string_lossy();
        let host_only = key.starts_with("CARGO_ENCODED_RUSTFLAGS")
            || key == "RUSTFLAGS"
            || key == "RUSTC_WORKSPACE_WRAPPER"
            || key == "CARGO_TARGET_DIR"
            || key.starts_with("CARGO_BUILD_")
            || key.starts_with("CARGO_PROFILE_")
            || key == "CARGO_LLVM_COV"
            || key.starts_with("__CARGO");
        if host_only {
            cmd.env_remove(key.as_ref());
        }
    }
    if let Some(flags) = rustflags {
        cmd.env("CARGO_ENCODED_RUSTFLAGS", flags);
    }
    cmd.status().unwrap_or_else(|e| panic!("cannot run cargo: {e}"))
}

/// What `dir` holds, sorted; nothing when it cannot be read.
fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else { return Vec::new() };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    paths
}

/// The folders directly under `dir` that hold `file`, sorted.
pub fn dirs_with(dir: &Path, file: &str) -> Vec<PathBuf> {
    sorted_entries(dir).into_iter().filter(|p| p.join(file).is_file()).collect()
}

/// Every file under `path` (or `path` itself), in a fixed order, leaving out what `skip` says
/// of a file's or a folder's name.
pub fn files_under(path: &Path, skip: &dyn Fn(&str) -> bool, out: &mut Vec<PathBuf>) {
    if path.file_name().is_some_and(|n| skip(&n.to_string_lossy())) {
        return;
    }
    if path.is_dir() {
        for entry in sorted_entries(path) {
            files_under(&entry, skip, out);
        }
    } else if path.is_file() {
        out.push(path.to_path_buf());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    #[test]
    fn a_policy_crate_is_named_by_its_folder_and_built_under_its_package_name() {
        let root = tempfile::tempdir().unwrap();
        let policies = root.path().join("policies");
        write(&policies.join("fifo/Cargo.toml"), "[package]\nname = \"policy-fifo\"\n");
        write(&policies.join("fair-share/Cargo.toml"), "[package]\nname = \"policy-fair-share\"\n");
        write(&policies.join("python/fair-share/app.py"), "");
        write(&policies.join("hostile/hog/Cargo.toml"), "[package]\nname = \"hostile-hog\"\n");

        let crates = shipped_policies(root.path());
        let names: Vec<(&str, &str)> = crates.iter().map(|c| (c.name.as_str(), c.package.as_str())).collect();
        assert_eq!(names, [("fair-share", "policy-fair-share"), ("fifo", "policy-fifo")]);
        assert_eq!(
            wasm_path(root.path(), &crates[0]),
            root.path().join("target/policies/wasm32-wasip2/release/policy_fair_share.wasm")
        );
    }

    #[test]
    fn files_under_walks_in_name_order_and_leaves_out_what_skip_names() {
        let dir = tempfile::tempdir().unwrap();
        for file in ["b/z.py", "b/__pycache__/z.pyc", "a.py", "c/d/e.py"] {
            write(&dir.path().join(file), "");
        }
        let mut found = Vec::new();
        files_under(dir.path(), &|name| name == "__pycache__", &mut found);
        let found: Vec<_> = found.iter().map(|p| p.strip_prefix(dir.path()).unwrap().to_str().unwrap()).collect();
        assert_eq!(found, ["a.py", "b/z.py", "c/d/e.py"]);
    }
}
