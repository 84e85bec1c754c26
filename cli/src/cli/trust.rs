//! Signed policies: `key generate` (a key pair as cosign writes it), `sign` (an artifact in its
//! registry, or a file) and `verify` (against a `[trust]` table or one public key). The
//! private key's password comes from COSIGN_PASSWORD, as for cosign.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;

use wasmsched::oci::RegistryOptions;
use wasmsched::oci::trust::{self, PublicKey, TrustConfig, TrustError, Verified};

use super::oci::{RegistryArgs, block_on, reference_without_digest};

/// `wasmsched key …`.
#[derive(Subcommand)]
pub enum KeyCommand {
    /// Write a new key pair as `cosign generate-key-pair` does: PREFIX.key, the private key
    /// encrypted with the password in COSIGN_PASSWORD (empty when unset), readable by its owner
    /// only, and PREFIX.pub, the public key to list in `[trust]`.
    Generate {
        /// Where: PREFIX.key and PREFIX.pub (`release` writes release.key and release.pub).
        prefix: PathBuf,
    },
}

/// The private key's password: COSIGN_PASSWORD, empty when unset (as cosign without a terminal).
fn password() -> Vec<u8> {
    std::env::var_os("COSIGN_PASSWORD").map(OsString::into_encoded_bytes).unwrap_or_default()
}

/// `KEY=VALUE`, for `-a`.
pub fn parse_annotation(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.into(), value.into())),
        _ => Err(format!("{text:?} is not KEY=VALUE (-a env=prod)")),
    }
}

/// `wasmsched key generate PREFIX`.
pub fn key(command: &KeyCommand) -> anyhow::Result<ExitCode> {
    let KeyCommand::Generate { prefix } = command;
    let with = |extension: &str| {
        let mut path = prefix.as_os_str().to_owned();
        path.push(extension);
        PathBuf::from(path)
    };
    let (private, public) = (with(".key"), with(".pub"));
    for path in [&private, &public] {
        anyhow::ensure!(!path.exists(), "{} exists: remove it, or choose another PREFIX", path.display());
    }
    if std::env::var_os("COSIGN_PASSWORD").is_none() {
        say!("COSIGN_PASSWORD is not set: the private key is encrypted with an empty password");
    }
    let pair = trust::generate_key_pair(&password())?;
    write_private(&private, &pair.private_pem)?;
    std::fs::write(&public, &pair.public_pem).with_context(|| format!("cannot write {}", public.display()))?;
    let fingerprint = PublicKey::from_pem(&pair.public_pem).map(|k| k.fingerprint()).unwrap_or_default();
    out!(
        "wrote {} (private, encrypted with COSIGN_PASSWORD) and {} (public, {fingerprint}: list it in [trust])",
        private.display(),
        public.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Create `path` for its owner alone (0600), never over an existing file.
fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).with_context(|| format!("cannot create {}", path.display()))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// The digest `reference` pins, else the one its tag names now (said on stderr).
fn digest_of(reference: &str, options: &RegistryOptions) -> anyhow::Result<String> {
    if let Some((_, digest)) = reference.rsplit_once('@') {
        return Ok(digest.into());
    }
    let digest = block_on(trust::manifest_digest(reference, options))??;
    say!("{reference} is a tag: it names {digest} now, and that is the manifest meant; give REF@{digest} to be sure");
    Ok(digest)
}

/// `wasmsched sign REF --key K [-a KEY=VALUE]…`: sign the artifact in its registry.
pub fn sign(
    reference: &str,
    key: &Path,
    annotations: Vec<(String, String)>,
    registry: &RegistryArgs,
) -> anyhow::Result<ExitCode> {
    let private_pem = read_key(key)?;
    let options = registry.options()?;
    let digest = digest_of(reference, &options)?;
    let annotations: BTreeMap<String, String> = annotations.into_iter().collect();
    let signature =
        block_on(trust::sign_artifact(reference, &digest, &private_pem, &password(), &annotations, &options))?
            .with_context(|| format!("cannot sign with {}", key.display()))?;
    out!("signed {}@{digest} (signature {signature})", reference_without_digest(reference));
    Ok(ExitCode::SUCCESS)
}

/// `wasmsched sign --blob FILE --key K [-o FILE.sig]`: its signature as `cosign sign-blob`
/// writes it (base64), printed or written.
pub fn sign_blob(file: &Path, key: &Path, output: Option<&Path>) -> anyhow::Result<ExitCode> {
    let private_pem = read_key(key)?;
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let signature = trust::sign_blob(&bytes, &private_pem, &password())
        .with_context(|| format!("cannot sign with {}", key.display()))?;
    match output {
        Some(path) => {
            std::fs::write(path, &signature).with_context(|| format!("cannot write {}", path.display()))?;
            out!("wrote the signature of {} to {}", file.display(), path.display());
        }
        None => out!("{signature}"),
    }
    Ok(ExitCode::SUCCESS)
}

fn read_key(key: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(key).with_context(|| format!("cannot read the private key {}", key.display()))
}

/// What `verify` checks against: a `[trust]` table, or one public key.
pub enum Trusted<'a> {
    /// A TOML file with a `[trust]` table (`--trust`).
    Table(&'a Path),
    /// One public key that must have signed (`--key`).
    Key(&'a Path),
}

impl Trusted<'_> {
    fn load(&self) -> anyhow::Result<trust::Trust> {
        Ok(match self {
            Trusted::Table(path) => {
                let base = path.parent().filter(|p| !p.as_os_str().is_empty());
                TrustConfig::from_file(path)?.load(base)?
            }
            Trusted::Key(path) => TrustConfig::one_key(path.to_path_buf()).load(None)?,
        })
    }
}

/// `wasmsched verify REF`: who signed it, or why it is refused (exit 1).
pub fn verify(reference: &str, trusted: &Trusted, registry: &RegistryArgs) -> anyhow::Result<ExitCode> {
    let trust = trusted.load()?;
    let options = registry.options()?;
    let digest = digest_of(reference, &options)?;
    let verified = block_on(trust::verify_artifact(&trust, reference, &digest, &options))?;
    report(&format!("{}@{digest}", reference_without_digest(reference)), verified)
}

/// `wasmsched verify --blob FILE --signature FILE.sig`.
pub fn verify_blob(file: &Path, signature: &Path, trusted: &Trusted) -> anyhow::Result<ExitCode> {
    let trust = trusted.load()?;
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let signature =
        std::fs::read_to_string(signature).with_context(|| format!("cannot read {}", signature.display()))?;
    report(&file.display().to_string(), trust::verify_blob(&trust, &bytes, &signature))
}

/// Who signed, exit 0; a refusal, exit 1; a failure to check, exit 2 (an error).
fn report(what: &str, verified: Result<Verified, TrustError>) -> anyhow::Result<ExitCode> {
    match verified {
        Ok(verified) => {
            out!("verified {what}: {verified}");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) if e.is_refusal() => {
            say!("refused {what}: {e}");
            Ok(ExitCode::FAILURE)
        }
        Err(e) => Err(e).with_context(|| format!("cannot verify {what}")),
    }
}
