//! `wasmsched simulate` and `compare` as a person runs them: the table, the JSON a script
//! reads, the report a browser opens, and a clear refusal of every malformed workload.

use std::path::Path;
use std::process::{Command, Output, Stdio};

fn wasmsched(args: &[&str], cache: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasmsched"))
        .args(args)
        .arg("--cache-dir")
        .arg(cache)
        // Generous: a loaded test machine must not turn a slow call into a fallback.
        .args(["--deadline-ms", "1000"])
        .env("RUST_LOG", "error")
        .output()
        .expect("the binary runs")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn scenario(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios").join(name).display().to_string()
}

#[test]
fn compare_prints_one_table_and_writes_json_and_a_report() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("runs.json");
    let report = dir.path().join("report");
    let by_path = wasmsched_test_artifacts::path("fair-share");
    let workload = scenario("two-nodes.toml");
    let args = [
        "compare",
        "--workload",
        &workload,
        "--policy",
        "fair-share",
        "--policy",
        by_path,
        "--seeds",
        "2",
        "--json",
        json.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ];
    let out = wasmsched(&args, dir.path());
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    assert!(shown.contains("mean JCT s") && shown.contains("(1.000×)"), "{shown}");

    let value: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let runs = value["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4, "two policies × two seeds");
    let names = |run: &serde_json::Value| -> Vec<String> {
        run["jobs"].as_array().unwrap().iter().map(|j| j["name"].as_str().unwrap().to_string()).collect()
    };
    for run in runs {
        for key in ["policy", "seed", "makespan_s", "mean_jct_s", "satisfied"] {
            assert!(!run[key].is_null(), "{key} missing");
        }
        for job in run["jobs"].as_array().unwrap() {
            for key in ["name", "jct_s", "targets_reached_s", "satisfied", "migrations"] {
                assert!(job.get(key).is_some(), "{key} missing from a job");
            }
        }
        assert_eq!(names(run), names(&runs[0]), "job names are stable across policies and seeds");
    }
    // The same component by name and by path makes the same decisions.
    assert_eq!(runs[0]["makespan_s"], runs[2]["makespan_s"]);

    let page = std::fs::read_to_string(report.join("index.html")).unwrap();
    assert!(page.contains("<svg") && page.contains("fair-share"), "the report draws its pictures inline");
}

#[test]
fn malformed_workloads_are_refused_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("no-model.toml", "[[node]]\ncores = 4\nmemory = \"8GiB\"\n[[job]]\nname = \"a\"\nmodel = \"gpt5\"\n", "gpt5"),
        (
            "late.toml",
            "[[node]]\ncores = 4\nmemory = \"8GiB\"\n[[job]]\nname = \"a\"\nmodel = \"ncf\"\narrival = \"-5s\"\n",
            "negative",
        ),
        ("cols.csv", "name,time,application,batch_size\na,0,cifar10,128\n", "num_replicas"),
        ("neg.csv", "name,time,application,num_replicas,batch_size\na,-3,cifar10,1,128\n", "neg.csv:2: `time`"),
        ("what.json", "{}", ".json"),
    ];
    for (file, body, reason) in cases {
        let path = dir.path().join(file);
        std::fs::write(&path, body).unwrap();
        let out = wasmsched(&["simulate", "--workload", path.to_str().unwrap(), "--policy", "fair-share"], dir.path());
        let shown = text(&out);
        assert_eq!(out.status.code(), Some(2), "{file}: {shown}");
        assert!(shown.contains(file) && shown.contains(reason), "{file}: expected {reason:?} in {shown}");
    }
}

