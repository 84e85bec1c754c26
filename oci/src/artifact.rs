//! The Wasm OCI artifact, as CNCF TAG Runtime lays it out: an OCI image manifest whose config
//! is a [`WasmConfig`] (`application/vnd.wasm.config.v0+json`) and whose one layer is the
//! component (`application/wasm`). The config's JSON is the one the Bytecode Alliance's
//! `oci-wasm` crate writes and reads (`created`, `architecture`, `os`, `layerDigests`,
//! `component` with its `exports`, `imports` and `target`), so artifacts go both ways.
//!
//! Pure: the bytes of a policy file in, the config and manifest out; a pulled manifest's bytes
//! in, its one Wasm layer or why it is not a Wasm artifact out. `oci.rs` does the talking.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use wasmparser::{Parser, Payload};

use wasmsched_runtime::{LoadError, check_header};

/// The manifest's media type: an OCI image manifest.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// The config's media type: a [`WasmConfig`].
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The layer's media type: the component's bytes as they are.
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The layer annotation that carries the file's name (the one ORAS writes and reads).
pub const TITLE_ANNOTATION: &str = "org.opencontainers.image.title";
/// A component's `os` in the config (a core module's is `wasip1`).
pub const COMPONENT_OS: &str = "wasip2";
/// Every artifact's `architecture`.
pub const ARCHITECTURE: &str = "wasm";
/// The interface every wasmsched policy exports, less its version.
const POLICY_EXPORT: &str = "wasmsched:policy/policy@";

/// The artifact's config, field for field `oci-wasm`'s `WasmConfig`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WasmConfig {
    /// When it was made, RFC 3339.
    pub created: String,
    /// Who made it; wasmsched writes none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    /// Always `wasm`.
    pub architecture: String,
    /// `wasip2` for a component.
    pub os: String,
    /// The manifest's layers' digests, in order (so that two artifacts' configs differ when
    /// their layers do).
    pub layer_digests: Vec<String>,
    /// What the component exports and imports; required when `os` is `wasip2`.
    #[serde(default)]
    pub component: Option<ComponentInfo>,
}

/// What a component exports and imports, by the names its outermost sections give them
/// (`wasmsched:policy/policy@0.4.0`, `wasi:cli/environment@0.2.6`): the names of the world it
/// was built for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ComponentInfo {
    /// Its exports.
    pub exports: Vec<String>,
    /// Its imports.
    pub imports: Vec<String>,
    /// The world it targets (`wasmsched:policy/policy-plugin@0.4.0`), where known.
    #[serde(default)]
    pub target: Option<String>,
}

/// Why a file is not a policy component that can be pushed.
#[derive(Debug, thiserror::Error)]
pub enum ComponentError {
    /// Not a component at all: empty, another format, a core module (what to do is in it).
    #[error(transparent)]
    Header(#[from] LoadError),
    /// A component header over bytes that do not parse.
    #[error(
        "{file} is not a whole WebAssembly component ({detail}): truncated or corrupt? Build it again, and `wasmsched validate` it"
    )]
    Corrupt {
        /// The file.
        file: String,
        /// The parser's words.
        detail: String,
    },
    /// A component, but not a wasmsched policy.
    #[error(
        "{file} is a component but no wasmsched policy: it exports {exports}, not `{POLICY_EXPORT}…`; push policy components (`wasmsched validate` checks one)"
    )]
    NotPolicy {
        /// The file.
        file: String,
        /// What it exports instead.
        exports: String,
    },
}

impl ComponentInfo {
    /// Read what the component in `bytes` exports and imports (its outermost sections only);
    /// `file` names it in errors. Refuses a core module, anything not a component, and a
    /// component that exports no wasmsched policy.
    pub fn of_policy(file: &str, bytes: &[u8]) -> Result<ComponentInfo, ComponentError> {
        check_header(file, bytes)?;
        let corrupt =
            |e: wasmparser::BinaryReaderError| ComponentError::Corrupt { file: file.into(), detail: e.to_string() };
        let (mut exports, mut imports) = (Vec::new(), Vec::new());
        // Nested modules and components come inline, each between its own header and end.
        let mut depth = 0usize;
        for payload in Parser::new(0).parse_all(bytes) {
            match payload.map_err(corrupt)? {
                Payload::Version { .. } => depth += 1,
                Payload::End(_) => depth = depth.saturating_sub(1),
                Payload::ComponentImportSection(section) if depth == 1 => {
                    for import in section {
                        imports.push(import.map_err(corrupt)?.name.name.to_string());
                    }
                }
                Payload::ComponentExportSection(section) if depth == 1 => {
                    for export in section {
                        exports.push(export.map_err(corrupt)?.name.name.to_string());
                    }
                }
                _ => {}
            }
        }
        let Some(version) = exports.iter().find_map(|e| e.strip_prefix(POLICY_EXPORT)) else {
            let exports = if exports.is_empty() { "nothing".to_string() } else { exports.join(", ") };
            return Err(ComponentError::NotPolicy { file: file.into(), exports });
        };
        let target = Some(format!("wasmsched:policy/policy-plugin@{version}"));
        Ok(ComponentInfo { exports, imports, target })
    }
}

