//! Signed policies: which signatures a host requires of a policy before it runs it, checked the
//! way cosign checks them, so that policy authors sign with `cosign sign --key` (or `wasmsched
//! sign`) and operators list the public keys they trust in the host's `[trust]` table.
//!
//! The table is Kubewarden's verification config in TOML: [`TrustConfig`] lists signers under
//! `all-of` (every one must have signed) and `any-of` (at least `minimum-matches` of them), each
//! a public key (a PEM file or the PEM inline), with the annotations its signature must carry.
//! [`TrustConfig::load`] reads the keys into a [`Trust`]. Only public keys: keyless signing
//! needs Fulcio and Rekor, which a cluster without internet cannot reach.
//!
//! [`verify_artifact`] finds cosign's signatures of a manifest digest (the `sha256-<hex>.sig`
//! tag in the same repository, [`cosign`] reads it), checks each against the keys and the
//! digest its payload names, and applies the rules; [`verify_blob`] does the same for
//! `cosign sign-blob`'s signature of a file (a policy delivered in a ConfigMap). Signing, for
//! authors without cosign and for tests: [`generate_key_pair`], [`sign_artifact`],
//! [`sign_blob`], in cosign's formats ([`keys`]). Keys are ECDSA P-256 (what `cosign
//! generate-key-pair` makes), computed by ring, the TLS provider already here. The registry is
//! reached as [`super::push`] and [`super::pull`] reach it (credentials, plain HTTP to loopback).

pub mod cosign;
pub mod keys;
mod rules;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use oci_client::Reference;
use oci_client::manifest::{IMAGE_MANIFEST_MEDIA_TYPE, OciDescriptor};
use rules::{Proof, judge, prove_blob, prove_payload};
use serde::Deserialize;

use super::{OciError, RegistryOptions, artifact};

pub use keys::{PrivateKey, PublicKey};

/// The `[trust]` table: the signatures a policy must carry. At least one signer, under
/// `all-of` or `any-of`. Its `Default` names none, which [`TrustConfig::load`] refuses.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct TrustConfig {
    /// Signers every one of whom must have signed (`[[trust.all-of]]`).
    #[serde(default)]
    pub all_of: Vec<SignerConfig>,
    /// Signers of whom at least `minimum-matches` must have signed (`[trust.any-of]`).
    #[serde(default)]
    pub any_of: Option<AnyOf>,
}

/// `[trust.any-of]`: at least `minimum-matches` of these signers.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct AnyOf {
    /// How many of `signatures` must have signed: 1 unless given, at most their number.
    #[serde(default = "one")]
    pub minimum_matches: usize,
    /// The signers (`[[trust.any-of.signatures]]`).
    pub signatures: Vec<SignerConfig>,
}

fn one() -> usize {
    1
}

/// One signer: a public key, and what its signature must say.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SignerConfig {
    /// `public-key`, the one kind there is.
    pub kind: SignerKind,
    /// How status lines and logs name this signer (default: its key's fingerprint).
    #[serde(default)]
    pub name: Option<String>,
    /// A PEM file of its public key (`cosign.pub`), relative to the config's folder; or `key-pem`.
    #[serde(default)]
    pub key: Option<PathBuf>,
    /// Its public key's PEM itself; or `key`.
    #[serde(default)]
    pub key_pem: Option<String>,
    /// Annotations its signature must carry (`cosign sign -a env=prod`), keys and values as
    /// cosign writes them. A blob's signature carries none: a signer that requires some never
    /// signs a blob.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// The kinds of signer: public keys only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum SignerKind {
    /// A signature made with a private key whose public key is given.
    PublicKey,
}

impl TryFrom<String> for SignerKind {
    type Error = String;

    fn try_from(kind: String) -> Result<SignerKind, String> {
        match kind.as_str() {
            "public-key" => Ok(SignerKind::PublicKey),
            "keyless" | "github-action" | "certificate" => Err(format!(
                "kind = \"{kind}\" is not supported: keyless signatures need Fulcio and Rekor, which a cluster without internet cannot reach; sign with a key pair (`wasmsched key generate` or `cosign generate-key-pair`) and list its public key with kind = \"public-key\""
            )),
            _ => Err(format!("kind = \"{kind}\" is not a kind of signer; write kind = \"public-key\"")),
        }
    }
}

