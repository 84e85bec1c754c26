//! cosign's signature image, as `cosign sign` pushes it and `cosign verify` reads it: the tag
//! `sha256-<hex>.sig` beside the signed manifest in its repository names an OCI image manifest
//! with one layer per signature. A layer's blob is the simple-signing payload (JSON naming the
//! signed manifest's digest, and the annotations given to `cosign sign -a`), its annotation
//! `dev.cosignproject.cosign/signature` the base64 signature of those bytes.
//!
//! Pure: payloads and manifests built and parsed; `trust.rs` does the talking.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::artifact::{MANIFEST_MEDIA_TYPE, digest};

/// A signature layer's media type.
pub const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation that carries the signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The payload's `critical.type`.
pub const SIGNATURE_TYPE: &str = "cosign container image signature";
/// The signature image's config media type.
const CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";
/// The most signature layers one image may have; more is refused, not read.
pub const MAX_SIGNATURES: usize = 256;
/// The largest payload read (cosign's are a few hundred bytes).
pub const MAX_PAYLOAD_BYTES: u64 = 64 << 10;

/// The tag of the signatures of the manifest `digest` (`sha256:<64 hex>`): `sha256-<hex>.sig`.
pub fn signature_tag(digest: &str) -> Option<String> {
    let hex = digest.strip_prefix("sha256:")?;
    let lower_hex = hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    lower_hex.then(|| format!("sha256-{hex}.sig"))
}

/// The simple-signing payload (a "cosign container image signature").
#[derive(Debug, Serialize, Deserialize)]
struct SimpleSigning {
    critical: Critical,
    optional: Option<BTreeMap<String, serde_json::Value>>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Critical {
    identity: Identity,
    image: Image,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct Identity {
    #[serde(rename = "docker-reference")]
    docker_reference: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct Image {
    #[serde(rename = "docker-manifest-digest")]
    docker_manifest_digest: String,
}

/// The payload cosign signs for the manifest `digest` in `repository` (`REGISTRY/REPOSITORY`),
/// the annotations in its `optional` (null without).
pub fn payload(repository: &str, digest: &str, annotations: &BTreeMap<String, String>) -> Vec<u8> {
    let optional = (!annotations.is_empty())
        .then(|| annotations.iter().map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone()))).collect());
    let payload = SimpleSigning {
        critical: Critical {
            identity: Identity { docker_reference: repository.into() },
            image: Image { docker_manifest_digest: digest.into() },
            kind: SIGNATURE_TYPE.into(),
        },
        optional,
    };
    serde_json::to_vec(&payload).unwrap_or_default()
}

/// What a signed payload says.
#[derive(Debug, Clone, PartialEq)]
pub struct Payload {
    /// The digest of the manifest it signs.
    pub digest: String,
    /// Its annotations (`optional`), those whose values are strings.
    pub annotations: BTreeMap<String, String>,
}

/// Read a payload; it must be a cosign container image signature.
pub fn parse_payload(bytes: &[u8]) -> Result<Payload, String> {
    let payload: SimpleSigning =
        serde_json::from_slice(bytes).map_err(|e| format!("it is not a simple-signing payload ({e})"))?;
    if payload.critical.kind != SIGNATURE_TYPE {
        return Err(format!("its type is {:?}, not {SIGNATURE_TYPE:?}", payload.critical.kind));
    }
    let annotations = payload
        .optional
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(k, v)| match v {
            serde_json::Value::String(s) => Some((k, s)),
            _ => None,
        })
        .collect();
    Ok(Payload { digest: payload.critical.image.docker_manifest_digest, annotations })
}

/// One layer of a signature image.
#[derive(Debug, Clone)]
pub struct Layer {
    /// Its descriptor as the manifest has it (kept whole when signatures are added).
    pub descriptor: serde_json::Value,
    /// Its digest, `sha256:<64 hex>`.
    pub digest: String,
    /// Its size in bytes.
    pub size: u64,
    /// The base64 signature, for a simple-signing layer that carries one.
    pub signature: Option<String>,
}

/// The layers of a signature image's manifest, in order; why it is not one, in words.
pub fn layers(manifest: &[u8]) -> Result<Vec<Layer>, String> {
    let manifest: serde_json::Value =
        serde_json::from_slice(manifest).map_err(|e| format!("its manifest is not JSON ({e})"))?;
    let Some(layers) = manifest.get("layers").and_then(|l| l.as_array()) else {
        return Err("its manifest has no layers".into());
    };
    if layers.len() > MAX_SIGNATURES {
        return Err(format!("it has {} layers, more than the {MAX_SIGNATURES} read", layers.len()));
    }
    layers
        .iter()
        .map(|descriptor| {
            let text = |field: &str| descriptor.get(field).and_then(|v| v.as_str());
            let digest = text("digest").filter(|d| signature_tag(d).is_some());
            let Some(digest) = digest else { return Err(format!("a layer has no sha256 digest: {descriptor}")) };
            let size = descriptor.get("size").and_then(|s| s.as_u64()).unwrap_or(u64::MAX);
            let simple = text("mediaType") == Some(SIMPLE_SIGNING_MEDIA_TYPE);
            let signature = descriptor.get("annotations").and_then(|a| a.get(SIGNATURE_ANNOTATION));
            let signature = signature.and_then(|s| s.as_str()).filter(|_| simple).map(String::from);
            Ok(Layer { descriptor: descriptor.clone(), digest: digest.into(), size, signature })
        })
        .collect()
}

