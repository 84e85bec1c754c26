//! Policies as OCI artifacts: [`push`] puts a policy component into an OCI registry (any that
//! speaks the distribution protocol: Docker Hub, GHCR, Harbor, a local `docker-registry`) and
//! [`pull`] brings one back, its digest checked, written whole or not at all. The layout is
//! CNCF TAG Runtime's Wasm artifact ([`artifact`]): the `oci-wasm` crate, `wkg` and the
//! runtimes that follow it push and pull the same thing.
//!
//! Plain HTTP is spoken to loopback registries (`localhost`, `127.0.0.0/8`, `[::1]`) and to any
//! other only when asked (`insecure`); TLS otherwise, by rustls with ring, the roots the
//! platform trusts. Credentials are [`auth`]'s. The protocol itself is the `oci-client`
//! crate's; this file is the policy on top of it and the errors an operator can act on.

pub mod artifact;
pub mod auth;
pub mod trust;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::{
    IMAGE_MANIFEST_LIST_MEDIA_TYPE, IMAGE_MANIFEST_MEDIA_TYPE, OCI_IMAGE_INDEX_MEDIA_TYPE, OciDescriptor,
};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

pub use artifact::{Artifact, ComponentError, ComponentInfo, Descriptor, WasmConfig};
pub use auth::{Auth, AuthError, Credentials};

/// The largest component `pull` takes (a Python policy, interpreter and all, is about 40 MB).
pub const MAX_COMPONENT_BYTES: u64 = 512 << 20;

/// How long a registry may take to accept a connection, and to send the next bytes.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// How to reach a registry.
#[derive(Clone, Debug, Default)]
pub struct RegistryOptions {
    /// Plain HTTP to any registry, not only loopback ones.
    pub insecure: bool,
    /// The credentials to offer.
    pub auth: Auth,
}

/// What [`push`] did.
#[derive(Clone, Debug)]
pub struct Pushed {
    /// Where: `REGISTRY/REPOSITORY:TAG`.
    pub reference: String,
    /// The manifest's digest: pin it with `@`.
    pub digest: String,
    /// The component's size in bytes.
    pub size: u64,
}

/// What [`pull`] did.
#[derive(Clone, Debug)]
pub struct Pulled {
    /// What was pulled: `REGISTRY/REPOSITORY[:TAG][@DIGEST]`.
    pub reference: String,
    /// The manifest's digest.
    pub digest: String,
    /// The component layer's digest (the file's sha256, as `validate` prints it, after `sha256:`).
    pub layer_digest: String,
    /// Where the component was written.
    pub path: PathBuf,
    /// The component's bytes.
    pub bytes: Vec<u8>,
}