#[test]
fn a_recorded_run_replayed_by_whatif_prints_the_recording_beside_each_policy() {
    let dir = tempfile::tempdir().unwrap();
    let recording = dir.path().join("run.jsonl");
    let (json, report) = (dir.path().join("whatif.json"), dir.path().join("report"));
    let workload = scenario("gpu-queue.toml");
    let recorded = ["simulate", "--workload", &workload, "--policy", "fifo", "--record", recording.to_str().unwrap()];
    let out = wasmsched(&recorded, dir.path());
    assert!(out.status.success(), "{}", text(&out));
    let args = [
        "whatif",
        "--recording",
        recording.to_str().unwrap(),
        "--policy",
        "fifo",
        "--policy",
        "tiresias",
        "--json",
        json.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ];
    let out = wasmsched(&args, dir.path());
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    assert!(
        shown.contains("| recorded (fifo) |") && shown.contains("| fifo |") && shown.contains("| tiresias |"),
        "{shown}"
    );
    assert!(shown.contains("| cifar-0 | default | cifar10 tables ×"), "each job with what its speed rests on: {shown}");
    let value: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(value["kind"], "compare");
    let jobs = value["recorded"]["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 10);
    assert_eq!(jobs[0]["speed"]["source"], "tables");
    assert_eq!(value["runs"][0]["jobs"][0]["name"], jobs[0]["name"], "the runs' jobs in the recording's order");
    let html = std::fs::read_to_string(report.join("index.html")).unwrap();
    assert!(html.contains("Recorded and replayed") && html.contains("cifar10 tables"), "the report's table");
}

#[test]
fn a_recording_whatif_cannot_read_is_refused_with_where_and_why() {
    let dir = tempfile::tempdir().unwrap();
    let header = r#"{"format":"wasmsched-telemetry/1","tick_ms":1000}"#;
    let cases = [
        ("missing.jsonl", None, "cannot use"),
        ("empty.jsonl", Some(String::new()), "the recording is empty"),
        ("garbage.jsonl", Some(format!("{header}\nnot json at all\n")), "line 2"),
        ("nothing.jsonl", Some(format!("{header}\n")), "shows no node"),
        ("other.jsonl", Some("{\"format\":\"something-else\",\"tick_ms\":1}\n".into()), "this host reads"),
    ];
    for (file, body, reason) in cases {
        let path = dir.path().join(file);
        if let Some(body) = body {
            std::fs::write(&path, body).unwrap();
        }
        let out = wasmsched(&["whatif", "--recording", path.to_str().unwrap(), "--policy", "fifo"], dir.path());
        let shown = text(&out);
        assert_eq!(out.status.code(), Some(2), "{file}: {shown}");
        assert!(shown.contains(file) && shown.contains(reason), "{file}: expected {reason:?} in {shown}");
    }
}

#[test]
fn an_unknown_policy_is_refused_with_the_shipped_names() {
    let dir = tempfile::tempdir().unwrap();
    let workload = scenario("demo.toml");
    let out = wasmsched(&["simulate", "--workload", &workload, "--policy", "flowkon"], dir.path());
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(2), "{shown}");
    assert!(shown.contains("flowkon") && shown.contains("fair-share"), "{shown}");
}

#[test]
fn a_round_based_policy_is_benched_for_its_rounds_unless_the_stall_rule_waits_longer() {
    let dir = tempfile::tempdir().unwrap();
    let workload = Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/workloads/sia/philly/workload-1.csv");
    let workload = workload.display().to_string();
    let run = |extra: &[&str]| {
        let json = dir.path().join("gavel.json");
        let mut args = vec!["compare", "--workload", &workload, "--cluster", "homogeneous-64", "--tuned-jobs"];
        args.extend(["--policy", "gavel", "--tick", "60s", "--seeds", "1", "--no-default-targets", "--limit", "60"]);
        args.extend(["--json", json.to_str().unwrap()]);
        args.extend(extra);
        let out = wasmsched(&args, dir.path());
        assert!(out.status.success(), "{}", text(&out));
        let runs: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        runs["runs"][0].clone()
    };
    // Gavel plans once per 360 s round: at the default 60 s the host starts the jobs it keeps
    // waiting between rounds, and benches it.
    let default = run(&[]);
    assert!(default["benched"].is_string(), "{default}");
    let patient = run(&["--stall-after", "13m"]);
    assert!(patient.get("benched").is_none() && patient.get("rescues").is_none(), "{patient}");
}

/// `simulate` with the `misbehave` fixture doing `behaviour`, every log line shown, its output
/// handled by `io`.
fn misbehaving(behaviour: &str, cache: &Path, io: impl FnOnce(&mut Command)) -> Command {
    let policy = format!("{}:behaviour={behaviour}", wasmsched_test_artifacts::path("misbehave"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_wasmsched"));
    cmd.args(["simulate", "--workload", &scenario("demo.toml"), "--policy", &policy, "--cache-dir"])
        .arg(cache)
        .env("RUST_LOG", "info");
    io(&mut cmd);
    cmd
}

#[test]
fn a_policy_flooding_its_log_on_every_call_leaves_a_few_kilobytes_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = misbehaving("log-flood", dir.path(), |_| {}).output().expect("the binary runs");
    assert!(out.status.success(), "{}", text(&out));
    let log = String::from_utf8_lossy(&out.stderr);
    // Ten thousand lines a call, hundreds of calls: its minute's budget, and one line saying how
    // many were dropped.
    assert!(log.len() < 16 << 10, "{} bytes of log", log.len());
    assert!(log.contains("over its log budget (60 lines, 8192 bytes a minute)"), "{log}");
    assert!(log.contains("of its log lines (") && log.contains("bytes) in a minute"), "{log}");
}

#[test]
fn a_closed_stdout_and_stderr_end_the_run_with_status_1_and_no_panic() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = misbehaving("log-flood", dir.path(), |c| {
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
    })
    .spawn()
    .expect("the binary starts");
    // The reader goes away at once, as `2>&1 | head -c 0` does.
    drop(child.stdout.take());
    drop(child.stderr.take());
    let status = child.wait().expect("it ends");
    assert_eq!(status.code(), Some(1), "the results could not be written: status 1, not a panic (101)");
}
