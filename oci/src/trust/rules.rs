//! The rules applied: what each signature proves (which trusted signers' keys made it, whether
//! it carries the annotations they require, whether it names the digest verified), and whether
//! the signatures together meet `all-of` and `any-of`, or, if not, the sentence that says why.
//!
//! Pure: signatures and payloads in, [`Verified`] or a [`TrustError`] out.

use std::collections::BTreeSet;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use super::{Rule, Trust, TrustError, Verified, cosign};

/// What one signature proved.
#[derive(Debug, Default)]
pub(super) struct Proof {
    /// The signers it satisfies.
    signed: BTreeSet<usize>,
    /// The signers whose key made it, without the annotations they require.
    lacking: BTreeSet<usize>,
    /// A signer whose key made it over another digest, and that digest.
    elsewhere: Option<(usize, String)>,
}

/// The signers whose keys made `signature` (base64, as cosign writes it) of `message`.
fn keyed(trust: &Trust, message: &[u8], signature: &str) -> Vec<usize> {
    let Ok(signature) = BASE64.decode(signature.trim()) else { return Vec::new() };
    (0..trust.signers.len()).filter(|&i| trust.signers[i].key.verifies(message, &signature)).collect()
}

/// What a signature layer proves for the manifest `digest`: its payload must name it.
pub(super) fn prove_payload(trust: &Trust, payload: &[u8], signature: &str, digest: &str) -> Proof {
    let keyed = keyed(trust, payload, signature);
    // Signed but not a cosign payload: it proves nothing.
    let Some(read) = keyed.first().and_then(|_| cosign::parse_payload(payload).ok()) else { return Proof::default() };
    if read.digest != digest {
        return Proof { elsewhere: keyed.first().map(|&i| (i, read.digest)), ..Proof::default() };
    }
    let (signed, lacking) = keyed
        .into_iter()
        .partition(|&i| trust.signers[i].annotations.iter().all(|(k, v)| read.annotations.get(k) == Some(v)));
    Proof { signed, lacking, elsewhere: None }
}

/// What a blob's signature proves: no annotations, so not for a signer that requires them.
pub(super) fn prove_blob(trust: &Trust, bytes: &[u8], signature: &str) -> Proof {
    let (signed, lacking) =
        keyed(trust, bytes, signature).into_iter().partition(|&i| trust.signers[i].annotations.is_empty());
    Proof { signed, lacking, elsewhere: None }
}

