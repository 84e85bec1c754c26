//! Policies in Python (componentize-py) and JavaScript (componentize-qjs), built by the test
//! artifacts build (`tests/artifacts/`) with the toolchains `toolchains/install` puts under
//! `target/toolchains`: their SDKs' and their own native tests pass, `validate` admits them and
//! names their toolchain, and they make the same decisions as the Rust versions on the same run,
//! reasons included; and a project `wasmsched new` writes, in each language, builds, passes its
//! test and validates. Where a toolchain could not be installed, these tests say so and skip.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use wasmsched::admission;
use wasmsched::bindings::wit::{Action, ActionKind};
use wasmsched::replay::{self, ReplayReport};
use wasmsched::runtime::Limits;
use wasmsched::runtime::supervise::{Fallback, Quarantine, Supervised};
use wasmsched::scaffold::{self, Lang};
use wasmsched::world::sample;
use wasmsched_test_artifacts::{Foreign, TOOLCHAINS};

use wasmsched_tests::common::{loaded, repo, runtime};
use wasmsched_tests::live::{Running, Setup, component};

/// The built policy, or None after saying loudly why it is missing.
fn foreign(name: &str) -> Option<&'static Foreign> {
    match wasmsched_test_artifacts::foreign(name) {
        Ok(f) => Some(f),
        Err(why) => {
            eprintln!("SKIPPED: {why}");
            None
        }
    }
}

/// Runs `cmd`; its output, or an error when it could not be started. Panics with the output
/// when it fails.
fn checked(mut cmd: Command) -> std::io::Result<String> {
    let out = cmd.output()?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    Ok(text)
}

/// Runs a native test command in the repository; None (said loudly) when `program` is absent.
fn native_tests(program: &Path, args: &[&str]) -> Option<String> {
    let mut cmd = Command::new(program);
    cmd.args(args).current_dir(repo());
    checked(cmd).map_err(|e| eprintln!("SKIPPED: cannot run {}: {e}", program.display())).ok()
}

#[test]
fn the_python_sdk_and_policies_pass_their_native_tests() {
    let python = Path::new(TOOLCHAINS).join("python/bin/python");
    if !python.exists() {
        eprintln!("SKIPPED: no Python toolchain at {} (toolchains/install could not make it)", python.display());
        return;
    }
    let mut args = vec!["-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider"];
    args.extend(["sdk/python", "policies/python", "jobs/python"]);
    let Some(out) = native_tests(&python, &args) else { return };
    let last = out.lines().rev().find(|l| l.contains("passed")).unwrap_or_default();
    // The job package's framework tests skip where Lightning, transformers or torch is absent (the
    // toolchain has none); any other skip (`-rs` lists each with its file) hides a test that did not run.
    let frameworks = "jobs/python/tests/test_job_frameworks.py";
    let other_skips = out.lines().filter(|l| l.starts_with("SKIPPED") && !l.contains(frameworks)).count();
    assert!(other_skips == 0 && !last.contains(" 0 passed"), "{out}");
    println!("pytest: {last}");
}

#[test]
fn the_js_sdk_and_policies_pass_their_native_tests() {
    let Some(out) = native_tests(Path::new("node"), &["--test", "sdk/js/test/", "policies/js/"]) else { return };
    let pass = out.lines().find(|l| l.starts_with("# pass")).unwrap_or_default();
    let fail = out.lines().find(|l| l.starts_with("# fail")).unwrap_or_default();
    assert!(fail == "# fail 0" && pass != "# pass 0", "{out}");
    println!("node --test: {pass}, {fail}");
}

#[test]
fn validate_admits_every_policy_in_another_language_and_names_its_toolchain() {
    let world = sample::world(2, 8, 3);
    for (name, says) in [("fair-share-py", "Python 3."), ("flowcon-py", "Python 3."), ("fair-share-js", "JavaScript")] {
        let Some(f) = foreign(name) else { continue };
        // The default limits: the per-call deadline and memory cap every policy gets.
        let admitted = admission::admit_file(runtime(), Path::new(f.path), Limits::default(), &world)
            .unwrap_or_else(|e| panic!("{name} was not admitted: {e:#}"));
        let line = admitted.to_string();
        assert!(line.contains(&format!("built with {says}")), "{line}");
        // The other languages' SDKs build against the current contract, as the Rust SDK does.
        assert!(line.contains("contract wasmsched:policy@0.3.0"), "{line}");
        println!("{line}");
    }
}

/// A replay of `name` over the recording: its decisions beside the recorded ones.
fn replayed(recording: &Path, name: &str) -> ReplayReport {
    let limits = Limits { deadline: Duration::from_secs(2), ..Limits::default() };
    let mut policy = Supervised::new(loaded(name), "{}".into(), limits, Fallback::KeepLimits, Quarantine::default());
    let mut backend = replay::Recording::open(recording).unwrap();
    replay::replay(runtime(), &mut backend, &mut policy)
}

