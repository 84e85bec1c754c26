//! `wasmsched new`: a ready policy project outside this workspace, in Rust, Python or
//! JavaScript — the policy (an equal CPU share per node, to start from), a native test, its
//! build command and a README — that builds, passes its test and passes `validate` as written.
//! The templates (`templates/new/`), the contract and the Python and JavaScript SDKs are
//! embedded in the binary ([`wasmsched_shipped::SCAFFOLD_FILES`]); a Rust project depends on
//! a checkout's `sdk/` by path.

use std::fmt;
use std::path::{Path, PathBuf};

use wasmsched_shipped::SCAFFOLD_FILES;

/// The language of a new policy project.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// Rust, against the SDK crate (`cargo test`, `cargo build --target wasm32-wasip2`).
    Rust,
    /// Python, with a copy of the SDK package (`pytest`, componentize-py).
    Python,
    /// JavaScript, with a copy of the SDK module (`node --test`, componentize-qjs).
    Js,
}

impl Lang {
    fn folder(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::Js => "js",
        }
    }
}

impl fmt::Display for Lang {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.folder())
    }
}

/// Why a project could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    /// The name is not a usable package and file name.
    #[error(
        "{0:?} is not a policy name: use lowercase letters, digits and '-', starting with a letter (like `my-policy`)"
    )]
    Name(String),
    /// The folder is there and not empty.
    #[error("{} already exists and is not empty: pick another name, or --dir", .0.display())]
    Exists(PathBuf),
    /// A Rust project needs the SDK's source.
    #[error(
        "the Rust SDK is not at {}: pass --sdk with the path of a wasmsched checkout's sdk/ folder",
        .0.display()
    )]
    NoSdk(PathBuf),
    /// Writing failed.
    #[error("cannot write {}", .path.display())]
    Write {
        /// The file or folder.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
}

/// A project as written: where, and the commands that test, build and check it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Project {
    /// Its folder.
    pub dir: PathBuf,
    /// Its language.
    pub lang: Lang,
    /// The component its build writes, inside `dir`.
    pub wasm: PathBuf,
}

impl Project {
    /// The commands, run in the project's folder, that install its toolchain (once), run its
    /// native tests and build its component; what its README says.
    pub fn commands(&self) -> [&'static str; 3] {
        match self.lang {
            Lang::Rust => {
                ["rustup target add wasm32-wasip2", "cargo test", "cargo build --release --target wasm32-wasip2"]
            }
            Lang::Python => [
                "python3 -m venv .venv && .venv/bin/pip install -r requirements.txt",
                ".venv/bin/pytest",
                "COMPONENTIZE_PY=.venv/bin/componentize-py ./build.sh",
            ],
            Lang::Js => ["npm install", "npm test", "npm run build"],
        }
    }
}

/// The Rust SDK of the checkout this binary was built from.
pub fn default_sdk() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map_or_else(|| PathBuf::from("sdk"), |root| root.join("sdk"))
}

/// Whether `name` can name a package, a Python module and a file: `[a-z][a-z0-9-]*`, no
/// trailing or doubled '-'.
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-')
        && !name.contains("--")
        && name.len() <= 64
}

/// `my-policy` → `MyPolicy`.
fn camel(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map(|c| c.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
        })
        .collect()
}

/// What the templates leave to fill: the name, the name with `_` for `-`, the name in
/// CamelCase, the Rust SDK's folder, the pinned componentize-qjs version.
const PLACEHOLDERS: [&str; 5] = ["{{name}}", "{{module}}", "{{type}}", "{{sdk}}", "{{componentize_qjs}}"];

/// The embedded file at `path`.
fn embedded(path: &str) -> &'static str {
    SCAFFOLD_FILES
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, text)| *text)
        .unwrap_or_else(|| panic!("{path} is not embedded: the shipped build embeds it (shipped/build.rs)"))
}

/// The componentize-qjs version the project's toolchains pin.
fn componentize_qjs_version() -> String {
    let pins: serde_json::Value = serde_json::from_str(embedded("toolchains/package.json")).expect("valid JSON");
    pins["dependencies"]["componentize-qjs"].as_str().expect("componentize-qjs is pinned").to_string()
}

