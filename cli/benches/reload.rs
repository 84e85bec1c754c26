//! Hot reload speed: from a policy file landing in the watched directory (renamed into place)
//! to the new version serving, through the whole path — the watcher and its debounce (10 ms
//! here; 50 ms by default), reading and hashing the file, admission (compile or cache hit,
//! `init`, a dry-run `decide` on the latest snapshot) and the swap at the next tick boundary.
//!
//! - `reload/cache-hit`: two versions land in turn, so after the first round each is in the
//!   compiled-component cache (the goal: ≤ 100 ms);
//! - `reload/compile`: every version is new, so each is compiled.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use wasmsched::config::HostConfig;
use wasmsched::host::{Host, HostHandle};
use wasmsched::runtime::{Runtime, RuntimeConfig};
use wasmsched::scenario::Scenario;
use wasmsched::status::StatusBoard;

const WORKLOAD: &str = "name = \"bench\"\n[[node]]\nname = \"n0\"\ncores = 16\nmemory = \"64GiB\"\n\
                        [[job]]\nname = \"svc\"\nmodel = \"bert\"\nkind = \"inference\"\narrival = \"0s\"\n\
                        request-rate = 20\nduration = \"10000h\"\n";

/// The fair-share component with a custom section appended: another sha256, the same code.
fn variant(n: u64) -> Vec<u8> {
    let mut bytes = std::fs::read(wasmsched_test_artifacts::path("fair-share")).unwrap();
    let name = b"wasmsched-bench-variant";
    let mut body = vec![name.len() as u8];
    body.extend_from_slice(name);
    body.extend_from_slice(&n.to_le_bytes());
    bytes.push(0);
    let mut len = body.len() as u32;
    loop {
        let byte = (len & 0x7f) as u8;
        len >>= 7;
        if len == 0 {
            bytes.push(byte);
            break;
        }
        bytes.push(byte | 0x80);
    }
    bytes.extend(body);
    bytes
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

fn land(dir: &Path, bytes: &[u8]) {
    let tmp = dir.join(".fs.wasm.tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, dir.join("fs.wasm")).unwrap();
}

/// Land `bytes` and wait until they serve.
fn swap(dir: &Path, board: &StatusBoard, bytes: &[u8]) -> Duration {
    let want = sha256(bytes);
    let started = Instant::now();
    land(dir, bytes);
    board
        .wait_until(Duration::from_secs(60), |s| s.policy("fs").and_then(|p| p.sha256.as_deref()) == Some(&want))
        .expect("the new version serves");
    started.elapsed()
}

fn reload(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("policies");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(tmp.path().join("workload.toml"), WORKLOAD).unwrap();
    let config_path = tmp.path().join("host.toml");
    std::fs::write(
        &config_path,
        "tick = \"100ms\"\npolicies-dir = \"policies\"\n[backend]\nkind = \"sim\"\nworkload = \"workload.toml\"\n\
         [reload]\ndebounce = \"10ms\"\n[api]\nenabled = false\n[policy.fs]\n",
    )
    .unwrap();
    let rt: &'static Runtime = Box::leak(Box::new(
        Runtime::new(RuntimeConfig { cache_dir: Some(tmp.path().join("cache")), ..RuntimeConfig::default() }).unwrap(),
    ));
    land(&dir, &variant(0));
    let host = Host::new(HostConfig::load(&config_path).unwrap(), Scenario::load_workload).unwrap();
    let handle: HostHandle = host.handle();
    let board: Arc<StatusBoard> = handle.board().clone();
    let thread = std::thread::spawn(move || host.run(rt));
    board.wait_until(Duration::from_secs(60), |s| s.ticks > 0).expect("the host ticks");

    let mut group = c.benchmark_group("reload");
    group.sample_size(20).measurement_time(Duration::from_secs(10));
    let hits = [variant(1), variant(2)];
    for v in &hits {
        swap(&dir, &board, v);
    }
    let mut turn = 1;
    group.bench_function("cache-hit", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    turn += 1;
                    swap(&dir, &board, &hits[turn % 2])
                })
                .sum()
        })
    });
    let mut fresh = 1000;
    group.sample_size(10);
    group.bench_function("compile", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    fresh += 1;
                    swap(&dir, &board, &variant(fresh))
                })
                .sum()
        })
    });
    group.finish();
    handle.stop();
    thread.join().unwrap().unwrap();
}

criterion_group!(benches, reload);
criterion_main!(benches);
