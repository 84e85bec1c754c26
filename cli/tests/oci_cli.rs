//! `wasmsched push` and `wasmsched pull`, `key generate`, `sign` and `verify`, and the
//! SchedulingPolicy commands (`crd`, `rollback --resource`), as a person runs them: what they print, their exit status, and the refusals that need no registry. The
//! round trips run against the registry `WASMSCHED_REGISTRY` names (`.ci/registry start`), and
//! say SKIPPED without one.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn wasmsched(args: &[&str], dir: &Path, stdin: Option<&str>) -> Output {
    wasmsched_with(args, dir, stdin, &[])
}

fn wasmsched_with(args: &[&str], dir: &Path, stdin: Option<&str>, env: &[(&str, &str)]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_wasmsched"))
        .args(args)
        .current_dir(dir)
        // A Docker config of the test's own (none, unless the test writes one).
        .env("DOCKER_CONFIG", dir.join(".docker"))
        .env("RUST_LOG", "error")
        .env_remove("COSIGN_PASSWORD")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    drop(input);
    child.wait_with_output().unwrap()
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn a_core_module_is_refused_with_what_to_build_and_nothing_is_asked_of_the_registry() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("module.wasm"), b"\0asm\x01\0\0\0").unwrap();
    // Port 1: nothing listens there; the refusal must come before any connection.
    let out = wasmsched(&["push", "module.wasm", "127.0.0.1:1/policies/module:v1"], dir.path(), None);
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success() && stdout.is_empty(), "{stdout}{stderr}");
    assert!(stderr.contains("core module") && stderr.contains("--target wasm32-wasip2"), "{stderr}");
}

#[test]
fn a_credential_helper_that_is_not_installed_is_named_before_any_connection() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join(".docker")).unwrap();
    let config = r#"{"credHelpers": {"registry.invalid": "wasmsched-test-absent"}}"#;
    std::fs::write(dir.path().join(".docker/config.json"), config).unwrap();
    let out = wasmsched(&["pull", "registry.invalid/policies/p:v1"], dir.path(), None);
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(stderr.contains("credential helper") && stderr.contains("registry.invalid"), "{stderr}");
    assert!(stderr.contains("--username and --password-stdin"), "{stderr}");
}

#[test]
fn an_empty_password_on_stdin_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = wasmsched(&["pull", "127.0.0.1:1/p/x:v1", "--username", "u", "--password-stdin"], dir.path(), Some("\n"));
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(stderr.contains("--password-stdin read no password"), "{stderr}");
}

#[test]
fn push_prints_the_digest_and_pull_writes_the_file_under_its_pushed_name() {
    let Some(registry) = std::env::var("WASMSCHED_REGISTRY").ok().filter(|r| !r.trim().is_empty()) else {
        eprintln!(
            "SKIPPED push and pull on the command line: no OCI registry (WASMSCHED_REGISTRY; `.ci/registry start`)"
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let policy = Path::new(wasmsched_test_artifacts::path("fair-share"));
    let name = policy.file_name().unwrap().to_str().unwrap();
    std::fs::copy(policy, dir.path().join(name)).unwrap();
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
    let reference = format!("{registry}/wasmsched-tests/cli-{}-{stamp}:v1", std::process::id());

    let out = wasmsched(&["push", name, &reference], dir.path(), None);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    let line = stdout.trim();
    let digest = line.strip_prefix(&format!("pushed {reference}@")).unwrap_or_else(|| panic!("{line}"));
    assert!(digest.starts_with("sha256:") && digest.len() == 71, "{line}");

    let pulled = dir.path().join("pulled");
    std::fs::create_dir(&pulled).unwrap();
    let out = wasmsched(&["pull", &format!("{reference}@{digest}")], &pulled, None);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.starts_with(&format!("pulled {reference}@{digest} to {name} (")), "{stdout}");
    assert_eq!(std::fs::read(pulled.join(name)).unwrap(), std::fs::read(policy).unwrap());

    let out = wasmsched(&["pull", &reference, "-o", "chosen.wasm"], &pulled, None);
    assert!(out.status.success(), "{:?}", text(&out));
    assert_eq!(std::fs::read(pulled.join("chosen.wasm")).unwrap(), std::fs::read(policy).unwrap());
    // A folder: the file goes into it under its pushed name.
    std::fs::create_dir(pulled.join("policies")).unwrap();
    let out = wasmsched(&["pull", &reference, "-o", "policies"], &pulled, None);
    assert!(out.status.success(), "{:?}", text(&out));
    assert_eq!(std::fs::read(pulled.join("policies").join(name)).unwrap(), std::fs::read(policy).unwrap());
}

#[test]
fn a_blob_signed_with_a_generated_key_verifies_and_a_changed_one_is_refused_with_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let password = [("COSIGN_PASSWORD", "pw")];
    let out = wasmsched_with(&["key", "generate", "release"], dir.path(), None, &password);
    assert!(out.status.success(), "{:?}", text(&out));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("release.key")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let again = wasmsched_with(&["key", "generate", "release"], dir.path(), None, &password);
    assert!(!again.status.success() && text(&again).1.contains("release.key exists"), "{:?}", text(&again));

    std::fs::write(dir.path().join("policy.wasm"), b"policy bytes").unwrap();
    let sign = ["sign", "--blob", "policy.wasm", "--key", "release.key", "-o", "policy.wasm.sig"];
    let out = wasmsched_with(&sign, dir.path(), None, &password);
    assert!(out.status.success(), "{:?}", text(&out));
    let verify = ["verify", "--blob", "policy.wasm", "--signature", "policy.wasm.sig", "--key", "release.pub"];
    let out = wasmsched(&verify, dir.path(), None);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success() && stdout.starts_with("verified policy.wasm: signed by sha256:"), "{stdout}{stderr}");

    std::fs::write(dir.path().join("policy.wasm"), b"policy bytes, changed").unwrap();
    let out = wasmsched(&verify, dir.path(), None);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("refused policy.wasm: the blob is not trusted"), "{stderr}");
    // The wrong password: an error (exit 2), not a refusal.
    let out = wasmsched_with(&sign, dir.path(), None, &[("COSIGN_PASSWORD", "wrong")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).1.contains("COSIGN_PASSWORD"), "{:?}", text(&out));
}

