//! The tests' Docker Engine: found, not started (`.ci/docker-engine start` starts one), and
//! the training job's image built on it from this repo's trainer, FROM scratch.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters as q;
use futures_util::StreamExt;

/// A reachable engine and a runtime to talk to it.
pub struct Engine {
    pub endpoint: String,
    pub client: Docker,
    pub rt: tokio::runtime::Runtime,
    image: OnceLock<Option<String>>,
    busybox: OnceLock<Option<String>>,
}

/// The engine the tests use, or None (and a loud line saying why) when none answers.
pub fn engine() -> Option<&'static Engine> {
    static ENGINE: OnceLock<Option<Engine>> = OnceLock::new();
    ENGINE
        .get_or_init(|| {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            let mut tried = Vec::new();
            let candidates = [
                std::env::var("WASMSCHED_DOCKER").ok(),
                Some("unix:///tmp/wasmsched-docker/docker.sock".into()),
                std::env::var("DOCKER_HOST").ok(),
                Some("unix:///var/run/docker.sock".into()),
            ];
            for endpoint in candidates.into_iter().flatten().filter(|e| e.starts_with("unix://")) {
                tried.push(endpoint.clone());
                let Ok(client) = Docker::connect_with_unix(&endpoint, 10, bollard::API_DEFAULT_VERSION) else {
                    continue;
                };
                let answered = rt.block_on(async {
                    let client =
                        tokio::time::timeout(Duration::from_secs(3), client.negotiate_version()).await.ok()?.ok()?;
                    client.ping().await.ok().map(|_| client)
                });
                if let Some(client) = answered {
                    return Some(Engine { endpoint, client, rt, image: OnceLock::new(), busybox: OnceLock::new() });
                }
            }
            eprintln!(
                "SKIPPED: the live backend's tests need a Docker Engine and none answers (tried {}). \
                 `.ci/docker-engine start` starts one and prints its endpoint; export it as WASMSCHED_DOCKER.",
                tried.join(", ")
            );
            None
        })
        .as_ref()
}

/// The engine, or return from the test after saying it is skipped.
macro_rules! engine_or_skip {
    () => {
        match crate::engine::engine() {
            Some(e) => e,
            None => {
                eprintln!("SKIPPED {}: no Docker Engine", module_path!());
                return;
            }
        }
    };
}
pub(crate) use engine_or_skip;

/// The engine with the trainer's image built on it, and the lock that runs the live tests one
/// at a time; or return from the test after saying why it is skipped.
macro_rules! trainer_engine_or_skip {
    () => {{
        let e = crate::engine::engine_or_skip!();
        let serial = crate::engine::serial();
        if e.trainer_image().is_none() {
            return;
        }
        (e, serial)
    }};
}
pub(crate) use trainer_engine_or_skip;

/// A second engine of the test's own, started with `.ci/docker-engine` (so it needs root and
/// dockerd, like the first); stopped, with its containers removed, on drop.
pub struct SecondEngine {
    pub endpoint: String,
    pub client: Docker,
    first: &'static Engine,
    dir: String,
}

impl SecondEngine {
    /// Start one, or None (said loudly) where that cannot be done.
    pub fn start(first: &'static Engine) -> Option<SecondEngine> {
        let dir = format!("/tmp/wasmsched-docker-second-{}", std::process::id());
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../.ci/docker-engine");
        let out = std::process::Command::new(script).arg("start").env("WASMSCHED_DOCKER_DIR", &dir).output();
        let endpoint = match out {
            Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
            other => {
                eprintln!("SKIPPED: a second Docker Engine could not be started ({other:?})");
                return None;
            }
        };
        let client = Docker::connect_with_unix(&endpoint, 10, bollard::API_DEFAULT_VERSION).ok()?;
        let client = first.rt.block_on(client.negotiate_version()).ok()?;
        Some(SecondEngine { endpoint, client, first, dir })
    }

    /// The ids of its running containers.
    pub fn running(&self) -> Vec<String> {
        let listed = self.first.rt.block_on(self.client.list_containers(None::<q::ListContainersOptions>));
        listed.unwrap_or_default().into_iter().filter_map(|c| c.id).collect()
    }
}