/// Which rule a signer is under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Must sign.
    AllOf,
    /// One of those of whom `minimum-matches` must sign.
    AnyOf,
}

/// A signer, loaded.
#[derive(Clone, Debug)]
pub struct Signer {
    /// Its name, else its key's fingerprint.
    pub label: String,
    /// Its public key.
    pub key: PublicKey,
    /// The annotations its signature must carry.
    pub annotations: BTreeMap<String, String>,
    /// Its rule.
    pub rule: Rule,
}

/// A [`TrustConfig`] with its keys read: what [`verify_artifact`] and [`verify_blob`] apply.
#[derive(Clone, Debug)]
pub struct Trust {
    signers: Vec<Signer>,
    minimum_matches: usize,
}

impl Trust {
    /// The signers, all-of first, in the config's order.
    pub fn signers(&self) -> &[Signer] {
        &self.signers
    }

    /// How many any-of signers must have signed (0 when there are none).
    pub fn minimum_matches(&self) -> usize {
        self.minimum_matches
    }
}

/// What a verification found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    /// The trusted signers who signed, in the config's order: names, else key fingerprints.
    pub signers: Vec<String>,
    /// How many signatures were found, trusted or not.
    pub signatures: usize,
}

impl std::fmt::Display for Verified {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = if self.signatures == 1 { "" } else { "s" };
        write!(f, "signed by {} ({} signature{s} found)", self.signers.join(", "), self.signatures)
    }
}

/// A new key pair, as `cosign generate-key-pair` writes it.
#[derive(Clone)]
pub struct KeyPair {
    /// The private key, encrypted with the password (`cosign.key`).
    pub private_pem: String,
    /// The public key (`cosign.pub`).
    pub public_pem: String,
}

/// Why a policy's signatures are refused, or could not be checked or made.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// The `[trust]` table cannot be used.
    #[error("[trust]: {detail}")]
    Config {
        /// What is wrong, and what to write.
        detail: String,
    },
    /// A file cannot be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A trusted public key cannot be used.
    #[error("{at}: cannot use the public key {key}: {detail}")]
    Key {
        /// Where it is listed: `trust.all-of[0]`.
        at: String,
        /// The file, or `key-pem`.
        key: String,
        /// What is wrong with it.
        detail: String,
    },
    /// A private key cannot be used to sign.
    #[error("cannot use the private key: {detail}")]
    PrivateKey {
        /// Why.
        detail: String,
    },
    /// Not a manifest digest.
    #[error("{digest:?} is not a manifest digest (sha256: and 64 hex digits); give the one `wasmsched push` printed")]
    NotADigest {
        /// As given.
        digest: String,
    },
    /// No signature of the digest in its repository.
    #[error(
        "{repository}@{digest} is not signed (no {tag} in its repository); sign it with `cosign sign --key cosign.key {repository}@{digest}` or `wasmsched sign {repository}@{digest} --key KEY`"
    )]
    Unsigned {
        /// `REGISTRY/REPOSITORY`.
        repository: String,
        /// The manifest's digest.
        digest: String,
        /// The tag looked for.
        tag: String,
    },
    /// Signatures, but not those the rules require.
    #[error(
        "{what} is not trusted: {signatures} signature{} found, {why}; sign it with the private key of {}, or trust its signer's public key in [trust]",
        if *signatures == 1 { "" } else { "s" }, missing.join(" and ")
    )]
    NotTrusted {
        /// What was verified: `REGISTRY/REPOSITORY@DIGEST`, or the blob.
        what: String,
        /// How many signatures were found.
        signatures: usize,
        /// The signers whose signatures are missing.
        missing: Vec<String>,
        /// Why the rules are not met.
        why: String,
    },
    /// A trusted signer's signature of another manifest, copied beside this one.
    #[error(
        "{what}: the signature by {signer} is of {signed}, not of this artifact: it was made for another artifact and copied here; sign this artifact itself"
    )]
    DigestMismatch {
        /// What was verified.
        what: String,
        /// Whose key made the signature.
        signer: String,
        /// The digest its payload names.
        signed: String,
    },
    /// A signature image or a signature that cannot be read.
    #[error("{what}: {detail}")]
    BadSignature {
        /// Where it is.
        what: String,
        /// What is wrong.
        detail: String,
    },
    /// The registry failed, or refused.
    #[error(transparent)]
    Registry(#[from] OciError),
}

