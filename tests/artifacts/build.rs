//! Builds what only the tests use: the hostile fixtures (`policies/hostile/*`) and the
//! test-only policies (`tests/fixtures/*`) to wasm32-wasip2 components, in one cargo call
//! under `target/policies` (the shipped policies are `wasmsched-shipped`'s: never built here);
//! the policies in other languages (`policies/python/*`, `policies/js/*`) with the toolchains
//! `toolchains/install` puts under `target/toolchains`; the training job (`jobs/trainer`) as a
//! static Linux binary; and writes `artifacts.rs`: every component's path, the trainer's path.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;

use wasmsched_build_support::{
    build_components, components_dir, dirs_with, files_under, nested_cargo, policy_crates, shipped_policies, wasm_path,
    watch, write_generated,
};

fn main() {
    let root = wasmsched_build_support::workspace_root();
    // Not the shipped policies' folders: wasmsched-shipped builds those, and only the list of
    // them (the workspace's members, in Cargo.toml) goes into what this script writes.
    watch(
        &root,
        [
            "policies/hostile",
            "policies/python",
            "policies/js",
            "tests/fixtures",
            "sdk",
            "rules",
            "wit",
            "jobs",
            "toolchains",
            "Cargo.toml",
            "Cargo.lock",
            ".cargo/config.toml",
        ],
    );

    let mut fixtures = policy_crates(&root.join("policies").join("hostile"));
    // Test-only fixtures that are not hostile (a policy with state, say) live with the tests.
    fixtures.extend(policy_crates(&root.join("tests").join("fixtures")));
    build_components(&root, &fixtures);

    let mut code = String::new();
    code.push_str("/// Every Rust component the tests can ask for (shipped and test fixtures): name and path.\n");
    code.push_str("pub const ALL: &[Artifact] = &[\n");
    let all = shipped_policies(&root).into_iter().map(|c| (c, false)).chain(fixtures.into_iter().map(|c| (c, true)));
    for (c, hostile) in all {
        let path = wasm_path(&root, &c).display().to_string();
        writeln!(code, "    Artifact {{ name: {:?}, path: {path:?}, hostile: {hostile} }},", c.name).unwrap();
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
    let trainer = build_trainer(&root);
    code.push_str("/// The statically linked training job, where this host could build one.\n");
    writeln!(code, "pub const TRAINER: Option<&str> = {:?};", trainer.map(|p| p.display().to_string())).unwrap();
    write_generated("artifacts.rs", &code);
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
        let wit = contract(root);
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

/// The contract the Python and JS SDKs speak: 0.3.0, which the host serves through its adapter.
fn contract(root: &Path) -> PathBuf {
    root.join("wit").join("0.3.0").join("policy.wit")
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
        let out_dir = components_dir(root).join(language.name());
        fs::create_dir_all(&out_dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", out_dir.display()));
        for dir in dirs {
            let name = format!("{}-{suffix}", dir.file_name().unwrap().to_string_lossy());
            let wasm = out_dir.join(format!("{name}.wasm"));
            let stamp_path = out_dir.join(format!("{name}.stamp"));
            let stamp = stamp(&[
                &dir,
                &language.sdk(root),
                &contract(root),
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
