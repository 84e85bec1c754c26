//! Builds every policy crate under `policies/` to a wasm32-wasip2 component, in one cargo
//! call with a target directory of its own (so it never waits on the outer build's lock),
//! and the training job (`jobs/trainer`) as a static Linux binary, and writes
//! `artifacts.rs`: the shipped policies' bytes, every component's path, the trainer's path.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-wasip2";

struct Crate {
    package: String,
    /// The policy's name: its folder under `policies/` (or `policies/hostile/`).
    name: String,
    hostile: bool,
}

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let root = manifest_dir.parent().expect("artifacts/ lives in the workspace root").to_path_buf();
    for watched in ["policies", "tests/fixtures", "sdk", "wit", "jobs", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }

    let mut crates = find_crates(&root.join("policies"));
    // Test-only fixtures that are not hostile (a policy with state, say) live with the tests.
    crates.extend(find_crates_in(&root.join("tests").join("fixtures"), true));
    let target_dir = root.join("target").join("policies");
    build(&root, &target_dir, &crates);

    let out = target_dir.join(TARGET).join("release");
    let mut code = String::new();
    code.push_str("/// The shipped policies, embedded: name and component bytes.\n");
    code.push_str("pub const SHIPPED: &[Shipped] = &[\n");
    for c in crates.iter().filter(|c| !c.hostile) {
        let path = wasm_path(&out, c);
        writeln!(code, "    Shipped {{ name: {:?}, wasm: include_bytes!({:?}) }},", c.name, path.display().to_string())
            .unwrap();
    }
    code.push_str("];\n\n/// Every component built here (shipped and hostile fixtures): name and path.\n");
    code.push_str("pub const ALL: &[Artifact] = &[\n");
    for c in &crates {
        let path = wasm_path(&out, c);
        writeln!(
            code,
            "    Artifact {{ name: {:?}, path: {:?}, hostile: {} }},",
            c.name,
            path.display().to_string(),
            c.hostile
        )
        .unwrap();
    }
    code.push_str("];\n\n");
    let trainer = build_trainer(&root);
    code.push_str("/// The statically linked training job, where this host could build one.\n");
    writeln!(code, "pub const TRAINER: Option<&str> = {:?};", trainer.map(|p| p.display().to_string())).unwrap();
    let dest = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("artifacts.rs");
    fs::write(&dest, code).unwrap_or_else(|e| panic!("cannot write {}: {e}", dest.display()));
}

fn wasm_path(out: &Path, c: &Crate) -> PathBuf {
    out.join(format!("{}.wasm", c.package.replace('-', "_")))
}

fn find_crates(policies: &Path) -> Vec<Crate> {
    let mut crates = find_crates_in(policies, false);
    crates.extend(find_crates_in(&policies.join("hostile"), true));
    crates
}

/// The policy crates directly under `dir`; `hostile` marks them as test fixtures, not shipped.
fn find_crates_in(dir: &Path, hostile: bool) -> Vec<Crate> {
    let Ok(entries) = fs::read_dir(dir) else { return Vec::new() };
    let mut dirs: Vec<PathBuf> =
        entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.join("Cargo.toml").is_file()).collect();
    dirs.sort();
    dirs.into_iter()
        .map(|d| {
            let manifest = fs::read_to_string(d.join("Cargo.toml")).unwrap_or_default();
            let package = manifest
                .lines()
                .find_map(|l| l.trim().strip_prefix("name = \"").and_then(|r| r.strip_suffix('"')))
                .unwrap_or_else(|| panic!("{}: no `name = \"…\"` line in [package]", d.display()))
                .to_string();
            let name = d.file_name().unwrap().to_string_lossy().into_owned();
            Crate { package, name, hostile }
        })
        .collect()
}

fn build(root: &Path, target_dir: &Path, crates: &[Crate]) {
    let mut args = vec!["build", "--release", "--target", TARGET];
    for c in crates {
        args.extend(["-p", &c.package]);
    }
    let status = nested_cargo(root, target_dir, &args, None);
    if !status.success() {
        panic!(
            "building the policies for {TARGET} failed (see above). If the target is missing, run \
             `rustup target add {TARGET}` and build again."
        );
    }
}

/// Builds the training job (`jobs/trainer`) for the machine's own Linux target, statically
/// linked so that it runs alone in an image built FROM scratch. None where that cannot be done
/// (another OS): the tests that need it say so and skip.
fn build_trainer(root: &Path) -> Option<PathBuf> {
    let host = env::var("HOST").ok()?;
    if !host.ends_with("-linux-gnu") {
        println!("cargo:warning=the training job's image needs a Linux GNU host; {host} builds none");
        return None;
    }
    let target_dir = root.join("target").join("jobs");
    let args = ["build", "--release", "-p", "wasmsched-trainer", "--target", &host];
    let status = nested_cargo(root, &target_dir, &args, Some("-Ctarget-feature=+crt-static"));
    if !status.success() {
        println!("cargo:warning=building the training job failed (see above); the live backend's tests will skip");
        return None;
    }
    Some(target_dir.join(&host).join("release").join("wasmsched-trainer"))
}

/// Runs cargo on this workspace with its own target dir and without the outer build's
/// host-only settings; `rustflags` are the nested build's own.
fn nested_cargo(root: &Path, target_dir: &Path, args: &[&str], rustflags: Option<&str>) -> std::process::ExitStatus {
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