impl TrustError {
    /// Whether the error refuses a policy (unsigned, signed by no one trusted, another
    /// artifact's signature, a signature that cannot be read), rather than failing to check it.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            TrustError::Unsigned { .. }
                | TrustError::NotTrusted { .. }
                | TrustError::DigestMismatch { .. }
                | TrustError::BadSignature { .. }
        )
    }
}

impl TrustConfig {
    /// One public key (a PEM file) that must have signed, as `wasmsched verify --key` trusts it.
    pub fn one_key(path: PathBuf) -> TrustConfig {
        let signer = SignerConfig {
            kind: SignerKind::PublicKey,
            name: None,
            key: Some(path),
            key_pem: None,
            annotations: [].into(),
        };
        TrustConfig { all_of: vec![signer], any_of: None }
    }

    /// The `[trust]` table of a TOML file (the host's config, or a file of its own); its other
    /// tables are not read.
    pub fn from_file(path: &Path) -> Result<TrustConfig, TrustError> {
        let text = std::fs::read_to_string(path).map_err(|source| TrustError::Read { path: path.into(), source })?;
        let config = |detail: String| TrustError::Config { detail: format!("{}: {detail}", path.display()) };
        let mut table: toml::Table = toml::from_str(&text).map_err(|e| config(e.to_string()))?;
        let trust = table.remove("trust").ok_or_else(|| config("it has no [trust] table".into()))?;
        trust.try_into().map_err(|e: toml::de::Error| config(e.to_string()))
    }

    /// Read the keys: a `key` path is relative to `base_dir` (the config file's folder), else to
    /// the current folder.
    pub fn load(&self, base_dir: Option<&Path>) -> Result<Trust, TrustError> {
        let config = |detail: String| TrustError::Config { detail };
        let any_of = self.any_of.as_ref();
        let any = any_of.map_or(&[][..], |a| a.signatures.as_slice());
        if self.all_of.is_empty() && any.is_empty() {
            return Err(config(
                "it names no signer: list one under [[trust.all-of]] or [[trust.any-of.signatures]], kind = \"public-key\" and key = \"PATH\"".into(),
            ));
        }
        let minimum_matches = any_of.map_or(0, |a| a.minimum_matches);
        if let Some(a) = any_of
            && (a.minimum_matches == 0 || a.minimum_matches > a.signatures.len())
        {
            return Err(config(format!(
                "trust.any-of.minimum-matches is {} with {} signatures listed: it must be from 1 to their number",
                a.minimum_matches,
                a.signatures.len()
            )));
        }
        let all = self.all_of.iter().enumerate().map(|(i, s)| (format!("trust.all-of[{i}]"), s, Rule::AllOf));
        let any = any.iter().enumerate().map(|(i, s)| (format!("trust.any-of.signatures[{i}]"), s, Rule::AnyOf));
        let signers = all.chain(any).map(|(at, s, rule)| s.load(at, rule, base_dir)).collect::<Result<_, _>>()?;
        Ok(Trust { signers, minimum_matches })
    }
}

impl SignerConfig {
    /// Read its key.
    fn load(&self, at: String, rule: Rule, base_dir: Option<&Path>) -> Result<Signer, TrustError> {
        let (name, text) = match (&self.key, &self.key_pem) {
            (Some(path), None) => {
                let path = match base_dir {
                    Some(dir) if path.is_relative() => dir.join(path),
                    _ => path.clone(),
                };
                let text = std::fs::read_to_string(&path).map_err(|e| TrustError::Key {
                    at: at.clone(),
                    key: path.display().to_string(),
                    detail: format!("{e}; give the path of a PEM public key (cosign.pub)"),
                })?;
                (path.display().to_string(), text)
            }
            (None, Some(pem)) => ("key-pem".to_string(), pem.clone()),
            (Some(_), Some(_)) => {
                return Err(TrustError::Config { detail: format!("{at}: give key or key-pem, not both") });
            }
            (None, None) => {
                return Err(TrustError::Config {
                    detail: format!("{at}: give key = \"PATH\" (a PEM public key, such as cosign.pub) or key-pem"),
                });
            }
        };
        let key = PublicKey::from_pem(&text).map_err(|detail| TrustError::Key { at, key: name, detail })?;
        let label = self.name.clone().filter(|n| !n.is_empty()).unwrap_or_else(|| key.fingerprint());
        Ok(Signer { label, key, annotations: self.annotations.clone(), rule })
    }
}