/// FlowCon (Rust) live on the simulator with FlowCon's paper workload, recorded: jobs arrive,
/// learn, get capped and lifted, and end (about 95 ticks of 30 s).
fn flowcon_run() -> Setup {
    let setup = Setup::new();
    std::fs::copy(repo().join("scenarios/flowcon-paper.toml"), setup.dir.path().join("workload.toml")).unwrap();
    setup.land("flowcon", &component("flowcon"));
    let running = Running::start(setup.config("30s", "\"max\"", "[policy.flowcon]\ndeadline = \"2s\"\n"));
    running.wait("the workload's end", |s| s.ticks > 0 && !s.running);
    running.stop();
    setup
}

fn cpu_actions(report: &ReplayReport) -> usize {
    let actions = report.differences.iter().flat_map(|d| d.replayed.iter().flatten());
    actions.filter(|a: &&Action| matches!(a.kind, ActionKind::SetCpu(_))).count()
}

#[test]
fn the_python_and_javascript_policies_decide_exactly_as_the_rust_ones() {
    let names = ["flowcon-py", "fair-share-py", "fair-share-js"];
    if names.iter().map(|n| foreign(n)).any(|f| f.is_none()) {
        return;
    }
    let setup = flowcon_run();
    let recording = setup.recording();

    // FlowCon in Python over FlowCon's own run: not one tick differs, reasons included.
    let rust = replayed(&recording, "flowcon");
    assert!(rust.is_identical(), "the Rust FlowCon replays itself: {:?}", rust.differences.first());
    let python = replayed(&recording, "flowcon-py");
    assert!(python.is_identical(), "first difference: {:?}", python.differences.first());
    assert_eq!((python.ticks, python.compared), (rust.ticks, rust.compared));
    println!("flowcon-py: {} of {} ticks compared, all identical", python.identical, python.compared);

    // fair-share differs from FlowCon on the ticks where it lifts FlowCon's caps: in Python and
    // in JavaScript exactly where and how the Rust one does.
    let rust = replayed(&recording, "fair-share");
    assert!(cpu_actions(&rust) > 0, "fair-share lifts the caps FlowCon set");
    for name in ["fair-share-py", "fair-share-js"] {
        let other = replayed(&recording, name);
        assert_eq!(other.differences, rust.differences, "{name} against fair-share (Rust)");
        println!("{name}: {} ticks differ from FlowCon, as Rust fair-share's do", other.differences.len());
    }
}

/// Runs `command` with `sh` in `dir`; panics with its output when it fails.
fn shell(dir: &Path, command: &str, env: &[(&str, String)]) {
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(command).current_dir(dir).envs(env.iter().cloned());
    checked(cmd).unwrap_or_else(|e| panic!("cannot run sh: {e}"));
}

/// `wasmsched new` in `lang`, then the project's own test and build commands, as its README
/// gives them, and `validate` on what they built. The toolchain comes from this checkout's
/// (`.venv` and `node_modules` are links to it), and a Rust project builds into a target
/// folder of this checkout's, so that the dependencies compile once.
fn scaffold_builds_tests_and_validates(lang: Lang) {
    let dir = tempfile::tempdir().unwrap();
    let project = scaffold::create("my-policy", lang, &dir.path().join("my-policy"), &scaffold::default_sdk()).unwrap();
    let toolchains = Path::new(TOOLCHAINS);
    let mut env = Vec::new();
    let mut wasm = project.dir.join(&project.wasm);
    match lang {
        Lang::Rust => {
            let target = repo().join("target").join("scaffold");
            env.push(("CARGO_TARGET_DIR", target.display().to_string()));
            // The workspace's versions: nothing new to resolve or fetch.
            std::fs::copy(repo().join("Cargo.lock"), project.dir.join("Cargo.lock")).unwrap();
            wasm = target.join(project.wasm.strip_prefix("target").unwrap());
        }
        Lang::Python | Lang::Js => {
            let (installed, link) = match lang {
                Lang::Python => (toolchains.join("python"), ".venv"),
                _ => (toolchains.join("js").join("node_modules"), "node_modules"),
            };
            if !installed.exists() {
                eprintln!(
                    "SKIPPED: no {lang} toolchain at {} (toolchains/install could not make it)",
                    installed.display()
                );
                return;
            }
            std::os::unix::fs::symlink(&installed, project.dir.join(link)).unwrap();
        }
    }
    let [_install, test, build] = project.commands();
    shell(&project.dir, test, &env);
    let _ = std::fs::remove_file(&wasm);
    shell(&project.dir, build, &env);
    let world = sample::world(2, 6, 2);
    let admitted = admission::admit_file(runtime(), &wasm, Limits::default(), &world)
        .unwrap_or_else(|e| panic!("the new {lang} policy was not admitted: {e:#}"));
    assert!(admitted.actions > 0, "the equal share caps the sample's jobs: {admitted}");
    println!("{admitted}");
}

#[test]
fn a_new_rust_policy_builds_passes_its_test_and_validates_as_written() {
    scaffold_builds_tests_and_validates(Lang::Rust);
}

#[test]
fn a_new_python_policy_builds_passes_its_test_and_validates_as_written() {
    scaffold_builds_tests_and_validates(Lang::Python);
}

#[test]
fn a_new_javascript_policy_builds_passes_its_test_and_validates_as_written() {
    scaffold_builds_tests_and_validates(Lang::Js);
}