impl Drop for SecondEngine {
    /// Remove its containers, stop it and delete its files, pass or fail.
    fn drop(&mut self) {
        let e = self.first;
        let all = q::ListContainersOptions { all: true, ..Default::default() };
        for c in e.rt.block_on(self.client.list_containers(Some(all))).unwrap_or_default() {
            let force = q::RemoveContainerOptions { force: true, ..Default::default() };
            let _ = e.rt.block_on(self.client.remove_container(c.id.as_deref().unwrap_or(""), Some(force)));
        }
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../.ci/docker-engine");
        let _ = std::process::Command::new(script).arg("stop").env("WASMSCHED_DOCKER_DIR", &self.dir).status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The live tests share one engine and two cores: one at a time.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

impl Engine {
    /// The training job's image (`wasmsched-trainer:<digest>`), imported once from the static
    /// binary the test artifacts build made; None (said loudly) when there is no such binary.
    pub fn trainer_image(&self) -> Option<&str> {
        self.image
            .get_or_init(|| {
                let Some(path) = wasmsched_test_artifacts::TRAINER else {
                    eprintln!("SKIPPED: no static trainer binary was built on this host");
                    return None;
                };
                let binary = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
                Some(self.import("wasmsched-trainer", &[("wasmsched-trainer", &binary)]))
            })
            .as_deref()
    }

    /// An image with a static busybox as `/bin/sh`, for containers that print what a test
    /// needs; None (said loudly) without Debian's busybox-static.
    pub fn busybox_image(&self) -> Option<&str> {
        self.busybox
            .get_or_init(|| {
                let binary = std::fs::read("/bin/busybox").ok().filter(|_| is_static("/bin/busybox"));
                let Some(binary) = binary else {
                    eprintln!("SKIPPED: no static /bin/busybox (Debian's busybox-static) to build a shell image from");
                    return None;
                };
                Some(self.import("wasmsched-busybox", &[("bin/sh", &binary)]))
            })
            .as_deref()
    }

    /// Import a root filesystem of `files` (and empty `/tmp`, `/ckpt`) as `repo:<digest>`,
    /// unless the engine has it already.
    fn import(&self, repo: &str, files: &[(&str, &[u8])]) -> String {
        let rootfs = rootfs(files);
        let tag = hex::encode(&<sha2::Sha256 as sha2::Digest>::digest(&rootfs)[..6]);
        let image = format!("{repo}:{tag}");
        if self.rt.block_on(self.client.inspect_image(&image)).is_ok() {
            return image;
        }
        let options = q::CreateImageOptions {
            from_src: Some("-".into()),
            repo: Some(repo.into()),
            tag: Some(tag),
            ..Default::default()
        };
        self.rt.block_on(async {
            let mut steps = self.client.create_image(Some(options), Some(bollard::body_full(rootfs.into())), None);
            while let Some(step) = steps.next().await {
                step.expect("the engine imports the root filesystem");
            }
        });
        image
    }

    /// Start a managed container running `sh -c script` in the busybox image.
    pub fn start_shell(&self, name: &str, labels: &[(&str, &str)], script: &str) -> Container<'_> {
        let image = self.busybox_image().expect("checked by the caller").to_string();
        self.start(&image, name, labels, vec!["/bin/sh".into(), "-c".into(), script.into()], None)
    }

    /// Start a managed training container; it is removed when the returned guard drops.
    pub fn start_trainer(
        &self,
        name: &str,
        labels: &[(&str, &str)],
        args: &[&str],
        cpus: Option<f64>,
    ) -> Container<'_> {
        let image = self.trainer_image().expect("checked by the caller").to_string();
        let mut cmd = vec!["/wasmsched-trainer".to_string()];
        cmd.extend(args.iter().map(|a| a.to_string()));
        self.start(&image, name, labels, cmd, cpus)
    }

    /// Create a managed training container and leave it created (a queued job); it is
    /// removed when the returned guard drops.
    pub fn create_trainer(&self, name: &str, labels: &[(&str, &str)], args: &[&str]) -> Container<'_> {
        let image = self.trainer_image().expect("checked by the caller").to_string();
        let mut cmd = vec!["/wasmsched-trainer".to_string()];
        cmd.extend(args.iter().map(|a| a.to_string()));
        self.create(&image, name, labels, cmd, None, false)
    }

    fn start(
        &self,
        image: &str,
        name: &str,
        labels: &[(&str, &str)],
        cmd: Vec<String>,
        cpus: Option<f64>,
    ) -> Container<'_> {
        self.create(image, name, labels, cmd, cpus, true)
    }

    fn create(
        &self,
        image: &str,
        name: &str,
        labels: &[(&str, &str)],
        cmd: Vec<String>,
        cpus: Option<f64>,
        start: bool,
    ) -> Container<'_> {
        let name = format!("wst-{}-{name}", std::process::id());
        let mut all_labels: HashMap<String, String> = HashMap::from([("wasmsched.managed".into(), "true".into())]);
        all_labels.extend(labels.iter().map(|(k, v)| (format!("wasmsched.{k}"), v.to_string())));
        let body = ContainerCreateBody {
            image: Some(image.to_string()),
            cmd: Some(cmd),
            labels: Some(all_labels),
            host_config: Some(HostConfig {
                network_mode: Some("none".into()),
                init: Some(true),
                nano_cpus: cpus.map(|c| (c * 1e9) as i64),
                ..Default::default()
            }),
            ..Default::default()
        };
        let id = self.rt.block_on(async {
            let _ = self
                .client
                .remove_container(&name, Some(q::RemoveContainerOptions { force: true, ..Default::default() }))
                .await;
            let created = self
                .client
                .create_container(
                    Some(q::CreateContainerOptions { name: Some(name.clone()), ..Default::default() }),
                    body,
                )
                .await
                .expect("the engine creates the container");
            if start {
                self.client.start_container(&created.id, None).await.expect("the engine starts the container");
            }
            created.id
        });
        Container { engine: self, id, name }
    }

    /// `docker inspect`'s CPU limit of a container, in cores (0 when none).
    pub fn cpus(&self, id: &str) -> f64 {
        let info = self.rt.block_on(self.client.inspect_container(id, None)).expect("inspect");
        info.host_config.and_then(|h| h.nano_cpus).unwrap_or(0) as f64 / 1e9
    }

    /// Every container (in any state) of a test's `wasmsched.test` label: id, state, name
    /// and labels.
    pub fn labelled(&self, label: &str) -> Vec<Listed> {
        let filters = HashMap::from([("label".to_string(), vec![format!("wasmsched.test={label}")])]);
        let options = q::ListContainersOptions { all: true, filters: Some(filters), ..Default::default() };
        let listed = self.rt.block_on(self.client.list_containers(Some(options))).expect("list");
        listed
            .into_iter()
            .map(|c| Listed {
                id: c.id.unwrap_or_default(),
                state: c.state.map(|s| s.to_string()).unwrap_or_default(),
                name: c.names.and_then(|n| n.into_iter().next()).unwrap_or_default().trim_start_matches('/').into(),
                labels: c.labels.unwrap_or_default(),
            })
            .collect()
    }

    /// A guard that removes every container of a test's label on drop, pass or fail: the
    /// copies the host makes of a container (to place or preempt it) have ids of their own.
    pub fn sweep(&self, label: &str) -> Sweep<'_> {
        Sweep { engine: self, label: label.to_string() }
    }

    /// A container's stdout so far, line by line.
    pub fn logs(&self, id: &str) -> Vec<String> {
        self.rt.block_on(async {
            let options = q::LogsOptions { stdout: true, ..Default::default() };
            let mut stream = self.client.logs(id, Some(options));
            let mut text = String::new();
            while let Some(Ok(chunk)) = stream.next().await {
                text.push_str(&String::from_utf8_lossy(&chunk.into_bytes()));
            }
            text.lines().map(str::to_string).collect()
        })
    }
}

