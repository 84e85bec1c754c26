//! Builds every policy crate under `policies/` to a wasm32-wasip2 component, in one cargo
//! call with a target directory of its own (so it never waits on the outer build's lock);
//! the policies in other languages (`policies/python/*`, `policies/js/*`) with the toolchains
//! `toolchains/install` puts under `target/toolchains`; the training job (`jobs/trainer`) as a
//! static Linux binary; and writes `artifacts.rs`: the shipped policies' bytes, every
//! component's path, the trainer's path.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::hash::{DefaultHasher, Hash, Hasher};
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
    for watched in ["policies", "tests/fixtures", "sdk", "wit", "jobs", "toolchains", "templates", "Cargo.lock"] {
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
    let (foreign, unbuilt) = build_foreign(&root);
    code.push_str("/// The policies in other languages that were built: name, language, source, path.\n");
    code.push_str("pub const FOREIGN: &[Foreign] = &[\n");
    for f in &foreign {
        writeln!(
            code,
            "    Foreign {{ name: {:?}, language: {:?}, source: {:?}, path: {:?} }},",
            f.name,
            f.language.name(),
            f.source.display().to_string(),
            f.wasm.display().to_string()
        )
        .unwrap();
    }
    code.push_str("];\n\n/// The languages whose policies were not built, and why.\n");
    writeln!(code, "pub const UNBUILT: &[(&str, &str)] = &{unbuilt:?};").unwrap();
    writeln!(
        code,
        "/// Where `toolchains/install` put the toolchains.\npub const TOOLCHAINS: &str = {:?};\n",
        root.join("target").join("toolchains").display().to_string()
    )
    .unwrap();
    embed_scaffold_files(&root, &mut code);
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

/// A language other than Rust that policies are written in.
#[derive(Clone, Copy, PartialEq)]
enum Language {
    Python,
    Js,
}

impl Language {
    fn name(self) -> &'static str {
        match self {
            Language::Python => "python",
            Language::Js => "js",
        }
    }

    /// The file that makes a folder under `policies/<language>/` a policy.
    fn entry(self) -> &'static str {
        match self {
            Language::Python => "app.py",
            Language::Js => "policy.js",
        }
    }

    /// The SDK its policies build against.
    fn sdk(self, root: &Path) -> PathBuf {
        root.join("sdk").join(match self {
            Language::Python => "python",
            Language::Js => "js",
        })
    }

    /// The toolchain's command, once installed.
    fn tool(self, toolchains: &Path) -> PathBuf {
        match self {
            Language::Python => toolchains.join("python").join("bin").join("componentize-py"),
            Language::Js => toolchains.join("js").join("node_modules").join(".bin").join("componentize-qjs"),
        }
    }

    /// The command that builds the policy in `dir` to `out`.
    fn command(self, root: &Path, toolchains: &Path, dir: &Path, out: &Path) -> Command {
        let wit = root.join("wit").join("policy.wit");
        let mut cmd = Command::new(self.tool(toolchains));
        cmd.current_dir(root);
        match self {
            Language::Python => {
                cmd.arg("-d").arg(&wit).args(["-w", "policy-plugin", "componentize", "-p"]).arg(dir);
                cmd.arg("-p").arg(self.sdk(root)).arg("app").arg("-o").arg(out);
            }
            Language::Js => {
                cmd.arg("--wit").arg(&wit).args(["--world", "policy-plugin", "--sync", "--js"]);
                cmd.arg(dir.join(self.entry())).arg("--module-root").arg(root).arg("-o").arg(out);
            }
        }
        cmd
    }
}

/// A policy in another language, built.
struct Foreign {
    name: String,
    language: Language,
    source: PathBuf,
    wasm: PathBuf,
}

