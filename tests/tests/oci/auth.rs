//! Credentials against a registry that asks for them: a second docker-registry, started by the
//! test with htpasswd authentication (user `ann`, password `s3cret`), on loopback, stopped when
//! the test ends. Runs where the set-up names a registry (so the package is installed), and
//! says SKIPPED where its binary is absent or it does not start.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use wasmsched::oci::{self, Auth, Credentials, OciError, RegistryOptions};

use super::{anonymous, block_on, component, registry};

/// `ann:s3cret`, bcrypt (cost 4), as `htpasswd -B` writes it.
const HTPASSWD: &str = "ann:$2b$04$q4quMZ2YPYzEYjUN9jzRqepP6BxPaSVUsEaDvRrismg0VyB6DRH3G\n";

/// A docker-registry that asks credentials; stopped on drop.
struct AuthRegistry {
    child: Child,
    address: String,
    dir: tempfile::TempDir,
}

impl AuthRegistry {
    fn start() -> Result<AuthRegistry, String> {
        let binary = std::env::var_os("PATH")
            .into_iter()
            .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
            .chain([PathBuf::from("/usr/bin")])
            .map(|dir| dir.join("docker-registry"))
            .find(|p| p.is_file())
            .ok_or("no docker-registry binary (apt-get install docker-registry; `.ci/registry start` does)")?;
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let port =
            std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map_err(|e| e.to_string())?.port();
        let address = format!("127.0.0.1:{port}");
        std::fs::write(dir.path().join("htpasswd"), HTPASSWD).map_err(|e| e.to_string())?;
        let config = format!(
            "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {root}\n\
             http:\n  addr: {address}\n  secret: wasmsched-tests-only\nauth:\n  htpasswd:\n    realm: wasmsched-tests\n    path: {htpasswd}\n",
            root = dir.path().join("data").display(),
            htpasswd = dir.path().join("htpasswd").display(),
        );
        let config_path = dir.path().join("config.yml");
        std::fs::write(&config_path, config).map_err(|e| e.to_string())?;
        let log = std::fs::File::create(dir.path().join("registry.log")).map_err(|e| e.to_string())?;
        let child = Command::new(&binary)
            .arg("serve")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("{} does not start: {e}", binary.display()))?;
        let registry = AuthRegistry { child, address, dir };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if registry.asks_credentials() {
                return Ok(registry);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let log = std::fs::read_to_string(registry.dir.path().join("registry.log")).unwrap_or_default();
        Err(format!("the registry did not answer on {} within 20 s; its log: {log}", registry.address))
    }

    /// Whether GET /v2/ answers 401 with a Basic challenge.
    fn asks_credentials(&self) -> bool {
        let Ok(mut stream) = std::net::TcpStream::connect(&self.address) else { return false };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        if stream.write_all(b"GET /v2/ HTTP/1.0\r\n\r\n").is_err() {
            return false;
        }
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        let status = answer.lines().next().unwrap_or("");
        status.starts_with("HTTP/") && status.contains(" 401 ") && answer.contains("Basic realm")
    }
}

impl Drop for AuthRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn basic(user: &str, password: &str) -> RegistryOptions {
    RegistryOptions { insecure: false, auth: Auth::Basic { username: user.into(), password: password.into() } }
}

#[test]
fn a_registry_that_asks_credentials_refuses_none_and_wrong_ones_and_takes_the_right_ones() {
    let Some(_) = registry("oci with credentials") else { return };
    let auth_registry = match AuthRegistry::start() {
        Ok(r) => r,
        Err(why) => {
            eprintln!("SKIPPED oci with credentials: {why}");
            return;
        }
    };
    let address = auth_registry.address.clone();
    let reference = format!("{address}/wasmsched-tests/auth:v1");
    let (path, bytes) = component("fair-share");
    let out: &Path = &auth_registry.dir.path().join("pulled.wasm");
    block_on(async {
        let err = oci::push(path, &reference, &anonymous()).await.unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, OciError::Unauthorized { user: None, .. }), "{text}");
        assert!(text.contains("without credentials") && text.contains(&format!("docker login {address}")), "{text}");

        let err = oci::push(path, &reference, &basic("ann", "wrong")).await.unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, OciError::Unauthorized { user: Some(ref u), .. } if u == "ann"), "{text}");
        assert!(text.contains("as ann") && text.contains("check the password"), "{text}");

        oci::push(path, &reference, &basic("ann", "s3cret")).await.unwrap();

        // Docker's config, as `docker login` writes it: base64 of `ann:s3cret`.
        let config = auth_registry.dir.path().join("config.json");
        std::fs::write(&config, format!(r#"{{"auths": {{"{address}": {{"auth": "YW5uOnMzY3JldA=="}}}}}}"#)).unwrap();
        let credentials = oci::auth::from_docker_config(&config, &address).unwrap();
        let Credentials::Basic(username, password) = credentials else { panic!("no credentials read from {config:?}") };
        let options = RegistryOptions { insecure: false, auth: Auth::Basic { username, password } };
        let pulled = oci::pull(&reference, &options, Some(out)).await.unwrap();
        assert_eq!(pulled.bytes, bytes);

        let err =
            oci::pull(&reference, &anonymous(), Some(&auth_registry.dir.path().join("no.wasm"))).await.unwrap_err();
        assert!(matches!(err, OciError::Unauthorized { user: None, .. }), "{err}");
    });
    assert_eq!(std::fs::read(out).unwrap(), bytes);
    assert!(!auth_registry.dir.path().join("no.wasm").exists());
}