#[test]
fn key_generate_push_sign_and_verify_on_the_command_line() {
    let Some(registry) = std::env::var("WASMSCHED_REGISTRY").ok().filter(|r| !r.trim().is_empty()) else {
        eprintln!(
            "SKIPPED sign and verify on the command line: no OCI registry (WASMSCHED_REGISTRY; `.ci/registry start`)"
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let password = [("COSIGN_PASSWORD", "pw")];
    let policy = wasmsched_test_artifacts::path("fifo");
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
    let reference = format!("{registry}/wasmsched-tests/cli-sign-{}-{stamp}:v1", std::process::id());
    assert!(wasmsched_with(&["key", "generate", "release"], dir.path(), None, &password).status.success());
    let out = wasmsched(&["push", policy, &reference], dir.path(), None);
    assert!(out.status.success(), "{:?}", text(&out));
    let digest = text(&out).0.trim().rsplit_once('@').unwrap().1.to_string();

    // Unsigned: refused, exit 1, with how to sign it.
    let out = wasmsched(&["verify", &reference, "--key", "release.pub"], dir.path(), None);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("is not signed") && stderr.contains("wasmsched sign"), "{stderr}");

    // A tag is resolved to its digest, and that is said.
    let out =
        wasmsched_with(&["sign", &reference, "--key", "release.key", "-a", "env=prod"], dir.path(), None, &password);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stderr.contains(&format!("is a tag: it names {digest} now")), "{stderr}");
    assert!(stdout.starts_with(&format!("signed {reference}@{digest} (signature ")), "{stdout}");

    std::fs::write(
        dir.path().join("trust.toml"),
        "[trust]\n[[trust.all-of]]\nkind = \"public-key\"\nname = \"release\"\nkey = \"release.pub\"\nannotations = { env = \"prod\" }\n",
    )
    .unwrap();
    let pinned = format!("{reference}@{digest}");
    let out = wasmsched(&["verify", &pinned, "--trust", "trust.toml"], dir.path(), None);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(stdout.trim(), format!("verified {reference}@{digest}: signed by release (1 signature found)"));
}

#[test]
fn a_resource_rollback_without_a_cluster_says_how_to_name_one() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-kubeconfig");
    let out =
        wasmsched(&["rollback", "flowcon", "--resource", "--kubeconfig", missing.to_str().unwrap()], dir.path(), None);
    let (_, err) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--kubeconfig") && err.contains("no-kubeconfig"), "{err}");
    let out = wasmsched(&["rollback", "flowcon", "--namespace", "x"], dir.path(), None);
    assert!(!out.status.success() && text(&out).1.contains("--resource"), "--namespace needs --resource");
}

#[test]
fn the_shipped_crd_is_what_wasmsched_crd_prints() {
    let dir = tempfile::tempdir().unwrap();
    let out = wasmsched(&["crd"], dir.path(), None);
    assert!(out.status.success(), "{}", text(&out).1);
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/kubernetes/crd.yaml");
    let shipped = std::fs::read_to_string(path).unwrap();
    assert_eq!(
        text(&out).0,
        shipped,
        "examples/kubernetes/crd.yaml is out of date: `cargo run -- crd > examples/kubernetes/crd.yaml`"
    );
}