/// A container the test started; force-removed on drop, pass or fail.
pub struct Container<'a> {
    engine: &'a Engine,
    pub id: String,
    pub name: String,
}

impl Container<'_> {
    /// Remove it now (a container vanishing under the host).
    pub fn remove(&self) {
        let options = q::RemoveContainerOptions { force: true, ..Default::default() };
        let _ = self.engine.rt.block_on(self.engine.client.remove_container(&self.id, Some(options)));
    }

    /// The epoch times (`time_s`) the trainer printed so far.
    pub fn epoch_times(&self) -> Vec<f64> {
        self.engine
            .logs(&self.id)
            .iter()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()?.get("time_s")?.as_f64())
            .collect()
    }
}

impl Drop for Container<'_> {
    fn drop(&mut self) {
        self.remove();
    }
}

/// One container as [`Engine::labelled`] lists it.
#[derive(Debug)]
pub struct Listed {
    pub id: String,
    /// `created`, `running`, `exited`…
    pub state: String,
    pub name: String,
    pub labels: HashMap<String, String>,
}

/// Removes a test's containers on drop; see [`Engine::sweep`].
pub struct Sweep<'a> {
    engine: &'a Engine,
    label: String,
}

impl Drop for Sweep<'_> {
    fn drop(&mut self) {
        let e = self.engine;
        let filters = HashMap::from([("label".to_string(), vec![format!("wasmsched.test={}", self.label)])]);
        let options = q::ListContainersOptions { all: true, filters: Some(filters), ..Default::default() };
        for c in e.rt.block_on(e.client.list_containers(Some(options))).unwrap_or_default() {
            let force = q::RemoveContainerOptions { force: true, ..Default::default() };
            let _ = e.rt.block_on(e.client.remove_container(c.id.as_deref().unwrap_or(""), Some(force)));
        }
    }
}

/// A root filesystem with `files` (path, bytes; executable) and empty `/tmp` and `/ckpt`.
fn rootfs(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut tar = tar::Builder::new(Vec::new());
    for dir in ["tmp/", "ckpt/", "bin/"] {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Directory);
        header.set_mode(0o1777);
        header.set_size(0);
        tar.append_data(&mut header, dir, std::io::empty()).unwrap();
    }
    for (path, bytes) in files {
        let mut header = tar::Header::new_gnu();
        header.set_mode(0o755);
        header.set_size(bytes.len() as u64);
        tar.append_data(&mut header, path, *bytes).unwrap();
    }
    tar.into_inner().unwrap()
}

/// Whether an ELF file has no interpreter (links nothing at run time).
fn is_static(path: &str) -> bool {
    std::process::Command::new("ldd")
        .arg(path)
        .output()
        .map(|o| !o.status.success() || String::from_utf8_lossy(&o.stdout).contains("not a dynamic"))
        .unwrap_or(false)
}

/// Wait until `ready` holds, polling; panics with `what` after `limit`.
pub fn eventually<T>(what: &str, limit: Duration, mut ready: impl FnMut() -> Option<T>) -> T {
    let start = std::time::Instant::now();
    loop {
        if let Some(v) = ready() {
            return v;
        }
        assert!(start.elapsed() < limit, "waited {limit:?} for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}