/// Why a push or a pull did not happen.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    /// The file to push could not be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file to push, or the layer pulled, is not a policy component (a push is refused
    /// before any connection, a pull before anything is written).
    #[error(transparent)]
    Component(#[from] ComponentError),
    /// The reference does not parse.
    #[error(
        "{reference:?} is not an image reference ({detail}); write REGISTRY/REPOSITORY:TAG, such as 127.0.0.1:5000/policies/fair-share:v1"
    )]
    Reference {
        /// As given.
        reference: String,
        /// The parser's words.
        detail: String,
    },
    /// `push` was given a digest.
    #[error(
        "{reference}: push to a tag, not a digest (REGISTRY/REPOSITORY:TAG); the digest is the manifest's, and push prints it"
    )]
    PushToDigest {
        /// As given.
        reference: String,
    },
    /// No credentials that can be used.
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// The HTTP client could not be built (TLS set-up).
    #[error("cannot set up a client for {registry}: {detail}")]
    Client {
        /// The registry.
        registry: String,
        /// Why.
        detail: String,
    },
    /// Nothing answered, or not in time.
    #[error(
        "cannot reach the registry {registry} over {scheme} ({detail}): is it running, and is the address right? A registry without TLS needs --insecure (loopback ones get plain HTTP already)"
    )]
    Unreachable {
        /// The registry.
        registry: String,
        /// `https` or `http`.
        scheme: &'static str,
        /// What failed.
        detail: String,
    },
    /// The registry wants credentials, or other ones.
    #[error("the registry {registry} refused the {op} {}", refused(user.as_deref(), registry, detail))]
    Unauthorized {
        /// The registry.
        registry: String,
        /// `push` or `pull`.
        op: &'static str,
        /// The user the credentials named, if any were offered.
        user: Option<String>,
        /// The registry's words.
        detail: String,
    },
    /// No such repository, tag or digest.
    #[error(
        "{reference} is not in the registry ({detail}): check the repository and the tag; a digest pinned with @ must be one `wasmsched push` printed"
    )]
    NotFound {
        /// What was asked for.
        reference: String,
        /// The registry's words.
        detail: String,
    },
    /// The manifest is not a Wasm artifact's.
    #[error("{reference} is not a Wasm artifact: {why}; push it with `wasmsched push`")]
    NotWasm {
        /// What was pulled.
        reference: String,
        /// What it is instead.
        why: String,
    },
    /// The layer is larger than any policy.
    #[error("{reference}: its component is {size} bytes, more than the {MAX_COMPONENT_BYTES} a policy may be")]
    TooLarge {
        /// What was pulled.
        reference: String,
        /// The size its manifest gives.
        size: u64,
    },
    /// The reference pins a tag and a digest, and the tag names another manifest now.
    #[error(
        "{reference}: the tag {tag} is now {now}, not the pinned {pinned}; pull {repository}@{pinned} for the pinned one, or drop the pin to take what the tag is now"
    )]
    TagMoved {
        /// What was asked for.
        reference: String,
        /// The tag.
        tag: String,
        /// `REGISTRY/REPOSITORY`.
        repository: String,
        /// The digest in the reference.
        pinned: String,
        /// The tag's digest in the registry.
        now: String,
    },
    /// What came is not what was asked for.
    #[error(
        "{reference}: the registry sent bytes whose digest does not match ({detail}); nothing was written — try again, and distrust that registry (or what stands between) if it persists"
    )]
    DigestMismatch {
        /// What was pulled.
        reference: String,
        /// Expected and found.
        detail: String,
    },
    /// Anything else the registry answered.
    #[error("the registry {registry} failed the {op}: {detail}")]
    Registry {
        /// The registry.
        registry: String,
        /// `push` or `pull`.
        op: &'static str,
        /// Its words.
        detail: String,
    },
    /// The pulled component could not be written.
    #[error("cannot write {path}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The rest of an [`OciError::Unauthorized`]: whom it refused, and what to do.
fn refused(user: Option<&str>, registry: &str, detail: &str) -> String {
    match user {
        None => format!(
            "without credentials ({detail}): log in with `docker login {registry}`, or give --username and --password-stdin"
        ),
        Some(user) => {
            format!("as {user} ({detail}): check the password or token, and that {user} may do this in that repository")
        }
    }
}

/// Push the policy component `file` to `reference` (`REGISTRY/REPOSITORY:TAG`). The file is
/// checked to be a policy component before any connection: a core module, another file or a
/// component that exports no policy is refused with what to do.
pub async fn push(file: &Path, reference: &str, options: &RegistryOptions) -> Result<Pushed, OciError> {
    let bytes = std::fs::read(file).map_err(|source| OciError::Read { path: file.into(), source })?;
    let created = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let artifact = Artifact::of_policy(file, &bytes, created)?;
    let image = parse(reference)?;
    if image.digest().is_some() {
        return Err(OciError::PushToDigest { reference: reference.into() });
    }
    let (client, auth, at) = connect(&image, options, "push")?;
    client.store_auth_if_needed(image.resolve_registry(), &auth).await;
    let layer = &artifact.layer;
    // A component pushed before under another tag is not sent again.
    if !client.blob_exists(&image, &layer.digest).await.map_err(|e| at.error(e))? {
        client.push_blob(&image, bytes, &layer.digest).await.map_err(|e| at.error(e))?;
    }
    let config = &artifact.config_descriptor;
    client.push_blob(&image, artifact.config.clone(), &config.digest).await.map_err(|e| at.error(e))?;
    let media_type = artifact::MANIFEST_MEDIA_TYPE.parse().expect("a valid header value");
    client.push_manifest_raw(&image, artifact.manifest.clone(), media_type).await.map_err(|e| at.error(e))?;
    let tag = image.tag().unwrap_or("latest");
    Ok(Pushed {
        reference: format!("{}/{}:{tag}", image.registry(), image.repository()),
        digest: artifact::digest(&artifact.manifest),
        size: layer.size,
    })
}