/// The reference of the signatures of `digest` in `reference`'s repository, and their tag.
fn signature_reference(reference: &str, digest: &str) -> Result<(Reference, String), TrustError> {
    let image = super::parse(reference)?;
    let tag = cosign::signature_tag(digest).ok_or_else(|| TrustError::NotADigest { digest: digest.into() })?;
    Ok((Reference::with_tag(image.registry().into(), image.repository().into(), tag.clone()), tag))
}

/// The manifests a signature image may be.
const SIGNATURE_MANIFEST_TYPES: [&str; 2] = [artifact::MANIFEST_MEDIA_TYPE, IMAGE_MANIFEST_MEDIA_TYPE];

/// Check the signatures of the manifest `manifest_digest` in `reference`'s repository (its tag
/// or digest, if any, is not used: the signatures are found by the digest) against `trust`.
pub async fn verify_artifact(
    trust: &Trust,
    reference: &str,
    manifest_digest: &str,
    options: &RegistryOptions,
) -> Result<Verified, TrustError> {
    let (signatures, tag) = signature_reference(reference, manifest_digest)?;
    let repository = format!("{}/{}", signatures.registry(), signatures.repository());
    let what = format!("{repository}@{manifest_digest}");
    let (client, auth, at) = super::connect(&signatures, options, "pull of the signatures")?;
    let unsigned =
        || TrustError::Unsigned { repository: repository.clone(), digest: manifest_digest.into(), tag: tag.clone() };
    let manifest = match client.pull_manifest_raw(&signatures, &auth, &SIGNATURE_MANIFEST_TYPES).await {
        Ok((manifest, _)) => manifest,
        Err(e) => {
            return Err(match at.error(e) {
                OciError::NotFound { .. } => unsigned(),
                other => other.into(),
            });
        }
    };
    let bad = |detail| TrustError::BadSignature { what: format!("{repository}:{tag}"), detail };
    let mut proofs = Vec::new();
    for layer in cosign::layers(&manifest).map_err(bad)? {
        let Some(signature) = &layer.signature else { continue };
        if layer.size > cosign::MAX_PAYLOAD_BYTES {
            proofs.push(Proof::default());
            continue;
        }
        let media_type = cosign::SIMPLE_SIGNING_MEDIA_TYPE.to_string();
        let size = i64::try_from(layer.size).unwrap_or(i64::MAX);
        let descriptor = OciDescriptor { media_type, digest: layer.digest.clone(), size, ..OciDescriptor::default() };
        let mut payload = Capped { bytes: Vec::new(), limit: cosign::MAX_PAYLOAD_BYTES };
        client.pull_blob(&signatures, &descriptor, &mut payload).await.map_err(|e| at.error(e))?;
        let found = artifact::digest(&payload.bytes);
        if found != layer.digest {
            let detail = format!("a signature's payload is {found}, its manifest says {}", layer.digest);
            return Err(OciError::DigestMismatch { reference: format!("{repository}:{tag}"), detail }.into());
        }
        proofs.push(prove_payload(trust, &payload.bytes, signature, manifest_digest));
    }
    if proofs.is_empty() {
        return Err(unsigned());
    }
    judge(trust, &what, &proofs, false)
}

