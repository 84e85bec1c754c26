//! `wasmsched push` and `pull` against a real OCI registry: the one `WASMSCHED_REGISTRY` names
//! (`host:port`; `.ci/registry start` serves Debian's docker-registry, the CNCF distribution
//! registry, on loopback). Without one, each test that needs it says SKIPPED and returns.
//!
//! What is checked: a shipped policy comes back byte for byte by tag and by digest; the
//! manifest and config as the registry stores them carry the Wasm artifact's media types and
//! fields; the Bytecode Alliance's `oci-wasm` reads what we push and we read what it pushes;
//! a core module (pushed by us, or pulled after another tool pushed it), a non-Wasm artifact,
//! a digest that does not match and a registry that does not answer are refused with what to
//! do, and leave no file behind; [`auth`]: a registry that asks credentials; [`trust`]: signed
//! policies, cosign's signatures made, found and checked.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use oci_client::client::{Config, ImageLayer};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciDescriptor};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use wasmsched::oci::{self, OciError, RegistryOptions};

mod auth;
mod trust;

/// The registry's address, or None after saying SKIPPED.
fn registry(test: &str) -> Option<String> {
    match std::env::var("WASMSCHED_REGISTRY") {
        Ok(r) if !r.trim().is_empty() => Some(r.trim().to_string()),
        _ => {
            eprintln!(
                "SKIPPED {test}: no OCI registry (WASMSCHED_REGISTRY names none; `.ci/registry start` serves one and prints its address)"
            );
            None
        }
    }
}

