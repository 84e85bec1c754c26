//! Signed policies against the real registry: signatures pushed as cosign pushes them, found
//! and checked by digest. A signed policy verifies and its signer is named; an unsigned one,
//! one signed by a key not trusted, one beside which another artifact's signatures were copied,
//! and one whose signature lacks the annotations required are each refused with their own error.

use std::collections::BTreeMap;

use oci_client::Reference;
use oci_client::manifest::OCI_IMAGE_MEDIA_TYPE;
use oci_client::secrets::RegistryAuth;
use wasmsched::oci::OciError;
use wasmsched::oci::trust::{self, AnyOf, KeyPair, SignerConfig, SignerKind, Trust, TrustConfig, TrustError};

use super::{anonymous, block_on, component, registry, repository};

/// A key pair with its password.
fn keys() -> KeyPair {
    trust::generate_key_pair(b"pw").unwrap()
}

fn signer(name: &str, pair: &KeyPair, annotations: &[(&str, &str)]) -> SignerConfig {
    SignerConfig {
        kind: SignerKind::PublicKey,
        name: Some(name.into()),
        key: None,
        key_pem: Some(pair.public_pem.clone()),
        annotations: annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
    }
}

fn all_of(signers: Vec<SignerConfig>) -> Trust {
    TrustConfig { all_of: signers, any_of: None }.load(None).unwrap()
}

/// Push `policy` to `reference` and return its digest.
async fn pushed(policy: &str, reference: &str) -> String {
    wasmsched::oci::push(component(policy).0, reference, &anonymous()).await.unwrap().digest
}

async fn sign(reference: &str, digest: &str, pair: &KeyPair, annotations: &[(&str, &str)]) -> String {
    let annotations: BTreeMap<String, String> =
        annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    trust::sign_artifact(reference, digest, &pair.private_pem, b"pw", &annotations, &anonymous()).await.unwrap()
}

#[test]
fn a_signed_policy_verifies_and_names_its_signer_and_signing_twice_adds_no_signature() {
    let Some(registry) = registry("signed policy verifies") else { return };
    let reference = format!("{}:v1", repository(&registry, "signed"));
    let (release, ops) = (keys(), keys());
    block_on(async {
        let digest = pushed("fair-share", &reference).await;
        let signature = sign(&reference, &digest, &release, &[]).await;
        assert!(signature.ends_with(&format!(":{}.sig", digest.replace(':', "-"))), "{signature}");

        let trust = all_of(vec![signer("release", &release, &[])]);
        let verified = trust::verify_artifact(&trust, &reference, &digest, &anonymous()).await.unwrap();
        assert_eq!((verified.signers.as_slice(), verified.signatures), (&["release".to_string()][..], 1));

        // The same key again: cosign's dedupe, not a second layer. Another key: a second one.
        sign(&reference, &digest, &release, &[]).await;
        sign(&reference, &digest, &ops, &[]).await;
        let both = TrustConfig {
            all_of: vec![signer("release", &release, &[])],
            any_of: Some(AnyOf { minimum_matches: 1, signatures: vec![signer("ops", &ops, &[])] }),
        };
        let verified = trust::verify_artifact(&both.load(None).unwrap(), &reference, &digest, &anonymous()).await;
        let verified = verified.unwrap();
        assert_eq!((verified.signers.as_slice(), verified.signatures), (&["release".into(), "ops".into()][..], 2));
    });
}

#[test]
fn an_unsigned_policy_is_refused_as_unsigned_with_how_to_sign_it() {
    let Some(registry) = registry("unsigned policy refused") else { return };
    let reference = format!("{}:v1", repository(&registry, "unsigned"));
    let trust = all_of(vec![signer("release", &keys(), &[])]);
    block_on(async {
        let digest = pushed("fifo", &reference).await;
        let err = trust::verify_artifact(&trust, &reference, &digest, &anonymous()).await.unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, TrustError::Unsigned { .. }), "{text}");
        assert!(text.contains("is not signed") && text.contains("cosign sign --key"), "{text}");
        assert!(err.is_refusal());
    });
}

#[test]
fn a_policy_signed_by_another_key_is_not_trusted_and_the_missing_signer_is_named() {
    let Some(registry) = registry("policy signed by another key") else { return };
    let reference = format!("{}:v1", repository(&registry, "other-key"));
    let (release, stranger) = (keys(), keys());
    block_on(async {
        let digest = pushed("fifo", &reference).await;
        sign(&reference, &digest, &stranger, &[]).await;
        let trust = all_of(vec![signer("release", &release, &[])]);
        let err = trust::verify_artifact(&trust, &reference, &digest, &anonymous()).await.unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(&err, TrustError::NotTrusted { missing, signatures: 1, .. } if missing == &["release"]),
            "{text}"
        );
        assert!(text.contains("1 signature found, none by release"), "{text}");
    });
}