/// The descriptor of a new signature layer: `payload`'s digest and size, the signature.
pub fn layer(payload: &[u8], signature: &str) -> serde_json::Value {
    serde_json::json!({
        "mediaType": SIMPLE_SIGNING_MEDIA_TYPE,
        "size": payload.len(),
        "digest": digest(payload),
        "annotations": { SIGNATURE_ANNOTATION: signature },
    })
}

/// A signature image of `layers`: its config's bytes and its manifest's, as cosign writes them.
pub fn image(layers: &[serde_json::Value]) -> (Vec<u8>, Vec<u8>) {
    let diff_ids: Vec<&serde_json::Value> = layers.iter().filter_map(|l| l.get("digest")).collect();
    let config = serde_json::json!({
        "architecture": "",
        "created": "0001-01-01T00:00:00Z",
        "history": [{ "created": "0001-01-01T00:00:00Z" }],
        "os": "",
        "rootfs": { "type": "layers", "diff_ids": diff_ids },
        "config": {},
    });
    let config = serde_json::to_vec(&config).unwrap_or_default();
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "config": {
            "mediaType": CONFIG_MEDIA_TYPE,
            "size": config.len(),
            "digest": digest(&config),
        },
        "layers": layers,
    });
    (config, serde_json::to_vec(&manifest).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:f3cfc9d0dbf931d3db4685ec659b7ac68e2a578219da4aae65427886e649b06b";

    #[test]
    fn the_signature_tag_is_the_digest_with_a_dash_and_sig() {
        assert_eq!(
            signature_tag(DIGEST).as_deref(),
            Some("sha256-f3cfc9d0dbf931d3db4685ec659b7ac68e2a578219da4aae65427886e649b06b.sig")
        );
        for bad in ["sha256:abc", "sha512:00", &DIGEST.to_uppercase(), "f3cfc9d0"] {
            assert_eq!(signature_tag(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_payload_is_byte_for_byte_what_cosign_signs() {
        // cosign's payload of sigstore-rs's test vector (`keys::tests::COSIGN_PAYLOAD`).
        let ours = payload("registry-testing.svc.lan/busybox", DIGEST, &BTreeMap::new());
        assert_eq!(String::from_utf8(ours).unwrap(), super::super::keys::tests::COSIGN_PAYLOAD);
        let annotated = payload("r/p", DIGEST, &BTreeMap::from([("env".to_string(), "prod".to_string())]));
        let read = parse_payload(&annotated).unwrap();
        assert_eq!(read.digest, DIGEST);
        assert_eq!(read.annotations, BTreeMap::from([("env".to_string(), "prod".to_string())]));
    }

    #[test]
    fn a_payload_of_another_type_is_refused() {
        let other = String::from_utf8(payload("r/p", DIGEST, &BTreeMap::new())).unwrap().replace("container", "blob");
        assert!(parse_payload(other.as_bytes()).unwrap_err().contains("type"));
        assert!(parse_payload(b"{}").is_err());
    }

    #[test]
    fn an_image_built_reads_back_its_layers_and_signatures() {
        let (p1, p2) = (payload("r/p", DIGEST, &BTreeMap::new()), b"other".to_vec());
        let (config, manifest) = image(&[layer(&p1, "c2ln"), layer(&p2, "b3RoZXI=")]);
        let read = layers(&manifest).unwrap();
        assert_eq!(read.len(), 2);
        assert_eq!(read[0].digest, super::digest(&p1));
        assert_eq!(read[0].size, p1.len() as u64);
        assert_eq!(read[1].signature.as_deref(), Some("b3RoZXI="));
        let config: serde_json::Value = serde_json::from_slice(&config).unwrap();
        assert_eq!(config["rootfs"]["diff_ids"][1], read[1].digest.as_str());
        let manifest: serde_json::Value = serde_json::from_slice(&manifest).unwrap();
        assert_eq!(manifest["config"]["digest"], super::digest(&serde_json::to_vec(&config).unwrap()));
    }

    #[test]
    fn a_manifest_that_is_no_signature_image_is_named() {
        assert!(layers(b"not json").unwrap_err().contains("not JSON"));
        assert!(layers(b"{}").unwrap_err().contains("no layers"));
        let bad = br#"{"layers":[{"mediaType":"x","digest":"md5:00","size":1}]}"#;
        assert!(layers(bad).unwrap_err().contains("no sha256 digest"));
        let many = serde_json::json!({ "layers": vec![layer(b"p", "s"); MAX_SIGNATURES + 1] });
        assert!(layers(&serde_json::to_vec(&many).unwrap()).unwrap_err().contains("more than"));
    }
}