/// A repository of this test's own, so that tests (and runs) never see each other's tags.
fn repository(registry: &str, test: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
    format!("{registry}/wasmsched-tests/{test}-{}-{stamp}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(future)
}

fn component(name: &str) -> (&'static Path, Vec<u8>) {
    let path = Path::new(wasmsched_test_artifacts::path(name));
    (path, std::fs::read(path).unwrap())
}

fn anonymous() -> RegistryOptions {
    RegistryOptions { insecure: false, auth: oci::Auth::Anonymous }
}

/// What the registry stores for `reference`: the manifest's bytes and digest, and the config's.
async fn stored(registry: &str, reference: &str) -> (serde_json::Value, String, serde_json::Value) {
    let client: Client = oci::client(registry, false).unwrap();
    let image: Reference = reference.parse().unwrap();
    let (bytes, digest) =
        client.pull_manifest_raw(&image, &RegistryAuth::Anonymous, &[OCI_IMAGE_MEDIA_TYPE]).await.unwrap();
    let manifest: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let config = &manifest["config"];
    let descriptor = OciDescriptor {
        media_type: config["mediaType"].as_str().unwrap().into(),
        digest: config["digest"].as_str().unwrap().into(),
        size: config["size"].as_i64().unwrap(),
        ..OciDescriptor::default()
    };
    let mut blob = Vec::new();
    client.pull_blob(&image, &descriptor, &mut blob).await.unwrap();
    (manifest, digest, serde_json::from_slice(&blob).unwrap())
}

#[test]
fn a_pushed_policy_comes_back_the_same_by_tag_and_by_digest_with_the_artifacts_media_types() {
    let Some(registry) = registry("oci push and pull") else { return };
    let repo = repository(&registry, "round-trip");
    let (path, bytes) = component("fair-share");
    let dir = tempfile::tempdir().unwrap();
    block_on(async {
        let pushed = oci::push(path, &format!("{repo}:v1"), &anonymous()).await.unwrap();
        assert_eq!(pushed.reference, format!("{repo}:v1"));
        assert!(pushed.digest.starts_with("sha256:") && pushed.digest.len() == 71, "{}", pushed.digest);

        let by_tag = oci::pull(&format!("{repo}:v1"), &anonymous(), Some(&dir.path().join("tag.wasm"))).await.unwrap();
        assert_eq!(by_tag.bytes, bytes);
        assert_eq!(std::fs::read(dir.path().join("tag.wasm")).unwrap(), bytes);
        assert_eq!(by_tag.digest, pushed.digest);
        let pinned = format!("{repo}@{}", pushed.digest);
        let by_digest = oci::pull(&pinned, &anonymous(), Some(&dir.path().join("digest.wasm"))).await.unwrap();
        assert_eq!(std::fs::read(dir.path().join("digest.wasm")).unwrap(), bytes);
        let both = format!("{repo}:v1@{}", pushed.digest);
        oci::pull(&both, &anonymous(), Some(&dir.path().join("both.wasm"))).await.unwrap();
        assert_eq!(
            by_digest.layer_digest,
            format!("sha256:{}", hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes)))
        );

        // As the registry stores them.
        let (manifest, digest, config) = stored(&registry, &format!("{repo}:v1")).await;
        assert_eq!(digest, pushed.digest);
        assert_eq!(manifest["schemaVersion"], 2);
        assert_eq!(manifest["mediaType"], "application/vnd.oci.image.manifest.v1+json");
        assert_eq!(manifest["config"]["mediaType"], "application/vnd.wasm.config.v0+json");
        let layers = manifest["layers"].as_array().unwrap();
        assert_eq!(layers.len(), 1, "{manifest}");
        assert_eq!(layers[0]["mediaType"], "application/wasm");
        assert_eq!(layers[0]["digest"], by_digest.layer_digest.as_str());
        assert_eq!(layers[0]["size"], bytes.len());
        assert_eq!(config["architecture"], "wasm");
        assert_eq!(config["os"], "wasip2");
        assert_eq!(config["layerDigests"], serde_json::json!([by_digest.layer_digest]));
        let created = config["created"].as_str().unwrap();
        assert!(humantime::parse_rfc3339(created).is_ok(), "created {created:?} is not RFC 3339");
        let component = &config["component"];
        let exports: Vec<&str> = component["exports"].as_array().unwrap().iter().map(|e| e.as_str().unwrap()).collect();
        assert!(exports.contains(&wasmsched::bindings::POLICY_EXPORT), "{exports:?}");
        assert_eq!(component["target"], "wasmsched:policy/policy-plugin@0.4.0");
        assert!(
            component["imports"]
                .as_array()
                .unwrap()
                .iter()
                .any(|i| i.as_str().unwrap().starts_with("wasmsched:policy/"))
        );
    });
    // Nothing but the files asked for: no partial file left beside them.
    let mut names: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["both.wasm", "digest.wasm", "tag.wasm"]);
}

/// oci-wasm's client, on the oci-client it is built for, over plain HTTP to the test registry.
fn oci_wasm_client() -> oci_wasm::WasmClient {
    use oci_client_for_oci_wasm::client::{ClientConfig, ClientProtocol};
    // Its reqwest is ours: it needs the TLS provider installed even for plain HTTP.
    oci::install_tls_provider();
    let config = ClientConfig { protocol: ClientProtocol::Http, ..ClientConfig::default() };
    oci_wasm::WasmClient::new(oci_client_for_oci_wasm::Client::new(config))
}