/// A policy component fetched from a registry: its bytes in memory, nothing written.
#[derive(Clone, Debug)]
pub struct Fetched {
    /// What was fetched: `REGISTRY/REPOSITORY[:TAG][@DIGEST]`.
    pub reference: String,
    /// The manifest's digest.
    pub digest: String,
    /// The component layer's digest (the file's sha256, after `sha256:`).
    pub layer_digest: String,
    /// The name the component was pushed with, if the layer says.
    pub file_name: Option<String>,
    /// The component's bytes.
    pub bytes: Vec<u8>,
}

/// Fetch the policy component at `reference` (`REGISTRY/REPOSITORY:TAG`, `…@sha256:…`, or
/// both: then the tag must still name the pinned digest) into memory. The manifest must be a
/// Wasm artifact's, every digest must match, and the layer must be a component.
pub async fn fetch(reference: &str, options: &RegistryOptions) -> Result<Fetched, OciError> {
    let image = parse(reference)?;
    let (client, auth, at) = connect(&image, options, "pull")?;
    let accepted = [
        artifact::MANIFEST_MEDIA_TYPE,
        OCI_IMAGE_INDEX_MEDIA_TYPE,
        IMAGE_MANIFEST_MEDIA_TYPE,
        IMAGE_MANIFEST_LIST_MEDIA_TYPE,
    ];
    let (manifest, _) = client.pull_manifest_raw(&image, &auth, &accepted).await.map_err(|e| at.error(e))?;
    let digest = artifact::digest(&manifest);
    let whole = image.whole();
    if let Some(pinned) = image.digest() {
        if digest != pinned {
            return Err(OciError::DigestMismatch {
                reference: whole,
                detail: format!("the manifest is {digest}, the reference pins {pinned}"),
            });
        }
        if let Some(tag) = image.tag() {
            let tagged = Reference::with_tag(image.registry().into(), image.repository().into(), tag.into());
            let now = client.fetch_manifest_digest(&tagged, &auth).await.map_err(|e| at.error(e))?;
            if now != pinned {
                return Err(OciError::TagMoved {
                    reference: whole,
                    tag: tag.into(),
                    repository: format!("{}/{}", image.registry(), image.repository()),
                    pinned: pinned.into(),
                    now,
                });
            }
        }
    }
    let layer = artifact::wasm_layer(&manifest).map_err(|why| OciError::NotWasm { reference: whole.clone(), why })?;
    if layer.size > MAX_COMPONENT_BYTES {
        return Err(OciError::TooLarge { reference: whole, size: layer.size });
    }
    let descriptor = OciDescriptor {
        media_type: layer.media_type.clone(),
        digest: layer.digest.clone(),
        size: i64::try_from(layer.size).unwrap_or(i64::MAX),
        ..OciDescriptor::default()
    };
    let mut bytes = Vec::with_capacity(usize::try_from(layer.size).unwrap_or(0));
    client.pull_blob(&image, &descriptor, &mut bytes).await.map_err(|e| at.error(e))?;
    let found = artifact::digest(&bytes);
    if found != layer.digest {
        let detail = format!("the component is {found}, its manifest says {}", layer.digest);
        return Err(OciError::DigestMismatch { reference: whole, detail });
    }
    // What push checks, checked again: another tool may have pushed a core module.
    ComponentInfo::of_policy(&whole, &bytes)?;
    let file_name = layer.file_name().map(String::from);
    Ok(Fetched { reference: whole, digest, layer_digest: layer.digest, file_name, bytes })
}

/// Pull the policy component at `reference` ([`fetch`]) and write it to `out` (a file, or a
/// folder to write it into), or, without, into the current folder: under the name it was
/// pushed with, else the repository's last part and `.wasm`. The file is written beside its
/// place and renamed into it, so a policies folder being watched never sees it half written.
pub async fn pull(reference: &str, options: &RegistryOptions, out: Option<&Path>) -> Result<Pulled, OciError> {
    let Fetched { reference, digest, layer_digest, file_name, bytes } = fetch(reference, options).await?;
    let name = || PathBuf::from(file_name.clone().unwrap_or_else(|| default_name(&reference)));
    let path = match out {
        Some(dir) if dir.is_dir() => dir.join(name()),
        Some(path) => path.to_path_buf(),
        None => name(),
    };
    write_whole(&path, &bytes)?;
    Ok(Pulled { reference, digest, layer_digest, path, bytes })
}