/// Write a new `lang` project for the policy `name` into `dir` (created; it must not exist or
/// be empty). `sdk` is the Rust SDK's folder, for a Rust project.
pub fn create(name: &str, lang: Lang, dir: &Path, sdk: &Path) -> Result<Project, ScaffoldError> {
    if !valid_name(name) {
        return Err(ScaffoldError::Name(name.to_string()));
    }
    if std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some()) {
        return Err(ScaffoldError::Exists(dir.to_path_buf()));
    }
    let module = name.replace('-', "_");
    let sdk = if lang == Lang::Rust {
        std::fs::canonicalize(sdk)
            .ok()
            .filter(|p| p.join("Cargo.toml").is_file())
            .ok_or_else(|| ScaffoldError::NoSdk(sdk.to_path_buf()))?
    } else {
        PathBuf::new()
    };
    let values = [name.to_string(), module.clone(), camel(name), sdk.display().to_string(), componentize_qjs_version()];
    let fill = |text: &str| PLACEHOLDERS.iter().zip(&values).fold(text.to_string(), |t, (p, v)| t.replace(p, v));
    let template = format!("templates/new/{}/", lang.folder());
    let mut files: Vec<(String, String)> = SCAFFOLD_FILES
        .iter()
        .filter_map(|(path, text)| path.strip_prefix(&template).map(|rel| (fill(rel), fill(text))))
        .collect();
    let copy = |prefix: &str, to: &str, files: &mut Vec<(String, String)>| {
        for (path, text) in SCAFFOLD_FILES {
            if let Some(rel) = path.strip_prefix(prefix) {
                files.push((format!("{to}{rel}"), text.to_string()));
            }
        }
    };
    match lang {
        Lang::Rust => {}
        Lang::Python => {
            copy("sdk/python/wasmsched/", "wasmsched/", &mut files);
            copy("toolchains/requirements.txt", "requirements.txt", &mut files);
            // The Python and JS SDKs speak contract 0.3.0, which the host serves through its
            // adapter.
            copy("wit/0.3.0/policy.wit", "wit/policy.wit", &mut files);
        }
        Lang::Js => {
            copy("sdk/js/wasmsched.js", "sdk/wasmsched.js", &mut files);
            copy("sdk/js/testing.js", "sdk/testing.js", &mut files);
            copy("sdk/js/rules.js", "sdk/rules.js", &mut files);
            copy("wit/0.3.0/policy.wit", "wit/policy.wit", &mut files);
        }
    }
    for (rel, text) in &files {
        let path = dir.join(rel);
        let write = |p: &Path| -> std::io::Result<()> {
            std::fs::create_dir_all(p.parent().expect("a file in the project"))?;
            std::fs::write(p, text)?;
            if rel.ends_with(".sh") {
                make_executable(p)?;
            }
            Ok(())
        };
        write(&path).map_err(|source| ScaffoldError::Write { path: path.clone(), source })?;
    }
    let wasm = match lang {
        Lang::Rust => PathBuf::from(format!("target/wasm32-wasip2/release/{module}.wasm")),
        Lang::Python | Lang::Js => PathBuf::from(format!("{module}.wasm")),
    };
    Ok(Project { dir: dir.to_path_buf(), lang, wasm })
}

#[cfg(unix)]
fn make_executable(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
}

#[cfg(not(unix))]
fn make_executable(_: &Path) -> std::io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_packages_modules_and_types() {
        assert!(valid_name("my-policy") && valid_name("p2"));
        for bad in ["", "My", "-x", "x-", "a--b", "a_b", "a b", "ü"] {
            assert!(!valid_name(bad), "{bad:?}");
        }
        assert_eq!(camel("my-policy-2"), "MyPolicy2");
    }

    #[test]
    fn every_language_gets_its_files_with_nothing_left_to_fill() {
        let sdk = default_sdk();
        for (lang, must) in [
            (Lang::Rust, &["Cargo.toml", ".cargo/config.toml", "src/lib.rs", "README.md"][..]),
            (
                Lang::Python,
                &[
                    "my_policy.py",
                    "test_my_policy.py",
                    "app.py",
                    "build.sh",
                    "wasmsched/__init__.py",
                    "wit/policy.wit",
                    "requirements.txt",
                ],
            ),
            (
                Lang::Js,
                &[
                    "policy.js",
                    "policy.test.js",
                    "package.json",
                    "sdk/wasmsched.js",
                    "sdk/testing.js",
                    "sdk/rules.js",
                    "wit/policy.wit",
                ],
            ),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let project = create("my-policy", lang, &dir.path().join("p"), &sdk).unwrap();
            for file in must {
                let path = project.dir.join(file);
                let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{lang}: {file}: {e}"));
                for placeholder in PLACEHOLDERS {
                    assert!(!text.contains(placeholder), "{lang}: {file} has {placeholder} left");
                }
            }
            let readme = std::fs::read_to_string(project.dir.join("README.md")).unwrap();
            for command in project.commands().iter().skip(1) {
                assert!(readme.contains(command), "{lang}: the README says how to {command}");
            }
            let again = create("my-policy", lang, &project.dir, &sdk).unwrap_err();
            assert!(matches!(again, ScaffoldError::Exists(_)), "{again}");
        }
    }

    #[test]
    fn a_rust_project_without_the_sdk_says_where_to_point() {
        let dir = tempfile::tempdir().unwrap();
        let err = create("p", Lang::Rust, &dir.path().join("p"), Path::new("/nowhere/sdk")).unwrap_err();
        assert!(err.to_string().contains("--sdk"), "{err}");
    }
}