/// Check `signature_b64`, `cosign sign-blob`'s signature of `bytes` (base64 of the ASN.1
/// ECDSA signature), against `trust`: one signature, so it satisfies at most the signers whose
/// key made it, and none that requires annotations.
pub fn verify_blob(trust: &Trust, bytes: &[u8], signature_b64: &str) -> Result<Verified, TrustError> {
    let what = "the blob";
    if BASE64.decode(signature_b64.trim()).is_err() {
        let detail = "the signature is not base64 (`cosign sign-blob` and `wasmsched sign --blob` write base64)".into();
        return Err(TrustError::BadSignature { what: what.into(), detail });
    }
    judge(trust, what, &[prove_blob(trust, bytes, signature_b64)], true)
}

/// A new key pair, the private key encrypted with `password` (cosign reads it from
/// COSIGN_PASSWORD; empty is allowed, as there).
pub fn generate_key_pair(password: &[u8]) -> Result<KeyPair, TrustError> {
    let failed = |detail| TrustError::PrivateKey { detail };
    let pkcs8 = PrivateKey::generate().map_err(failed)?;
    let public_pem = PrivateKey::from_pkcs8(&pkcs8).map_err(failed)?.public_key().to_pem();
    let private_pem = PrivateKey::encrypt_pem(&pkcs8, password).map_err(failed)?;
    Ok(KeyPair { private_pem, public_pem })
}

/// `cosign sign-blob`'s signature of `bytes`: base64 of the ASN.1 ECDSA signature.
pub fn sign_blob(bytes: &[u8], private_pem: &str, password: &[u8]) -> Result<String, TrustError> {
    let failed = |detail| TrustError::PrivateKey { detail };
    let key = PrivateKey::from_encrypted_pem(private_pem, password).map_err(failed)?;
    Ok(BASE64.encode(key.sign(bytes).map_err(failed)?))
}

/// Sign the manifest `manifest_digest` in `reference`'s repository as `cosign sign --key`
/// does: a payload naming the digest and `annotations`, signed, added as a layer to the
/// signature image at `sha256-<hex>.sig` (after the signatures there; not again if this key
/// signed the same payload already). The manifest must be in the registry. Returns the
/// signature image's reference, `REGISTRY/REPOSITORY:sha256-<hex>.sig`.
pub async fn sign_artifact(
    reference: &str,
    manifest_digest: &str,
    private_pem: &str,
    password: &[u8],
    annotations: &BTreeMap<String, String>,
    options: &RegistryOptions,
) -> Result<String, TrustError> {
    let failed = |detail| TrustError::PrivateKey { detail };
    let key = PrivateKey::from_encrypted_pem(private_pem, password).map_err(failed)?;
    let (signatures, tag) = signature_reference(reference, manifest_digest)?;
    let repository = format!("{}/{}", signatures.registry(), signatures.repository());
    let payload = cosign::payload(&repository, manifest_digest, annotations);
    let signature = BASE64.encode(key.sign(&payload).map_err(failed)?);
    let (client, auth, at) = super::connect(&signatures, options, "push of the signature")?;
    client.store_auth_if_needed(signatures.resolve_registry(), &auth).await;
    let signed =
        Reference::with_digest(signatures.registry().into(), signatures.repository().into(), manifest_digest.into());
    client.fetch_manifest_digest(&signed, &auth).await.map_err(|e| match at.error(e) {
        OciError::NotFound { detail, .. } => OciError::NotFound { reference: signed.whole(), detail },
        other => other,
    })?;
    let existing = match client.pull_manifest_raw(&signatures, &auth, &SIGNATURE_MANIFEST_TYPES).await {
        Ok((manifest, _)) => cosign::layers(&manifest)
            .map_err(|detail| TrustError::BadSignature { what: format!("{repository}:{tag}"), detail })?,
        Err(e) => match at.error(e) {
            OciError::NotFound { .. } => Vec::new(),
            other => return Err(other.into()),
        },
    };
    let payload_digest = artifact::digest(&payload);
    let public = key.public_key();
    let again = existing.iter().any(|l| {
        let theirs = l.signature.as_deref().and_then(|s| BASE64.decode(s).ok());
        l.digest == payload_digest && theirs.is_some_and(|s| public.verifies(&payload, &s))
    });
    let whole = format!("{repository}:{tag}");
    if again {
        return Ok(whole);
    }
    if existing.len() >= cosign::MAX_SIGNATURES {
        let detail = format!("it has {} signatures already, the most wasmsched reads", existing.len());
        return Err(TrustError::BadSignature { what: whole, detail });
    }
    let mut layers: Vec<serde_json::Value> = existing.into_iter().map(|l| l.descriptor).collect();
    layers.push(cosign::layer(&payload, &signature));
    let (config, manifest) = cosign::image(&layers);
    client.push_blob(&signatures, payload, &payload_digest).await.map_err(|e| at.error(e))?;
    client.push_blob(&signatures, config.clone(), &artifact::digest(&config)).await.map_err(|e| at.error(e))?;
    let media_type = artifact::MANIFEST_MEDIA_TYPE.parse().expect("a valid header value");
    client.push_manifest_raw(&signatures, manifest, media_type).await.map_err(|e| at.error(e))?;
    Ok(whole)
}