#[test]
fn oci_wasm_reads_what_we_push() {
    let Some(registry) = registry("oci interop: ours to oci-wasm") else { return };
    let reference = format!("{}:v1", repository(&registry, "to-oci-wasm"));
    let (path, bytes) = component("fifo");
    block_on(async {
        oci::push(path, &reference, &anonymous()).await.unwrap();
        let theirs = oci_wasm_client();
        let image: oci_client_for_oci_wasm::Reference = reference.parse().unwrap();
        let auth = oci_client_for_oci_wasm::secrets::RegistryAuth::Anonymous;
        // Their reading of the manifest and of our config (their WasmConfig, field for field).
        let (manifest, config, _) = theirs.pull_manifest_and_config(&image, &auth).await.unwrap();
        assert_eq!(manifest.layers.len(), 1);
        assert_eq!(config.architecture, oci_wasm::WASM_ARCHITECTURE);
        assert_eq!(config.os, oci_wasm::COMPONENT_OS);
        assert_eq!(config.layer_digests, [manifest.layers[0].digest.clone()]);
        // What we say the component exports and imports is what their decoder of the component says.
        let ours = config.component.expect("a component's config names its exports and imports");
        let decoded = oci_wasm::Component::from_raw_component(&bytes).unwrap();
        let set = |v: &[String]| v.iter().cloned().collect::<BTreeSet<_>>();
        assert_eq!(set(&ours.exports), set(&decoded.exports));
        assert_eq!(set(&ours.imports), set(&decoded.imports));
        let pulled = theirs.pull(&image, &auth).await.unwrap();
        assert_eq!(pulled.layers.len(), 1);
        assert_eq!(pulled.layers[0].data.as_ref(), bytes.as_slice());
    });
}

#[test]
fn we_read_what_oci_wasm_pushes() {
    let Some(registry) = registry("oci interop: oci-wasm to ours") else { return };
    let reference = format!("{}:v1", repository(&registry, "from-oci-wasm"));
    let (_, bytes) = component("tiresias");
    let dir = tempfile::tempdir().unwrap();
    block_on(async {
        let theirs = oci_wasm_client();
        let image: oci_client_for_oci_wasm::Reference = reference.parse().unwrap();
        let auth = oci_client_for_oci_wasm::secrets::RegistryAuth::Anonymous;
        let (config, layer) = oci_wasm::WasmConfig::from_raw_component(bytes.clone(), None).unwrap();
        theirs.push(&image, &auth, layer, config, None).await.unwrap();

        let out = dir.path().join("tiresias.wasm");
        let pulled = oci::pull(&reference, &anonymous(), Some(&out)).await.unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), bytes);
        // Their config (a null author and target among its fields) reads as ours.
        let (_, digest, config) = stored(&registry, &reference).await;
        assert_eq!(digest, pulled.digest);
        let config: oci::WasmConfig = serde_json::from_value(config).unwrap();
        assert_eq!(config.os, "wasip2");
        assert_eq!(config.layer_digests, std::slice::from_ref(&pulled.layer_digest));
        let component = config.component.unwrap();
        let ours = oci::ComponentInfo::of_policy("tiresias.wasm", &bytes).unwrap();
        let set = |v: &[String]| v.iter().cloned().collect::<BTreeSet<_>>();
        assert_eq!(set(&component.exports), set(&ours.exports));
        assert_eq!(set(&component.imports), set(&ours.imports));
    });
}

#[test]
fn a_core_module_pushed_by_another_tool_is_refused_on_pull_and_nothing_is_written() {
    let Some(registry) = registry("oci pull of a core module") else { return };
    let reference = format!("{}:v1", repository(&registry, "their-module"));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("module.wasm");
    block_on(async {
        // oci-wasm pushes core modules too (os wasip1): a valid artifact, but no policy.
        let (config, layer) = oci_wasm::WasmConfig::from_raw_module(b"\0asm\x01\0\0\0".to_vec(), None).unwrap();
        let image: oci_client_for_oci_wasm::Reference = reference.parse().unwrap();
        let auth = oci_client_for_oci_wasm::secrets::RegistryAuth::Anonymous;
        oci_wasm_client().push(&image, &auth, layer, config, None).await.unwrap();

        let err = oci::pull(&reference, &anonymous(), Some(&out)).await.unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, OciError::Component(_)), "{text}");
        assert!(text.contains("core module") && text.contains("wasm32-wasip2"), "{text}");
    });
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "something was written");
}