/// The rules applied to the signatures found.
pub(super) fn judge(trust: &Trust, what: &str, proofs: &[Proof], blob: bool) -> Result<Verified, TrustError> {
    let signed: BTreeSet<usize> = proofs.iter().flat_map(|p| p.signed.iter().copied()).collect();
    let label = |i: &usize| trust.signers[*i].label.clone();
    let of = |rule: Rule| (0..trust.signers.len()).filter(move |&i| trust.signers[i].rule == rule);
    let all_missing: Vec<usize> = of(Rule::AllOf).filter(|i| !signed.contains(i)).collect();
    let any: Vec<usize> = of(Rule::AnyOf).collect();
    let any_signed = any.iter().filter(|i| signed.contains(i)).count();
    let any_short = !any.is_empty() && any_signed < trust.minimum_matches;
    if all_missing.is_empty() && !any_short {
        let signers = signed.iter().map(label).collect();
        return Ok(Verified { signers, signatures: proofs.len() });
    }
    if let Some((i, other)) = proofs.iter().find_map(|p| p.elsewhere.as_ref()) {
        return Err(TrustError::DigestMismatch { what: what.into(), signer: label(i), signed: other.clone() });
    }
    let mut why = Vec::new();
    if !all_missing.is_empty() {
        let names = all_missing.iter().map(label).collect::<Vec<_>>().join(", ");
        why.push(format!("none by {names} (all-of: each must sign)"));
    }
    if any_short {
        let names = any.iter().map(label).collect::<Vec<_>>().join(", ");
        why.push(format!("{any_signed} of the any-of signers ({names}) signed, {} must", trust.minimum_matches));
    }
    let lacking: BTreeSet<usize> = proofs.iter().flat_map(|p| p.lacking.iter().copied()).collect();
    for i in lacking.difference(&signed) {
        let signer = &trust.signers[*i];
        let wanted = signer.annotations.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ");
        why.push(if blob {
            format!(
                "{}'s key signed, but {} requires annotations ({wanted}), which a blob's signature cannot carry",
                signer.label, signer.label
            )
        } else {
            format!("{}'s key signed, but without the annotations {} requires ({wanted})", signer.label, signer.label)
        });
    }
    let mut missing: Vec<String> = all_missing.iter().map(label).collect();
    if any_short {
        missing.extend(any.iter().filter(|i| !signed.contains(i)).map(label));
    }
    Err(TrustError::NotTrusted { what: what.into(), signatures: proofs.len(), missing, why: why.join("; ") })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::trust::tests::{key, signer};
    use crate::trust::{AnyOf, PrivateKey, TrustConfig, keys, verify_blob};

    const DIGEST: &str = "sha256:f3cfc9d0dbf931d3db4685ec659b7ac68e2a578219da4aae65427886e649b06b";

    #[test]
    fn all_of_two_keys_with_one_signature_names_the_missing_signer() {
        let ((release, release_pem), (_, ops_pem)) = (key(), key());
        let all_of = vec![signer("release", &release_pem, &[]), signer("ops", &ops_pem, &[])];
        let trust = TrustConfig { all_of, any_of: None }.load(None).unwrap();
        let signature = BASE64.encode(release.sign(b"p").unwrap());
        let err = verify_blob(&trust, b"p", &signature).unwrap_err();
        let TrustError::NotTrusted { missing, signatures, .. } = &err else { panic!("{err}") };
        assert_eq!((missing.as_slice(), *signatures), (&["ops".to_string()][..], 1));
        let text = err.to_string();
        assert!(
            text.contains("1 signature found, none by ops (all-of") && text.contains("private key of ops"),
            "{text}"
        );
    }

    #[test]
    fn any_of_needs_minimum_matches_distinct_signers_and_one_signature_counts_once() {
        let (a, b, c) = (key(), key(), key());
        let signatures = vec![signer("a", &a.1, &[]), signer("b", &b.1, &[]), signer("c", &c.1, &[])];
        let trust =
            TrustConfig { all_of: vec![], any_of: Some(AnyOf { minimum_matches: 2, signatures }) }.load(None).unwrap();
        let payload = cosign::payload("r/p", DIGEST, &BTreeMap::new());
        let by = |k: &PrivateKey| prove_payload(&trust, &payload, &BASE64.encode(k.sign(&payload).unwrap()), DIGEST);
        let err = judge(&trust, "r/p", &[by(&a.0), by(&a.0)], false).unwrap_err().to_string();
        assert!(err.contains("1 of the any-of signers (a, b, c) signed, 2 must"), "{err}");
        let verified = judge(&trust, "r/p", &[by(&c.0), by(&a.0)], false).unwrap();
        assert_eq!(verified.signers, ["a", "c"]);
        assert!(
            judge(&trust, "blob", &[prove_blob(&trust, b"x", &BASE64.encode(a.0.sign(b"x").unwrap()))], true).is_err()
        );
    }

    #[test]
    fn annotations_required_must_be_in_the_payload_and_a_blob_never_has_them() {
        let (k, pem) = key();
        let trust =
            TrustConfig { all_of: vec![signer("release", &pem, &[("env", "prod")])], any_of: None }.load(None).unwrap();
        let proof = |env: &str| {
            let payload = cosign::payload("r/p", DIGEST, &BTreeMap::from([("env".to_string(), env.to_string())]));
            prove_payload(&trust, &payload, &BASE64.encode(k.sign(&payload).unwrap()), DIGEST)
        };
        assert_eq!(judge(&trust, "r/p", &[proof("prod")], false).unwrap().signers, ["release"]);
        let err = judge(&trust, "r/p", &[proof("dev")], false).unwrap_err().to_string();
        assert!(err.contains("without the annotations release requires (env=prod)"), "{err}");
        let err = verify_blob(&trust, b"x", &BASE64.encode(k.sign(b"x").unwrap())).unwrap_err().to_string();
        assert!(err.contains("which a blob's signature cannot carry"), "{err}");
    }

    #[test]
    fn a_trusted_signature_of_another_digest_is_refused_as_copied() {
        let (k, pem) = key();
        let trust = TrustConfig { all_of: vec![signer("release", &pem, &[])], any_of: None }.load(None).unwrap();
        let other = DIGEST.replace("f3cf", "0000");
        let payload = cosign::payload("r/p", &other, &BTreeMap::new());
        let proof = prove_payload(&trust, &payload, &BASE64.encode(k.sign(&payload).unwrap()), DIGEST);
        let err = judge(&trust, "r/p@d", &[proof], false).unwrap_err();
        assert!(matches!(&err, TrustError::DigestMismatch { signed, .. } if *signed == other), "{err}");
        assert!(err.to_string().contains("copied here"), "{err}");
    }

    #[test]
    fn a_signature_cosign_made_satisfies_its_public_key() {
        let trust = TrustConfig { all_of: vec![signer("cosign", keys::tests::COSIGN_PUBLIC_KEY, &[])], any_of: None };
        let trust = trust.load(None).unwrap();
        let proof =
            prove_payload(&trust, keys::tests::COSIGN_PAYLOAD.as_bytes(), keys::tests::COSIGN_SIGNATURE, DIGEST);
        assert_eq!(judge(&trust, "r/p", &[proof], false).unwrap().signers, ["cosign"]);
    }
}