/// The digest of the manifest `reference` names now: its tag's, or the pinned one, found in
/// the registry (a digest it does not hold is refused, as is a tag that moved off a pin).
pub async fn manifest_digest(reference: &str, options: &RegistryOptions) -> Result<String, TrustError> {
    let image = super::parse(reference)?;
    let (client, auth, at) = super::connect(&image, options, "pull")?;
    Ok(client.fetch_manifest_digest(&image, &auth).await.map_err(|e| at.error(e))?)
}

/// A buffer that takes at most `limit` bytes: a registry cannot make a payload use more memory.
struct Capped {
    bytes: Vec<u8>,
    limit: u64,
}

impl tokio::io::AsyncWrite for Capped {
    fn poll_write(mut self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        if (self.bytes.len() + buf.len()) as u64 > self.limit {
            let limit = self.limit;
            return Poll::Ready(Err(std::io::Error::other(format!("a signature payload is over {limit} bytes"))));
        }
        self.bytes.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A key of the test's own (no scrypt: fast), its public PEM, and a signer of it.
    pub(crate) fn key() -> (PrivateKey, String) {
        let key = PrivateKey::from_pkcs8(&PrivateKey::generate().unwrap()).unwrap();
        let pem = key.public_key().to_pem();
        (key, pem)
    }

    pub(crate) fn signer(name: &str, pem: &str, annotations: &[(&str, &str)]) -> SignerConfig {
        SignerConfig {
            kind: SignerKind::PublicKey,
            name: Some(name.into()),
            key: None,
            key_pem: Some(pem.into()),
            annotations: annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        }
    }

    fn parse(toml: &str) -> Result<TrustConfig, String> {
        #[derive(Deserialize)]
        struct File {
            trust: TrustConfig,
        }
        toml::from_str::<File>(toml).map(|f| f.trust).map_err(|e| e.to_string())
    }

    #[test]
    fn the_documented_table_parses_and_loads_relative_key_files() {
        let dir = tempfile::tempdir().unwrap();
        let (_, release) = key();
        let (_, ops) = key();
        std::fs::write(dir.path().join("release.pub"), &release).unwrap();
        let config = parse(&format!(
            r#"
            [trust]
            [[trust.all-of]]
            kind = "public-key"
            name = "release"
            key = "release.pub"
            annotations = {{ env = "prod" }}
            [trust.any-of]
            minimum-matches = 1
            [[trust.any-of.signatures]]
            kind = "public-key"
            key-pem = """{ops}"""
            "#
        ))
        .unwrap();
        assert_eq!(config.all_of[0].annotations, BTreeMap::from([("env".into(), "prod".into())]));
        let trust = config.load(Some(dir.path())).unwrap();
        let labels: Vec<_> = trust.signers().iter().map(|s| (s.label.as_str(), s.rule)).collect();
        let ops_fingerprint = PublicKey::from_pem(&ops).unwrap().fingerprint();
        assert_eq!(labels, [("release", Rule::AllOf), (ops_fingerprint.as_str(), Rule::AnyOf)]);
        assert_eq!(trust.minimum_matches(), 1);
    }

    #[test]
    fn an_unknown_key_and_keyless_are_refused_with_what_to_write() {
        let err =
            parse("[trust]\n[[trust.all-of]]\nkind = \"public-key\"\nkey = \"k.pub\"\nissuer = \"x\"\n").unwrap_err();
        assert!(err.contains("unknown field `issuer`"), "{err}");
        let err = parse("[trust]\n[[trust.all-of]]\nkind = \"keyless\"\n").unwrap_err();
        assert!(err.contains("Fulcio and Rekor") && err.contains("kind = \"public-key\""), "{err}");
        let err = parse("[trust]\n[[trust.all-of]]\nkind = \"pgp\"\n").unwrap_err();
        assert!(err.contains("write kind = \"public-key\""), "{err}");
    }

    #[test]
    fn a_signer_needs_exactly_one_key_and_the_rules_one_signer() {
        let no_key = TrustConfig { all_of: vec![SignerConfig { key_pem: None, ..signer("a", "", &[]) }], any_of: None };
        let err = no_key.load(None).unwrap_err().to_string();
        assert!(err.contains("trust.all-of[0]: give key = \"PATH\""), "{err}");
        let both = TrustConfig {
            all_of: vec![SignerConfig { key: Some("k.pub".into()), ..signer("a", "x", &[]) }],
            any_of: None,
        };
        assert!(both.load(None).unwrap_err().to_string().contains("not both"));
        let err = TrustConfig::default().load(None).unwrap_err().to_string();
        assert!(err.contains("names no signer"), "{err}");
        let (_, pem) = key();
        for minimum in [0, 2] {
            let any_of = Some(AnyOf { minimum_matches: minimum, signatures: vec![signer("a", &pem, &[])] });
            let err = TrustConfig { all_of: vec![], any_of }.load(None).unwrap_err().to_string();
            assert!(err.contains(&format!("minimum-matches is {minimum} with 1 signatures")), "{err}");
        }
    }

    #[test]
    fn a_key_file_that_is_no_public_key_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cosign.key");
        std::fs::write(&path, keys::tests::COSIGN_PRIVATE_KEY).unwrap();
        let err = TrustConfig::one_key(path.clone()).load(None).unwrap_err().to_string();
        assert!(err.contains(&path.display().to_string()) && err.contains("not \"PUBLIC KEY\""), "{err}");
        let absent = dir.path().join("absent.pub");
        let err = TrustConfig::one_key(absent.clone()).load(None).unwrap_err().to_string();
        assert!(err.contains(&absent.display().to_string()) && err.contains("cosign.pub"), "{err}");
    }

