//! Who a registry is told we are: anonymous, the user and password given, or what Docker's
//! `config.json` holds for the registry (`$DOCKER_CONFIG/config.json`, else
//! `~/.docker/config.json`): an `auths` entry (`auth`, base64 `user:password`, or `username` and
//! `password`), or a credential helper it names (`credsStore`, `credHelpers`), run as Docker
//! runs it. Read by the `docker_credential` crate.

use std::path::{Path, PathBuf};

use docker_credential::{CredentialRetrievalError, DockerCredential};

/// Which credentials to offer a registry.
#[derive(Clone, Debug, Default)]
pub enum Auth {
    /// What Docker's config holds for the registry; none when it holds nothing (the default).
    #[default]
    DockerConfig,
    /// This user and password (`--username`, `--password-stdin`).
    Basic {
        /// The user.
        username: String,
        /// The password.
        password: String,
    },
    /// None at all.
    Anonymous,
}

/// Credentials, resolved for one registry.
#[derive(Clone, PartialEq, Eq)]
pub enum Credentials {
    /// None.
    Anonymous,
    /// HTTP basic: the registry's token service is asked with them where it has one.
    Basic(String, String),
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credentials::Anonymous => f.write_str("Anonymous"),
            Credentials::Basic(user, _) => write!(f, "Basic({user}, <redacted>)"),
        }
    }
}

/// Why Docker's config gave no credentials that can be used.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The file is there but cannot be read or parsed.
    #[error("cannot read Docker's config {path} ({detail}); fix or move it, or give --username and --password-stdin")]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// It names a credential helper for the registry that could not be run or failed.
    #[error(
        "Docker's config {path} leaves the credentials for {registry} to a credential helper (credsStore or credHelpers), and it failed: {detail}; install the helper (docker-credential-NAME on the PATH), or give --username and --password-stdin"
    )]
    Helper {
        /// The file.
        path: PathBuf,
        /// The registry.
        registry: String,
        /// What went wrong.
        detail: String,
    },
    /// It holds an identity token, which this host does not exchange.
    #[error(
        "Docker's config {path} holds an identity token for {registry}, which wasmsched cannot use; give --username and --password-stdin (a password or an access token)"
    )]
    IdentityToken {
        /// The file.
        path: PathBuf,
        /// The registry.
        registry: String,
    },
}

/// Where Docker's config is: `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`.
pub fn docker_config_path() -> Option<PathBuf> {
    let dir = std::env::var_os("DOCKER_CONFIG")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".docker")))?;
    Some(dir.join("config.json"))
}

impl Auth {
    /// The credentials for `registry` (`host[:port]`, as a reference names it).
    pub fn resolve(&self, registry: &str) -> Result<Credentials, AuthError> {
        match self {
            Auth::Anonymous => Ok(Credentials::Anonymous),
            Auth::Basic { username, password } => Ok(Credentials::Basic(username.clone(), password.clone())),
            Auth::DockerConfig => match docker_config_path() {
                Some(path) if path.exists() => from_docker_config(&path, registry),
                _ => Ok(Credentials::Anonymous),
            },
        }
    }
}

/// What the Docker config at `path` holds for `registry`; anonymous when it holds nothing.
pub fn from_docker_config(path: &Path, registry: &str) -> Result<Credentials, AuthError> {
    let file =
        std::fs::File::open(path).map_err(|e| AuthError::Config { path: path.to_path_buf(), detail: e.to_string() })?;
    match docker_credential::get_credential_from_reader(std::io::BufReader::new(file), registry) {
        Ok(DockerCredential::UsernamePassword(user, password)) => Ok(Credentials::Basic(user, password)),
        Ok(DockerCredential::IdentityToken(_)) => {
            Err(AuthError::IdentityToken { path: path.to_path_buf(), registry: registry.into() })
        }
        Err(CredentialRetrievalError::NoCredentialConfigured) => Ok(Credentials::Anonymous),
        // A store that has nothing for this registry says so; Docker then goes anonymous too.
        Err(CredentialRetrievalError::HelperFailure { stdout, stderr, .. })
            if (stdout.contains("credentials not found") || stderr.contains("credentials not found")) =>
        {
            Ok(Credentials::Anonymous)
        }
        Err(
            e @ (CredentialRetrievalError::HelperCommunicationError
            | CredentialRetrievalError::MalformedHelperResponse
            | CredentialRetrievalError::HelperFailure { .. }),
        ) => Err(AuthError::Helper { path: path.to_path_buf(), registry: registry.into(), detail: one_line(&e) }),
        Err(e) => Err(AuthError::Config { path: path.to_path_buf(), detail: one_line(&e) }),
    }
}

/// An error's words on one line.
fn one_line(e: &CredentialRetrievalError) -> String {
    e.to_string().split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(json: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        std::fs::write(&path, json).unwrap();
        (dir, path)
    }

    #[test]
    fn an_auth_entry_gives_its_user_and_password_and_other_registries_go_anonymous() {
        // base64("ann:s3cret")
        let (_dir, path) = config(r#"{"auths":{"127.0.0.1:5000":{"auth":"YW5uOnMzY3JldA=="}}}"#);
        assert_eq!(
            from_docker_config(&path, "127.0.0.1:5000").unwrap(),
            Credentials::Basic("ann".into(), "s3cret".into())
        );
        assert_eq!(from_docker_config(&path, "ghcr.io").unwrap(), Credentials::Anonymous);
    }

    #[test]
    fn username_and_password_fields_are_read_too() {
        let (_dir, path) = config(r#"{"auths":{"ghcr.io":{"username":"bo","password":"pw"}}}"#);
        assert_eq!(from_docker_config(&path, "ghcr.io").unwrap(), Credentials::Basic("bo".into(), "pw".into()));
    }

    #[test]
    fn a_helper_that_cannot_be_run_is_named_with_what_to_do() {
        let (_dir, path) = config(r#"{"credHelpers":{"registry.example":"wasmsched-test-no-such-helper"},"auths":{}}"#);
        let err = from_docker_config(&path, "registry.example").unwrap_err().to_string();
        assert!(err.contains("credential helper") && err.contains("--password-stdin"), "{err}");
        assert_eq!(from_docker_config(&path, "other.example").unwrap(), Credentials::Anonymous);
    }

    #[test]
    fn a_broken_config_is_named() {
        let (_dir, path) = config("{not json");
        let err = from_docker_config(&path, "ghcr.io").unwrap_err().to_string();
        assert!(err.contains(&path.display().to_string()), "{err}");
    }

    #[test]
    fn a_password_is_never_printed() {
        assert_eq!(format!("{:?}", Credentials::Basic("u".into(), "hunter2".into())), "Basic(u, <redacted>)");
    }
}
