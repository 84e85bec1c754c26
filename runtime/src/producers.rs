//! Which toolchain built a component, where it says so: the `producers` custom sections of the
//! component and of the core modules inside it (languages, the tools that processed it and
//! the SDKs, each with a version), and, for toolchains that bundle an interpreter and do not
//! name themselves there, the names of the runtime modules they link in (componentize-py's
//! `componentize_py_runtime` beside `libpython3.14.so`, componentize-qjs's
//! `componentize_qjs_runtime`). `validate` prints it beside the contract.

use std::fmt;

use wasmparser::{KnownCustom, Parser, Payload};

/// What a component's producers sections say, each list in first-seen order without repeats.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Producers {
    /// Source languages ("Rust", "Python"), with versions where given.
    pub languages: Vec<String>,
    /// Tools that processed it ("rustc 1.95.0", "componentize-py 0.25.1").
    pub processed_by: Vec<String>,
    /// SDKs it was built with.
    pub sdks: Vec<String>,
}

/// Toolchains that bundle an interpreter, known by a module name in the component's
/// `component-name` section: the marker, the language, and the tool. Their producers sections
/// name only the interpreter's own build (rustc, clang), which says nothing to an author.
const BUNDLED: &[(&str, &str, &str)] = &[
    ("componentize_py_runtime", "Python", "componentize-py"),
    ("componentize_qjs_runtime", "JavaScript", "componentize-qjs, QuickJS"),
];

/// Tools that every component of any language passes through: they say nothing of the
/// language toolchain, so the summary leaves them out.
const GENERIC_TOOLS: &[&str] = &["wit-component", "wasm-tools", "wizer", "wasm-opt", "wit-bindgen-c"];

impl Producers {
    /// Read them from a component or module; empty when it says nothing (or is not wasm).
    pub fn of(bytes: &[u8]) -> Producers {
        let mut found = Producers::default();
        let mut bundled = None;
        for payload in Parser::new(0).parse_all(bytes) {
            let Ok(Payload::CustomSection(section)) = payload else { continue };
            if section.name() == "component-name" {
                bundled = bundled.or_else(|| bundled_toolchain(section.data()));
            }
            let KnownCustom::Producers(reader) = section.as_known() else { continue };
            for field in reader.into_iter().flatten() {
                let list = match field.name {
                    "language" => &mut found.languages,
                    "processed-by" => &mut found.processed_by,
                    "sdk" => &mut found.sdks,
                    _ => continue,
                };
                for value in field.values.into_iter().flatten() {
                    // "1.95.0 (59807616e 2026-04-14)": the version is the first word.
                    let entry = match value.version.split_whitespace().next() {
                        Some(version) => format!("{} {version}", value.name),
                        None => value.name.to_string(),
                    };
                    if !list.contains(&entry) {
                        list.push(entry);
                    }
                }
            }
        }
        if let Some((language, tool)) = bundled {
            // What the sections say is the interpreter's own build: the author's toolchain is
            // the bundling tool.
            found.languages = vec![language];
            found.processed_by = vec![tool.to_string()];
        }
        found
    }

    /// True when no section said anything.
    pub fn is_empty(&self) -> bool {
        self.languages.is_empty() && self.processed_by.is_empty() && self.sdks.is_empty()
    }

    /// The tools that name a language toolchain (generic component tooling left out).
    fn toolchain_tools(&self) -> impl Iterator<Item = &str> {
        self.processed_by.iter().chain(&self.sdks).map(String::as_str).filter(|t| {
            let name = t.split(' ').next().unwrap_or(t);
            !GENERIC_TOOLS.contains(&name)
        })
    }
}

/// A bundled interpreter's language (with its version where a module name gives it, as
/// `libpython3.14.so` does) and tool, from a `component-name` section's bytes.
fn bundled_toolchain(names: &[u8]) -> Option<(String, &'static str)> {
    let contains = |needle: &[u8]| names.windows(needle.len()).position(|w| w == needle);
    let &(_, language, tool) = BUNDLED.iter().find(|(marker, _, _)| contains(marker.as_bytes()).is_some())?;
    let version = contains(b"libpython").map(|at| {
        let rest = &names[at + b"libpython".len()..];
        let digits = rest.iter().take_while(|b| b.is_ascii_digit() || **b == b'.').count();
        String::from_utf8_lossy(&rest[..digits]).trim_end_matches('.').to_string()
    });
    Some(match version.filter(|v| !v.is_empty() && language == "Python") {
        Some(v) => (format!("{language} {v}"), tool),
        None => (language.to_string(), tool),
    })
}

/// "Python 3.14 (componentize-py)" or "Rust (rustc 1.95.0, wit-bindgen-rust 0.61.1)";
/// "unknown toolchain" when the component says nothing.
impl fmt::Display for Producers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tools: Vec<&str> = self.toolchain_tools().collect();
        match (self.languages.is_empty(), tools.is_empty()) {
            (true, true) => f.write_str("unknown toolchain"),
            (false, true) => f.write_str(&self.languages.join(", ")),
            (true, false) => f.write_str(&tools.join(", ")),
            (false, false) => write!(f, "{} ({})", self.languages.join(", "), tools.join(", ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shipped_rust_policy_says_it_is_rust() {
        let fair_share = wasmsched_shipped::by_name("fair-share").unwrap();
        let p = Producers::of(fair_share.wasm);
        assert!(p.languages.iter().any(|l| l.starts_with("Rust")), "{p:?}");
        assert!(p.to_string().starts_with("Rust") && p.to_string().contains("(rustc 1."), "{p}");
        assert!(!p.to_string().contains("wit-component"), "generic tools are left out: {p}");
    }

    #[test]
    fn a_bundled_interpreter_is_known_by_its_runtime_module_and_the_rust_inside_it_is_not_shown() {
        let names = b"\x00libc.so\x01componentize_py_runtime\x02libpython3.14.so\x03";
        assert_eq!(bundled_toolchain(names), Some(("Python 3.14".to_string(), "componentize-py")));
        let js = b"\x05componentize_qjs_runtime.wasm";
        assert_eq!(bundled_toolchain(js), Some(("JavaScript".to_string(), "componentize-qjs, QuickJS")));
        assert_eq!(bundled_toolchain(b"\x00libc.so"), None);
    }

    #[test]
    fn bytes_that_are_not_wasm_say_nothing() {
        let p = Producers::of(b"not a component");
        assert!(p.is_empty());
        assert_eq!(p.to_string(), "unknown toolchain");
    }
}