/// Installs the toolchains (`toolchains/install`) and builds every policy under
/// `policies/python/` and `policies/js/`, each as `<folder>-py` or `<folder>-js`. A component is
/// rebuilt only when its sources, its SDK, the contract or the toolchain changed (a stamp of
/// their contents beside it). A language whose toolchain cannot be installed, or whose build
/// fails, is left out with the reason (a warning here; its tests skip and say so).
fn build_foreign(root: &Path) -> (Vec<Foreign>, Vec<(&'static str, String)>) {
    let toolchains = root.join("target").join("toolchains");
    let install = Command::new("bash").arg(root.join("toolchains").join("install")).arg(&toolchains).status();
    if !install.as_ref().is_ok_and(|s| s.success()) {
        println!("cargo:warning=toolchains/install did not install every toolchain (see above)");
    }
    let mut built = Vec::new();
    let mut unbuilt = Vec::new();
    for (language, suffix) in [(Language::Python, "py"), (Language::Js, "js")] {
        let dirs = dirs_with(&root.join("policies").join(language.name()), language.entry());
        if dirs.is_empty() {
            continue;
        }
        if !language.tool(&toolchains).exists() {
            unbuilt.push((language.name(), "its toolchain is not installed (run toolchains/install)".to_string()));
            continue;
        }
        let out_dir = root.join("target").join("policies").join(language.name());
        fs::create_dir_all(&out_dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", out_dir.display()));
        for dir in dirs {
            let name = format!("{}-{suffix}", dir.file_name().unwrap().to_string_lossy());
            let wasm = out_dir.join(format!("{name}.wasm"));
            let stamp_path = out_dir.join(format!("{name}.stamp"));
            let stamp = stamp(&[
                &dir,
                &language.sdk(root),
                &root.join("wit").join("policy.wit"),
                &toolchains.join(language.name()).join(".wasmsched-stamp"),
            ]);
            let fresh = wasm.is_file() && fs::read_to_string(&stamp_path).is_ok_and(|s| s == stamp);
            if !fresh {
                let _ = fs::remove_file(&wasm);
                let status = language.command(root, &toolchains, &dir, &wasm).status();
                if !status.as_ref().is_ok_and(|s| s.success()) || !wasm.is_file() {
                    println!("cargo:warning=building {} failed (see above); its tests skip", dir.display());
                    unbuilt.push((language.name(), format!("building {} failed", dir.display())));
                    continue;
                }
                fs::write(&stamp_path, &stamp).unwrap_or_else(|e| panic!("cannot write {}: {e}", stamp_path.display()));
            }
            built.push(Foreign { name, language, source: dir, wasm });
        }
    }
    (built, unbuilt)
}

/// What `dir` holds, sorted; nothing when it cannot be read.
fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else { return Vec::new() };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    paths
}

/// The folders directly under `dir` that hold `file`, sorted.
fn dirs_with(dir: &Path, file: &str) -> Vec<PathBuf> {
    sorted_entries(dir).into_iter().filter(|p| p.join(file).is_file()).collect()
}

/// Every file under `path` (or `path` itself), in a fixed order, leaving out what `skip` says
/// of a file's or a folder's name.
fn files_under(path: &Path, skip: &dyn Fn(&str) -> bool, out: &mut Vec<PathBuf>) {
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

/// A digest of every file under `paths` (names and contents, in a fixed order), leaving out
/// caches and tests, which do not go into a component. `DefaultHasher` is stable within one
/// Rust toolchain, which is all a stamp beside a build output needs.
fn stamp(paths: &[&Path]) -> String {
    let skip = |name: &str| {
        let hidden = name.starts_with('.') && name != ".wasmsched-stamp";
        let test = name == "test" || name == "tests" || name.starts_with("test_") || name.ends_with(".test.js");
        hidden || test || name == "__pycache__" || name == "node_modules"
    };
    let mut files = Vec::new();
    for path in paths {
        files_under(path, &skip, &mut files);
    }
    let mut hasher = DefaultHasher::new();
    for file in files {
        if let Ok(bytes) = fs::read(&file) {
            file.hash(&mut hasher);
            bytes.hash(&mut hasher);
        }
    }
    format!("{:016x}", hasher.finish())
}

/// What `wasmsched new` writes, embedded so that an installed binary needs no source tree:
/// the templates (`templates/new/<language>/`), the contract, the toolchains' pins, and the
/// Python and JavaScript SDKs, which a new project carries a copy of.
fn embed_scaffold_files(root: &Path, code: &mut String) {
    let skip = |name: &str| name.starts_with('.') && name != ".gitignore" || name == "__pycache__";
    let mut found = Vec::new();
    files_under(&root.join("templates").join("new"), &skip, &mut found);
    files_under(&root.join("sdk").join("python").join("wasmsched"), &skip, &mut found);
    let mut files: Vec<String> =
        found.iter().map(|p| p.strip_prefix(root).unwrap().to_string_lossy().into_owned()).collect();
    for file in [
        "wit/policy.wit",
        "toolchains/requirements.txt",
        "toolchains/package.json",
        "sdk/js/wasmsched.js",
        "sdk/js/testing.js",
    ] {
        files.push(file.to_string());
    }
    code.push_str("/// Files `wasmsched new` writes from: path from the repository root, and contents.\n");
    code.push_str("pub const SCAFFOLD_FILES: &[(&str, &str)] = &[\n");
    for file in files {
        let path = root.join(&file);
        writeln!(code, "    ({file:?}, include_str!({:?})),", path.display().to_string()).unwrap();
    }
    code.push_str("];\n\n");
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