/// An OCI client for `registry` (`host[:port]`) as [`push`] and [`pull`] make it: plain HTTP to
/// loopback registries or when `insecure`, TLS by rustls with ring (installed as the process's
/// default provider) otherwise, bounded connect and read times.
pub fn client(registry: &str, insecure: bool) -> Result<Client, OciError> {
    install_tls_provider();
    let protocol = if insecure || is_loopback(registry) {
        ClientProtocol::HttpsExcept(vec![registry.to_string()])
    } else {
        ClientProtocol::Https
    };
    let config = ClientConfig {
        protocol,
        platform_resolver: None,
        connect_timeout: Some(CONNECT_TIMEOUT),
        read_timeout: Some(READ_TIMEOUT),
        user_agent: concat!("wasmsched/", env!("CARGO_PKG_VERSION")),
        ..ClientConfig::default()
    };
    Client::try_from(config).map_err(|e| {
        let mut detail = wasmsched_core::error_chain(&e);
        if detail.contains("CA certificates") {
            detail.push_str(
                "; TLS needs the roots it trusts: install them (Debian's ca-certificates) or mount a bundle at \
                 /etc/ssl/certs/ca-certificates.crt (cli/image.sh puts one in the image)",
            );
        }
        OciError::Client { registry: registry.into(), detail }
    })
}