#[test]
fn a_core_module_is_refused_and_nothing_reaches_the_registry() {
    let Some(registry) = registry("oci push of a core module") else { return };
    let reference = format!("{}:v1", repository(&registry, "core-module"));
    let dir = tempfile::tempdir().unwrap();
    let module = dir.path().join("module.wasm");
    std::fs::write(&module, b"\0asm\x01\0\0\0").unwrap();
    block_on(async {
        let err = oci::push(&module, &reference, &anonymous()).await.unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, OciError::Component(_)), "{text}");
        assert!(text.contains("core module") && text.contains("wasm32-wasip2"), "{text}");
        let err = oci::pull(&reference, &anonymous(), Some(&dir.path().join("out.wasm"))).await.unwrap_err();
        assert!(matches!(err, OciError::NotFound { .. }), "{err}");
    });
    assert!(!dir.path().join("out.wasm").exists());
}

#[test]
fn an_artifact_that_is_not_wasm_is_refused_with_what_its_config_is() {
    let Some(registry) = registry("oci pull of a non-Wasm artifact") else { return };
    let reference = format!("{}:v1", repository(&registry, "not-wasm"));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.wasm");
    block_on(async {
        // An ordinary image's manifest: an image config and a tar layer.
        let client = oci::client(&registry, false).unwrap();
        let image: Reference = reference.parse().unwrap();
        let layers = [ImageLayer::oci_v1(b"not a policy".to_vec(), None)];
        let config = Config::oci_v1(br#"{"architecture":"amd64","os":"linux"}"#.to_vec(), None);
        client.push(&image, &layers, config, &RegistryAuth::Anonymous, None).await.unwrap();

        let err = oci::pull(&reference, &anonymous(), Some(&out)).await.unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, OciError::NotWasm { .. }), "{text}");
        assert!(
            text.contains("is not a Wasm artifact: its config is application/vnd.oci.image.config.v1+json")
                && text.contains("push it with `wasmsched push`"),
            "{text}"
        );
    });
    assert!(!out.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "a partial file was left");
}

#[test]
fn a_pinned_digest_must_match_or_the_pull_is_refused() {
    let Some(registry) = registry("oci pull with a pinned digest") else { return };
    let repo = repository(&registry, "pinned");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.wasm");
    block_on(async {
        oci::push(component("fair-share").0, &format!("{repo}:a"), &anonymous()).await.unwrap();
        let b = oci::push(component("fifo").0, &format!("{repo}:b"), &anonymous()).await.unwrap();
        // The tag names another manifest than the one pinned.
        let err = oci::pull(&format!("{repo}:a@{}", b.digest), &anonymous(), Some(&out)).await.unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, OciError::TagMoved { .. }), "{text}");
        assert!(text.contains(&format!("not the pinned {}", b.digest)) && text.contains("drop the pin"), "{text}");
        // A digest no manifest has.
        let zeros = format!("{repo}@sha256:{}", "0".repeat(64));
        let err = oci::pull(&zeros, &anonymous(), Some(&out)).await.unwrap_err();
        assert!(matches!(err, OciError::NotFound { .. }), "{err}");
        assert!(err.to_string().contains("a digest pinned with @"), "{err}");
    });
    assert!(!out.exists());
}

#[test]
fn a_registry_that_does_not_answer_is_a_clear_error() {
    // Needs no registry: a loopback port that was free a moment ago.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let reference = format!("127.0.0.1:{port}/policies/fair-share:v1");
    let dir = tempfile::tempdir().unwrap();
    block_on(async {
        for err in [
            oci::pull(&reference, &anonymous(), Some(&dir.path().join("out.wasm"))).await.unwrap_err(),
            oci::push(component("fair-share").0, &reference, &anonymous()).await.unwrap_err(),
        ] {
            let text = err.to_string();
            assert!(matches!(err, OciError::Unreachable { .. }), "{text}");
            assert!(text.contains(&format!("cannot reach the registry 127.0.0.1:{port} over http")), "{text}");
            assert!(text.contains("is it running"), "{text}");
        }
    });
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