    #[test]
    fn a_trust_file_is_read_for_its_trust_table_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("host.toml");
        std::fs::write(
            &path,
            "[backend]\nkind = \"sim\"\n[trust]\n[[trust.all-of]]\nkind = \"public-key\"\nkey = \"a.pub\"\n",
        )
        .unwrap();
        assert_eq!(TrustConfig::from_file(&path).unwrap(), TrustConfig::one_key("a.pub".into()));
        std::fs::write(&path, "[backend]\n").unwrap();
        assert!(TrustConfig::from_file(&path).unwrap_err().to_string().contains("has no [trust] table"));
    }

    #[test]
    fn a_blob_signed_verifies_and_other_bytes_or_another_key_are_refused() {
        let pair = generate_key_pair(b"pw").unwrap();
        let signature = sign_blob(b"policy", &pair.private_pem, b"pw").unwrap();
        let trust =
            TrustConfig { all_of: vec![signer("release", &pair.public_pem, &[])], any_of: None }.load(None).unwrap();
        let verified = verify_blob(&trust, b"policy", &signature).unwrap();
        assert_eq!(verified, Verified { signers: vec!["release".into()], signatures: 1 });
        let err = verify_blob(&trust, b"policy!", &signature).unwrap_err();
        assert!(matches!(&err, TrustError::NotTrusted { missing, .. } if missing == &["release"]), "{err}");
        let (_, other) = key();
        let other = TrustConfig { all_of: vec![signer("other", &other, &[])], any_of: None }.load(None).unwrap();
        assert!(matches!(verify_blob(&other, b"policy", &signature), Err(TrustError::NotTrusted { .. })));
        assert!(matches!(verify_blob(&trust, b"policy", "not base64!"), Err(TrustError::BadSignature { .. })));
        assert!(matches!(sign_blob(b"policy", &pair.private_pem, b"wrong"), Err(TrustError::PrivateKey { .. })));
    }
}