#[test]
fn a_signature_copied_from_another_artifact_is_refused_for_its_digest() {
    let Some(registry) = registry("copied signature refused") else { return };
    let repo = repository(&registry, "copied");
    let release = keys();
    let trust = all_of(vec![signer("release", &release, &[])]);
    block_on(async {
        let signed = pushed("fair-share", &format!("{repo}:signed")).await;
        let other = pushed("fifo", &format!("{repo}:other")).await;
        let signature = sign(&format!("{repo}:signed"), &signed, &release, &[]).await;
        // The signed artifact's signature image, tagged as the other's: the same bytes.
        let client = wasmsched::oci::client(&registry, false).unwrap();
        let from: Reference = signature.parse().unwrap();
        let (manifest, _) =
            client.pull_manifest_raw(&from, &RegistryAuth::Anonymous, &[OCI_IMAGE_MEDIA_TYPE]).await.unwrap();
        let to: Reference = format!("{repo}:{}.sig", other.replace(':', "-")).parse().unwrap();
        client.push_manifest_raw(&to, manifest, OCI_IMAGE_MEDIA_TYPE.parse().unwrap()).await.unwrap();

        let err = trust::verify_artifact(&trust, &format!("{repo}:other"), &other, &anonymous()).await.unwrap_err();
        let text = err.to_string();
        assert!(matches!(&err, TrustError::DigestMismatch { signed: s, .. } if *s == signed), "{text}");
        assert!(text.contains("made for another artifact and copied here"), "{text}");
        // The artifact it was made for still verifies.
        trust::verify_artifact(&trust, &format!("{repo}:signed"), &signed, &anonymous()).await.unwrap();
    });
}

#[test]
fn annotations_a_signer_requires_must_be_in_its_signature() {
    let Some(registry) = registry("signature annotations") else { return };
    let repo = repository(&registry, "annotations");
    let release = keys();
    let prod = all_of(vec![signer("release", &release, &[("env", "prod")])]);
    block_on(async {
        let annotated = pushed("fair-share", &format!("{repo}:annotated")).await;
        sign(&format!("{repo}:annotated"), &annotated, &release, &[("env", "prod"), ("team", "ml")]).await;
        let verified = trust::verify_artifact(&prod, &repo, &annotated, &anonymous()).await.unwrap();
        assert_eq!(verified.signers, ["release"]);

        let plain = pushed("fifo", &format!("{repo}:plain")).await;
        sign(&format!("{repo}:plain"), &plain, &release, &[]).await;
        let err = trust::verify_artifact(&prod, &repo, &plain, &anonymous()).await.unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, TrustError::NotTrusted { .. }), "{text}");
        assert!(text.contains("without the annotations release requires (env=prod)"), "{text}");
        let dev = all_of(vec![signer("release", &release, &[("env", "dev")])]);
        assert!(trust::verify_artifact(&dev, &repo, &annotated, &anonymous()).await.is_err());
    });
}

#[test]
fn signing_a_digest_the_registry_does_not_hold_is_refused_and_nothing_is_pushed() {
    let Some(registry) = registry("signing an absent digest") else { return };
    let repo = repository(&registry, "absent");
    let release = keys();
    block_on(async {
        pushed("fifo", &format!("{repo}:v1")).await;
        let absent = format!("sha256:{}", "0".repeat(64));
        let none = BTreeMap::new();
        let err = trust::sign_artifact(&repo, &absent, &release.private_pem, b"pw", &none, &anonymous()).await;
        let err = err.unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, TrustError::Registry(OciError::NotFound { .. })), "{text}");
        assert!(text.contains(&format!("{repo}@{absent} is not in the registry")), "{text}");
        let trust = all_of(vec![signer("release", &release, &[])]);
        let err = trust::verify_artifact(&trust, &repo, &absent, &anonymous()).await.unwrap_err();
        assert!(matches!(err, TrustError::Unsigned { .. }), "{err}");
        let err = trust::sign_artifact(&repo, "sha256:abc", &release.private_pem, b"pw", &none, &anonymous()).await;
        assert!(matches!(err, Err(TrustError::NotADigest { .. })), "{err:?}");
    });
}
