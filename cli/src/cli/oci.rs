//! Policies in OCI registries: `push` (a component up, its digest printed) and `pull` (one
//! down, checked, written whole).

use std::io::Read;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use wasmsched::oci::{self, Auth, RegistryOptions};

/// How to reach the registry, shared by `push`, `pull`, `sign` and `verify`.
#[derive(Args)]
pub struct RegistryArgs {
    /// Speak plain HTTP to the registry, without TLS (registries on loopback always get it).
    #[arg(long)]
    pub insecure: bool,
    /// Log in as this user, with the password read from standard input (--password-stdin);
    /// without, the credentials Docker's config.json holds for the registry, else none.
    #[arg(long, requires = "password_stdin")]
    pub username: Option<String>,
    /// Read the password (or access token) for --username from standard input.
    #[arg(long, requires = "username")]
    pub password_stdin: bool,
}

impl RegistryArgs {
    pub(super) fn options(&self) -> anyhow::Result<RegistryOptions> {
        let auth = match &self.username {
            Some(username) => {
                let mut password = String::new();
                std::io::stdin()
                    .read_to_string(&mut password)
                    .context("cannot read the password from standard input")?;
                let password = password.trim_end_matches(['\n', '\r']).to_string();
                anyhow::ensure!(
                    !password.is_empty(),
                    "--password-stdin read no password: pipe it in (`echo \"$TOKEN\" | wasmsched …`)"
                );
                Auth::Basic { username: username.clone(), password }
            }
            None => Auth::DockerConfig,
        };
        Ok(RegistryOptions { insecure: self.insecure, auth })
    }
}

/// `wasmsched push FILE REF`: print `REF@sha256:…`.
pub fn push(file: &Path, reference: &str, registry: &RegistryArgs) -> anyhow::Result<ExitCode> {
    let options = registry.options()?;
    let pushed = block_on(oci::push(file, reference, &options))??;
    out!("pushed {}@{}", pushed.reference, pushed.digest);
    Ok(ExitCode::SUCCESS)
}

/// `wasmsched pull REF [-o FILE]`: say where it went and its digests.
pub fn pull(reference: &str, output: Option<&Path>, registry: &RegistryArgs) -> anyhow::Result<ExitCode> {
    let options = registry.options()?;
    let pulled = block_on(oci::pull(reference, &options, output))??;
    out!(
        "pulled {}@{} to {} ({} bytes, {})",
        reference_without_digest(&pulled.reference),
        pulled.digest,
        pulled.path.display(),
        pulled.bytes.len(),
        pulled.layer_digest
    );
    Ok(ExitCode::SUCCESS)
}

/// `REGISTRY/REPOSITORY:TAG` of a reference that may end in `@DIGEST`.
pub(super) fn reference_without_digest(reference: &str) -> &str {
    reference.split_once('@').map_or(reference, |(name, _)| name)
}

/// Run one future on a runtime of its own (a push, a pull, a rollback: a few requests in a row).
pub(super) fn block_on<T>(future: impl Future<Output = T>) -> anyhow::Result<T> {
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().context("cannot start the async runtime")?;
    Ok(runtime.block_on(future))
}