impl WasmConfig {
    /// The config of a component whose layer has `layer_digest`, made at `created` (RFC 3339).
    pub fn for_component(component: ComponentInfo, layer_digest: &str, created: String) -> WasmConfig {
        WasmConfig {
            created,
            author: None,
            architecture: ARCHITECTURE.into(),
            os: COMPONENT_OS.into(),
            layer_digests: vec![layer_digest.into()],
            component: Some(component),
        }
    }
}

/// `sha256:` and the hex of the bytes' SHA-256: a content digest as OCI writes it.
pub fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// A descriptor in a manifest: what a blob is, its digest and size.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// Its media type.
    pub media_type: String,
    /// Its content digest.
    pub digest: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its annotations, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

impl Descriptor {
    /// The name the file was pushed with (the layer's title), when it is a plain `.wasm` file
    /// name: no folder, nothing hidden. A registry's word, so checked before it names a file.
    pub fn file_name(&self) -> Option<&str> {
        let title = self.annotations.as_ref()?.get(TITLE_ANNOTATION)?;
        let plain = !title.is_empty()
            && title.ends_with(".wasm")
            && !title.starts_with('.')
            && !title.contains(['/', '\\', '\0'])
            && title.len() <= 255;
        plain.then_some(title.as_str())
    }
}

/// An OCI image manifest, as this host writes it and reads the fields it needs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// Always 2.
    pub schema_version: u32,
    /// The manifest's own media type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// The config blob.
    pub config: Descriptor,
    /// The layers.
    pub layers: Vec<Descriptor>,
}

/// The blobs and the manifest of one pushed policy: what `push` uploads.
pub struct Artifact {
    /// The config's JSON.
    pub config: Vec<u8>,
    /// The manifest's JSON; its digest is the artifact's.
    pub manifest: Vec<u8>,
    /// The layer's descriptor (the component's bytes are the caller's).
    pub layer: Descriptor,
    /// The config's descriptor.
    pub config_descriptor: Descriptor,
}

impl Artifact {
    /// The artifact of the policy component `bytes` from `file` (its file name goes into the
    /// layer's title), made at `created`.
    pub fn of_policy(file: &std::path::Path, bytes: &[u8], created: String) -> Result<Artifact, ComponentError> {
        let component = ComponentInfo::of_policy(&file.display().to_string(), bytes)?;
        let title = file.file_name().map(|n| n.to_string_lossy().into_owned());
        let layer = Descriptor {
            media_type: LAYER_MEDIA_TYPE.into(),
            digest: digest(bytes),
            size: bytes.len() as u64,
            annotations: title.map(|t| BTreeMap::from([(TITLE_ANNOTATION.to_string(), t)])),
        };
        let config = WasmConfig::for_component(component, &layer.digest, created);
        let config = serde_json::to_vec(&config).expect("a config serializes");
        let config_descriptor = Descriptor {
            media_type: CONFIG_MEDIA_TYPE.into(),
            digest: digest(&config),
            size: config.len() as u64,
            annotations: None,
        };
        let manifest = Manifest {
            schema_version: 2,
            media_type: Some(MANIFEST_MEDIA_TYPE.into()),
            config: config_descriptor.clone(),
            layers: vec![layer.clone()],
        };
        let manifest = serde_json::to_vec(&manifest).expect("a manifest serializes");
        Ok(Artifact { config, manifest, layer, config_descriptor })
    }
}