/// Make ring the process's TLS provider, unless one is already: reqwest is built without one of
/// its own (as for the Kubernetes client, ring and no C library), and any HTTP client built on
/// it, ours or another crate's, needs one first.
pub fn install_tls_provider() {
    // An error only says that one is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Whether `registry` (`host[:port]`) is this machine: `localhost`, `127.0.0.0/8` or `[::1]`.
pub fn is_loopback(registry: &str) -> bool {
    let host = match registry.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(rest),
        None => registry.rsplit_once(':').map_or(registry, |(host, _)| host),
    };
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Where a request went, to say so when it fails.
struct At {
    registry: String,
    user: Option<String>,
    reference: String,
    scheme: &'static str,
    op: &'static str,
}

impl At {
    /// The client's error as one an operator can act on.
    fn error(&self, e: OciDistributionError) -> OciError {
        let detail = detail(&e);
        let (registry, op) = (self.registry.clone(), self.op);
        let code = |code: u16| match code {
            401 | 403 => OciError::Unauthorized {
                registry: registry.clone(),
                op,
                user: self.user.clone(),
                detail: detail.clone(),
            },
            404 => OciError::NotFound { reference: self.reference.clone(), detail: detail.clone() },
            _ => OciError::Registry { registry: registry.clone(), op, detail: detail.clone() },
        };
        match &e {
            OciDistributionError::RequestError(r) if r.is_connect() || r.is_timeout() => {
                OciError::Unreachable { registry, scheme: self.scheme, detail }
            }
            OciDistributionError::RequestError(r) => code(r.status().map_or(0, |s| s.as_u16())),
            OciDistributionError::UnauthorizedError { .. } | OciDistributionError::AuthenticationFailure(_) => {
                code(401)
            }
            OciDistributionError::ImageManifestNotFoundError(_) => code(404),
            OciDistributionError::ServerError { code: c, .. } => code(*c),
            OciDistributionError::DigestError(_) => {
                OciError::DigestMismatch { reference: self.reference.clone(), detail }
            }
            OciDistributionError::RegistryError { envelope, .. } => match envelope.errors.first().map(|e| &e.code) {
                Some(OciErrorCode::Unauthorized | OciErrorCode::Denied) => code(401),
                Some(
                    OciErrorCode::ManifestUnknown
                    | OciErrorCode::NameUnknown
                    | OciErrorCode::NotFound
                    | OciErrorCode::BlobUnknown,
                ) => code(404),
                _ => code(0),
            },
            _ => code(0),
        }
    }
}

/// The client's error in the fewest words that say it: the registry's own messages, or the
/// innermost cause of a failed request (`Connection refused (os error 111)`).
fn detail(e: &OciDistributionError) -> String {
    match e {
        OciDistributionError::RegistryError { envelope, .. } if !envelope.errors.is_empty() => {
            envelope.errors.iter().map(|e| e.message.as_str()).collect::<Vec<_>>().join("; ")
        }
        OciDistributionError::RequestError(r) => {
            let mut cause: &dyn std::error::Error = r;
            while let Some(inner) = cause.source() {
                cause = inner;
            }
            cause.to_string()
        }
        other => wasmsched_core::error_chain(other),
    }
}

/// The reference, parsed, or what to write.
fn parse(reference: &str) -> Result<Reference, OciError> {
    reference
        .parse::<Reference>()
        .map_err(|e| OciError::Reference { reference: reference.into(), detail: e.to_string() })
}

/// A client for the reference's registry, the credentials for it, and where the requests go.
fn connect(
    image: &Reference,
    options: &RegistryOptions,
    op: &'static str,
) -> Result<(Client, RegistryAuth, At), OciError> {
    let registry = image.resolve_registry();
    let (auth, user) = match options.auth.resolve(image.registry())? {
        Credentials::Anonymous => (RegistryAuth::Anonymous, None),
        Credentials::Basic(user, password) => (RegistryAuth::Basic(user.clone(), password), Some(user)),
    };
    let client = client(registry, options.insecure)?;
    let scheme = if options.insecure || is_loopback(registry) { "http" } else { "https" };
    Ok((client, auth, At { registry: registry.into(), user, reference: image.whole(), scheme, op }))
}

/// `fair-share.wasm` for `…/policies/fair-share:v1` (or `…@sha256:…`).
fn default_name(reference: &str) -> String {
    let name = reference.split_once('@').map_or(reference, |(name, _)| name);
    let last = name.rsplit('/').next().unwrap_or("policy");
    let last = last.split_once(':').map_or(last, |(repo, _)| repo);
    format!("{}.wasm", if last.is_empty() { "policy" } else { last })
}

/// Write `bytes` to a hidden file beside `path`, flush it to disk, and rename it into place.
fn write_whole(path: &Path, bytes: &[u8]) -> Result<(), OciError> {
    let failed = |source| OciError::Write { path: path.into(), source };
    let name = path.file_name().ok_or_else(|| failed(std::io::Error::other("it names no file")))?;
    let partial = path.with_file_name(format!(".{}.{}.partial", name.to_string_lossy(), std::process::id()));
    let written = std::fs::File::create(&partial).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()
    });
    if let Err(e) = written.and_then(|()| std::fs::rename(&partial, path)) {
        let _ = std::fs::remove_file(&partial);
        return Err(failed(e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_machine_is_spoken_to_without_tls_unasked() {
        for local in ["localhost:5000", "127.0.0.1:41234", "127.1.2.3", "[::1]:5000", "localhost"] {
            assert!(is_loopback(local), "{local}");
        }
        for remote in ["ghcr.io", "registry.example:5000", "10.0.0.1:5000", "[2001:db8::1]:443", "localhost.example"] {
            assert!(!is_loopback(remote), "{remote}");
        }
    }

    #[test]
    fn a_pull_without_a_name_takes_the_repositorys_last_part() {
        for reference in [
            "127.0.0.1:5000/policies/fair-share:v1",
            "127.0.0.1:5000/policies/fair-share@sha256:{}",
            "127.0.0.1:5000/policies/fair-share:v1@sha256:{}",
        ] {
            let whole = parse(&reference.replace("{}", &"ab".repeat(32))).unwrap().whole();
            assert_eq!(default_name(&whole), "fair-share.wasm", "{reference}");
        }
    }

    #[test]
    fn a_bad_reference_says_what_to_write() {
        let err = parse("127.0.0.1:5000/Policies/UPPER:v1").unwrap_err().to_string();
        assert!(err.contains("REGISTRY/REPOSITORY:TAG"), "{err}");
    }

    #[test]
    fn a_written_file_appears_whole_and_leaves_nothing_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.wasm");
        write_whole(&path, b"first").unwrap();
        write_whole(&path, b"second").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_core_module_is_refused_before_any_connection() {
        let dir = tempfile::tempdir().unwrap();
        let module = dir.path().join("module.wasm");
        std::fs::write(&module, b"\0asm\x01\0\0\0").unwrap();
        // Port 1 on loopback: nothing answers there, and nothing is asked.
        let err = push(&module, "127.0.0.1:1/p/module:v1", &RegistryOptions::default()).await.unwrap_err();
        assert!(matches!(err, OciError::Component(_)), "{err}");
        assert!(err.to_string().contains("core module"), "{err}");
    }
}