/// The one Wasm layer of the manifest in `bytes`, or why it is not a Wasm artifact (a phrase:
/// "its config is …").
pub fn wasm_layer(bytes: &[u8]) -> Result<Descriptor, String> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Any {
        media_type: Option<String>,
        manifests: Option<serde_json::Value>,
        config: Option<Descriptor>,
        layers: Option<Vec<Descriptor>>,
    }
    let any: Any =
        serde_json::from_slice(bytes).map_err(|e| format!("its manifest is not JSON a manifest can be ({e})"))?;
    if any.manifests.is_some() {
        let kind = any.media_type.unwrap_or_else(|| "an index".into());
        return Err(format!("it is an image index ({kind}) of several images, not one artifact"));
    }
    let (Some(config), Some(layers)) = (any.config, any.layers) else {
        return Err("its manifest has no config or no layers".into());
    };
    if config.media_type != CONFIG_MEDIA_TYPE {
        return Err(format!("its config is {}, not {CONFIG_MEDIA_TYPE}", config.media_type));
    }
    let wasm: Vec<&Descriptor> = layers.iter().filter(|l| l.media_type == LAYER_MEDIA_TYPE).collect();
    match (wasm.as_slice(), layers.len()) {
        ([one], 1) => Ok((*one).clone()),
        ([], _) => {
            let kinds: Vec<&str> = layers.iter().map(|l| l.media_type.as_str()).collect();
            Err(format!("it has no {LAYER_MEDIA_TYPE} layer (its layers: {})", kinds.join(", ")))
        }
        (_, n) => Err(format!("it has {n} layers, {} of them Wasm; an artifact of one policy has one", wasm.len())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest component: the header and nothing else.
    const EMPTY_COMPONENT: &[u8] = b"\0asm\x0d\0\x01\0";

    #[test]
    fn a_core_module_is_refused_with_what_to_build() {
        let err = ComponentInfo::of_policy("p.wasm", b"\0asm\x01\0\0\0").unwrap_err().to_string();
        assert!(err.contains("core module") && err.contains("wasm32-wasip2"), "{err}");
    }

    #[test]
    fn a_component_that_is_no_policy_is_refused_and_says_what_it_exports() {
        let err = ComponentInfo::of_policy("c.wasm", EMPTY_COMPONENT).unwrap_err().to_string();
        assert!(err.contains("no wasmsched policy") && err.contains("exports nothing"), "{err}");
    }

    #[test]
    fn a_truncated_component_is_refused_as_corrupt() {
        // A section that says it is longer than what follows.
        let bytes = [EMPTY_COMPONENT, &[0x0b, 0x7f, 0x00]].concat();
        let err = ComponentInfo::of_policy("t.wasm", &bytes).unwrap_err().to_string();
        assert!(err.contains("not a whole WebAssembly component"), "{err}");
    }

    fn manifest(config: &str, layers: &[&str]) -> Vec<u8> {
        let d = |m: &str| serde_json::json!({"mediaType": m, "digest": "sha256:00", "size": 1});
        let layers: Vec<_> = layers.iter().map(|m| d(m)).collect();
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2, "mediaType": MANIFEST_MEDIA_TYPE, "config": d(config), "layers": layers
        }))
        .unwrap()
    }

    #[test]
    fn a_manifest_of_one_wasm_layer_under_a_wasm_config_is_an_artifact() {
        let layer = wasm_layer(&manifest(CONFIG_MEDIA_TYPE, &[LAYER_MEDIA_TYPE])).unwrap();
        assert_eq!(layer.media_type, LAYER_MEDIA_TYPE);
    }

    #[test]
    fn other_manifests_say_why_they_are_not_wasm_artifacts() {
        let image = manifest("application/vnd.oci.image.config.v1+json", &["application/vnd.oci.image.layer.v1.tar"]);
        assert!(wasm_layer(&image).unwrap_err().contains("its config is application/vnd.oci.image.config.v1+json"));
        let two = manifest(CONFIG_MEDIA_TYPE, &[LAYER_MEDIA_TYPE, LAYER_MEDIA_TYPE]);
        assert!(wasm_layer(&two).unwrap_err().contains("2 layers"));
        let none = manifest(CONFIG_MEDIA_TYPE, &["text/plain"]);
        assert!(wasm_layer(&none).unwrap_err().contains("no application/wasm layer"));
        let index = br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}"#;
        assert!(wasm_layer(index).unwrap_err().contains("image index"));
        assert!(wasm_layer(b"<html>").unwrap_err().contains("not JSON"));
    }

    #[test]
    fn the_config_reads_as_oci_wasm_writes_it() {
        // As oci-wasm 0.6 serializes its WasmConfig: a null author and target included.
        let theirs = r#"{"created":"2025-01-02T03:04:05.678901Z","author":null,"architecture":"wasm","os":"wasip2",
            "layerDigests":["sha256:ab"],"component":{"exports":["wasmsched:policy/policy@0.4.0"],
            "imports":["wasi:io/error@0.2.0"],"target":null}}"#;
        let config: WasmConfig = serde_json::from_str(theirs).unwrap();
        assert_eq!(config.os, COMPONENT_OS);
        assert_eq!(config.component.unwrap().imports, ["wasi:io/error@0.2.0"]);
        let ours = WasmConfig::for_component(
            ComponentInfo { exports: vec!["e".into()], imports: vec![], target: None },
            "sha256:ab",
            "2025-01-02T03:04:05Z".into(),
        );
        let json: serde_json::Value = serde_json::to_value(&ours).unwrap();
        for key in ["created", "architecture", "os", "layerDigests", "component"] {
            assert!(json.get(key).is_some(), "{key} missing from {json}");
        }
        assert_eq!(json["layerDigests"][0], "sha256:ab");
    }

    #[test]
    fn only_a_plain_wasm_title_names_the_pulled_file() {
        let with = |t: &str| Descriptor {
            media_type: LAYER_MEDIA_TYPE.into(),
            digest: "sha256:00".into(),
            size: 1,
            annotations: Some(BTreeMap::from([(TITLE_ANNOTATION.to_string(), t.to_string())])),
        };
        assert_eq!(with("fair-share.wasm").file_name(), Some("fair-share.wasm"));
        for bad in ["../etc/passwd.wasm", "/tmp/x.wasm", ".hidden.wasm", "notes.txt", ""] {
            assert_eq!(with(bad).file_name(), None, "{bad}");
        }
    }
}
