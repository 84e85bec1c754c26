//! Keys as cosign writes them: a public key is a PEM `PUBLIC KEY` (the DER SubjectPublicKeyInfo),
//! a private key a PEM `ENCRYPTED SIGSTORE PRIVATE KEY` (cosign 2; cosign 1 wrote `ENCRYPTED
//! COSIGN PRIVATE KEY`) whose body is JSON: the PKCS #8 DER of the key sealed by NaCl's secretbox
//! under a key that scrypt derives from the password. Signatures are ECDSA P-256 with SHA-256,
//! ASN.1 DER, what `cosign generate-key-pair` keys make; ring computes them.
//!
//! Pure apart from the randomness a new key, salt or signature takes.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use crypto_secretbox::aead::{Aead, KeyInit};
use crypto_secretbox::{Nonce, XSalsa20Poly1305};
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{
    ECDSA_P256_SHA256_ASN1, ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair, UnparsedPublicKey,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The label of a public key's PEM block.
pub const PUBLIC_KEY_LABEL: &str = "PUBLIC KEY";
/// The label cosign 2 (and wasmsched) gives an encrypted private key.
pub const PRIVATE_KEY_LABEL: &str = "ENCRYPTED SIGSTORE PRIVATE KEY";
/// The label cosign 1 gave it; still read.
const OLD_PRIVATE_KEY_LABEL: &str = "ENCRYPTED COSIGN PRIVATE KEY";

/// The DER of a P-256 SubjectPublicKeyInfo up to its point: SEQUENCE { SEQUENCE { id-ecPublicKey,
/// prime256v1 }, BIT STRING (65 bytes: 04, X, Y) }.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce,
    0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];
/// An uncompressed P-256 point: 04, X, Y.
const P256_POINT_BYTES: usize = 65;

/// scrypt's cost as cosign writes it (N = 2^16, r = 8, p = 1); cosign 1's N = 2^15 is read too,
/// any other is refused (a key file must not make us spend unbounded memory).
const SCRYPT_LOG_N: u8 = 16;
const SCRYPT_LOG_N_READ: [u8; 2] = [15, 16];
const SCRYPT_R: u32 = 8;
const SCRYPT_P: u32 = 1;
const SALT_BYTES: usize = 32;
const NONCE_BYTES: usize = 24;
const SECRETBOX_KEY_BYTES: usize = 32;

/// A public key wasmsched can verify with: ECDSA P-256.
#[derive(Clone, PartialEq, Eq)]
pub struct PublicKey {
    spki: Vec<u8>,
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PublicKey({})", self.fingerprint())
    }
}

impl PublicKey {
    /// The first `PUBLIC KEY` block of a PEM text; why not, in words.
    pub fn from_pem(text: &str) -> Result<PublicKey, String> {
        let (_, der) = pem_decode(text, &[PUBLIC_KEY_LABEL])?;
        PublicKey::from_spki(der)
    }

    /// A DER SubjectPublicKeyInfo; only P-256 with an uncompressed point is taken.
    pub fn from_spki(der: Vec<u8>) -> Result<PublicKey, String> {
        if der.len() == P256_SPKI_PREFIX.len() + P256_POINT_BYTES && der.starts_with(&P256_SPKI_PREFIX) {
            return Ok(PublicKey { spki: der });
        }
        Err(format!(
            "it holds {}; wasmsched verifies ECDSA P-256 keys (those `cosign generate-key-pair` and `wasmsched key generate` make)",
            key_kind(&der)
        ))
    }

    /// The DER SubjectPublicKeyInfo.
    pub fn spki(&self) -> &[u8] {
        &self.spki
    }

    /// `sha256:` and the first 16 hex digits of the SHA-256 of the DER SubjectPublicKeyInfo.
    pub fn fingerprint(&self) -> String {
        format!("sha256:{}", &hex::encode(Sha256::digest(&self.spki))[..16])
    }

    /// As PEM, the way cosign writes `cosign.pub`.
    pub fn to_pem(&self) -> String {
        pem_encode(PUBLIC_KEY_LABEL, &self.spki)
    }

    /// Whether `signature` (ASN.1 DER) is this key's ECDSA P-256 SHA-256 signature of `message`.
    pub fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        let point = &self.spki[P256_SPKI_PREFIX.len()..];
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, point).verify(message, signature).is_ok()
    }
}

/// What a SubjectPublicKeyInfo that is not P-256 holds, to say so.
fn key_kind(der: &[u8]) -> &'static str {
    let has = |oid: &[u8]| der.windows(oid.len()).any(|w| w == oid);
    if has(&[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01]) {
        "an RSA key"
    } else if has(&[0x06, 0x03, 0x2b, 0x65, 0x70]) {
        "an Ed25519 key"
    } else if has(&[0x2b, 0x81, 0x04, 0x00, 0x22]) {
        "an ECDSA P-384 key"
    } else if has(&[0x2b, 0x81, 0x04, 0x00, 0x23]) {
        "an ECDSA P-521 key"
    } else if has(&[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07]) {
        "a P-256 key with a compressed point"
    } else {
        "no public key wasmsched can read"
    }
}

/// A private key, decrypted: ECDSA P-256.
pub struct PrivateKey {
    pair: EcdsaKeyPair,
}

impl std::fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PrivateKey({})", self.public_key().fingerprint())
    }
}

/// The JSON inside an encrypted private key's PEM, as go-securesystemslib's `encrypted` writes it.
#[derive(Serialize, Deserialize)]
struct Sealed {
    kdf: Kdf,
    cipher: Cipher,
    #[serde(with = "base64_field")]
    ciphertext: Vec<u8>,
}

#[derive(Serialize, Deserialize)]
struct Kdf {
    name: String,
    params: ScryptParams,
    #[serde(with = "base64_field")]
    salt: Vec<u8>,
}

#[derive(Serialize, Deserialize)]
struct ScryptParams {
    #[serde(rename = "N")]
    n: u64,
    r: u32,
    p: u32,
}

#[derive(Serialize, Deserialize)]
struct Cipher {
    name: String,
    #[serde(with = "base64_field")]
    nonce: Vec<u8>,
}

mod base64_field {
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::BASE64.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        super::BASE64.decode(text).map_err(serde::de::Error::custom)
    }
}

impl PrivateKey {
    /// A new key, as PKCS #8 DER.
    pub fn generate() -> Result<Vec<u8>, String> {
        let document = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &SystemRandom::new())
            .map_err(|_| "the system's random number generator failed".to_string())?;
        Ok(document.as_ref().to_vec())
    }

    /// A key from its PKCS #8 DER (cosign's is Go's `x509.MarshalPKCS8PrivateKey`).
    pub fn from_pkcs8(der: &[u8]) -> Result<PrivateKey, String> {
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, der, &SystemRandom::new())
            .map(|pair| PrivateKey { pair })
            .map_err(|e| format!("it is not an ECDSA P-256 private key ({e}); wasmsched signs with those only"))
    }

    /// Decrypt cosign's PEM with `password` (empty when none was set).
    pub fn from_encrypted_pem(text: &str, password: &[u8]) -> Result<PrivateKey, String> {
        let (_, body) = pem_decode(text, &[PRIVATE_KEY_LABEL, OLD_PRIVATE_KEY_LABEL])?;
        let sealed: Sealed =
            serde_json::from_slice(&body).map_err(|e| format!("its body is not cosign's encrypted key ({e})"))?;
        if sealed.kdf.name != "scrypt" || sealed.cipher.name != "nacl/secretbox" {
            return Err(format!(
                "it is sealed with {} and {}; wasmsched reads cosign's scrypt and nacl/secretbox",
                sealed.kdf.name, sealed.cipher.name
            ));
        }
        let ScryptParams { n, r, p } = sealed.kdf.params;
        let log_n = SCRYPT_LOG_N_READ.into_iter().find(|&log_n| n == 1 << log_n);
        let (Some(log_n), SCRYPT_R, SCRYPT_P) = (log_n, r, p) else {
            return Err(format!("its scrypt cost (N={n}, r={r}, p={p}) is not cosign's; generate the key again"));
        };
        if sealed.cipher.nonce.len() != NONCE_BYTES {
            return Err(format!("its nonce is {} bytes, not {NONCE_BYTES}", sealed.cipher.nonce.len()));
        }
        let cipher = secretbox(password, &sealed.kdf.salt, log_n)?;
        let der = cipher
            .decrypt(Nonce::from_slice(&sealed.cipher.nonce), sealed.ciphertext.as_slice())
            .map_err(|_| "it does not open with this password: is COSIGN_PASSWORD the one it was made with?")?;
        PrivateKey::from_pkcs8(&der)
    }

    /// Seal a PKCS #8 DER key with `password`, as `cosign generate-key-pair` writes it.
    pub fn encrypt_pem(pkcs8: &[u8], password: &[u8]) -> Result<String, String> {
        let rng = SystemRandom::new();
        let (mut salt, mut nonce) = (vec![0; SALT_BYTES], vec![0; NONCE_BYTES]);
        rng.fill(&mut salt).and_then(|()| rng.fill(&mut nonce)).map_err(|_| "the random number generator failed")?;
        let cipher = secretbox(password, &salt, SCRYPT_LOG_N)?;
        let ciphertext = cipher.encrypt(Nonce::from_slice(&nonce), pkcs8).map_err(|_| "the key cannot be sealed")?;
        let sealed = Sealed {
            kdf: Kdf {
                name: "scrypt".into(),
                params: ScryptParams { n: 1 << SCRYPT_LOG_N, r: SCRYPT_R, p: SCRYPT_P },
                salt,
            },
            cipher: Cipher { name: "nacl/secretbox".into(), nonce },
            ciphertext,
        };
        let json = serde_json::to_vec(&sealed).map_err(|e| e.to_string())?;
        Ok(pem_encode(PRIVATE_KEY_LABEL, &json))
    }

    /// Its public key.
    pub fn public_key(&self) -> PublicKey {
        let mut spki = P256_SPKI_PREFIX.to_vec();
        spki.extend_from_slice(self.pair.public_key().as_ref());
        PublicKey { spki }
    }

    /// The ECDSA P-256 SHA-256 signature of `message`, ASN.1 DER.
    pub fn sign(&self, message: &[u8]) -> Result<Vec<u8>, String> {
        let signature = self
            .pair
            .sign(&SystemRandom::new(), message)
            .map_err(|_| "the random number generator failed while signing".to_string())?;
        Ok(signature.as_ref().to_vec())
    }
}

/// NaCl's secretbox under the key scrypt derives from `password` and `salt`.
fn secretbox(password: &[u8], salt: &[u8], log_n: u8) -> Result<XSalsa20Poly1305, String> {
    let params = scrypt::Params::new(log_n, SCRYPT_R, SCRYPT_P, SECRETBOX_KEY_BYTES).map_err(|e| e.to_string())?;
    let mut key = [0u8; SECRETBOX_KEY_BYTES];
    scrypt::scrypt(password, salt, &params, &mut key).map_err(|e| e.to_string())?;
    let cipher = XSalsa20Poly1305::new_from_slice(&key).map_err(|e| e.to_string());
    key.fill(0);
    cipher
}

/// The body of the first PEM block labelled one of `labels`, decoded, and its label.
pub fn pem_decode<'a>(text: &str, labels: &[&'a str]) -> Result<(&'a str, Vec<u8>), String> {
    let mut lines = text.lines().map(str::trim);
    let mut other = None;
    while let Some(line) = lines.next() {
        let Some(label) = line.strip_prefix("-----BEGIN ").and_then(|l| l.strip_suffix("-----")) else { continue };
        let Some(&wanted) = labels.iter().find(|&&l| l == label) else {
            other.get_or_insert_with(|| label.to_string());
            continue;
        };
        let end = format!("-----END {label}-----");
        let mut body = String::new();
        for line in lines.by_ref() {
            if line == end {
                let der = BASE64.decode(&body).map_err(|e| format!("its {label} block is not base64 ({e})"))?;
                return Ok((wanted, der));
            }
            // Headers (`Proc-Type: …`) are not part of the body.
            if !line.contains(':') {
                body.push_str(line);
            }
        }
        return Err(format!("its {label} block has no END line"));
    }
    let wanted = labels.iter().map(|l| format!("\"{l}\"")).collect::<Vec<_>>().join(" or ");
    Err(match other {
        Some(label) => format!("it holds a PEM block \"{label}\", not {wanted}"),
        None => format!("it holds no PEM block (-----BEGIN {}-----)", labels.first().unwrap_or(&"…")),
    })
}

/// `der` as a PEM block: base64 in lines of 64.
pub fn pem_encode(label: &str, der: &[u8]) -> String {
    let body = BASE64.encode(der);
    let mut text = format!("-----BEGIN {label}-----\n");
    for chunk in body.as_bytes().chunks(64) {
        text.push_str(&String::from_utf8_lossy(chunk));
        text.push('\n');
    }
    text.push_str(&format!("-----END {label}-----\n"));
    text
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A key `cosign generate-key-pair` made, with an empty password (from the sigstore-rs
    /// repository's test data, Apache-2.0).
    pub const COSIGN_PRIVATE_KEY: &str = "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----
eyJrZGYiOnsibmFtZSI6InNjcnlwdCIsInBhcmFtcyI6eyJOIjo2NTUzNiwiciI6
OCwicCI6MX0sInNhbHQiOiJFY3pJR3Z0bnpFcCsxaEpudERnbGI1UnoxN3gwQVMy
YklvWGRNcDQrU1NJPSJ9LCJjaXBoZXIiOnsibmFtZSI6Im5hY2wvc2VjcmV0Ym94
Iiwibm9uY2UiOiJtSVVKbG1OMzNINExvZ0dhaG5MamdmK3R4SmJwci93MCJ9LCJj
aXBoZXJ0ZXh0IjoiM3FtS2FidXRuYm1WT1IvTkZGM2NDaUErTXp1WWQ5L0VERDVI
MVlUSGhQVzZsSzAvdjVqdDZCQzlsME12NGV5am9qZkl0d3B6a2JJOXQrZGx5VXZ3
VUgvMWZjbkFZT2dEdXRLQzkvSkNiOE02SVY2VHpVaDF5c0ZFWDFzeG9xb1FzeUpL
bjM0UVlldFNlaVdDaGtmUHUyZXByQjFEV0pwekdzTGZIakxNVTkzOEdmNk1xM1A0
N0ZSd2syZzY1cFZnSGMwVWV1L1N1OUs0Zmc9PSJ9
-----END ENCRYPTED SIGSTORE PRIVATE KEY-----
";

    /// A signature cosign made of an image, with the public key that verifies it and the
    /// simple-signing payload it signed (sigstore-rs's test data, Apache-2.0).
    pub const COSIGN_PUBLIC_KEY: &str = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAENptdY/l3nB0yqkXLBWkZWQwo6+cu
OSWS1X9vPavpiQOoTTGC0xX57OojUadxF1cdQmrsiReWg2Wn4FneJfa8xw==
-----END PUBLIC KEY-----
";
    pub const COSIGN_SIGNATURE: &str =
        "MEUCIQD6q/COgzOyW0YH1Dk+CCYSt4uAhm3FDHUwvPI55zwnlwIgE0ZK58ZOWpZw8YVmBapJhBqCfdPekIknimuO0xH8Jh8=";
    pub const COSIGN_PAYLOAD: &str = r#"{"critical":{"identity":{"docker-reference":"registry-testing.svc.lan/busybox"},"image":{"docker-manifest-digest":"sha256:f3cfc9d0dbf931d3db4685ec659b7ac68e2a578219da4aae65427886e649b06b"},"type":"cosign container image signature"},"optional":null}"#;

    #[test]
    fn a_key_cosign_generated_opens_and_signs_what_its_public_key_verifies() {
        let key = PrivateKey::from_encrypted_pem(COSIGN_PRIVATE_KEY, b"").unwrap();
        let signature = key.sign(b"policy bytes").unwrap();
        assert!(key.public_key().verifies(b"policy bytes", &signature));
        assert!(!key.public_key().verifies(b"policy bytez", &signature));
        let err = PrivateKey::from_encrypted_pem(COSIGN_PRIVATE_KEY, b"wrong").unwrap_err();
        assert!(err.contains("COSIGN_PASSWORD"), "{err}");
    }

    #[test]
    fn a_signature_cosign_made_verifies_and_one_of_other_bytes_does_not() {
        let key = PublicKey::from_pem(COSIGN_PUBLIC_KEY).unwrap();
        let signature = BASE64.decode(COSIGN_SIGNATURE).unwrap();
        assert!(key.verifies(COSIGN_PAYLOAD.as_bytes(), &signature));
        assert!(!key.verifies(COSIGN_PAYLOAD.replace("busybox", "busyb0x").as_bytes(), &signature));
    }

    #[test]
    fn a_key_written_with_a_password_opens_with_it_only_and_keeps_its_public_key() {
        let pkcs8 = PrivateKey::generate().unwrap();
        let pem = PrivateKey::encrypt_pem(&pkcs8, b"s3cret").unwrap();
        assert!(pem.starts_with("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\n"), "{pem}");
        let opened = PrivateKey::from_encrypted_pem(&pem, b"s3cret").unwrap();
        assert_eq!(opened.public_key(), PrivateKey::from_pkcs8(&pkcs8).unwrap().public_key());
        assert!(PrivateKey::from_encrypted_pem(&pem, b"").is_err());
        let public = opened.public_key();
        assert_eq!(PublicKey::from_pem(&public.to_pem()).unwrap(), public);
        assert!(public.fingerprint().starts_with("sha256:") && public.fingerprint().len() == 23);
    }

    #[test]
    fn keys_of_other_kinds_and_other_pem_blocks_are_named() {
        // An Ed25519 SubjectPublicKeyInfo.
        let ed25519 = pem_encode(
            PUBLIC_KEY_LABEL,
            &[
                0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32,
            ],
        );
        let err = PublicKey::from_pem(&ed25519).unwrap_err();
        assert!(err.contains("an Ed25519 key") && err.contains("ECDSA P-256"), "{err}");
        let err = PublicKey::from_pem(COSIGN_PRIVATE_KEY).unwrap_err();
        assert!(err.contains("\"ENCRYPTED SIGSTORE PRIVATE KEY\", not \"PUBLIC KEY\""), "{err}");
        let err = PublicKey::from_pem("ssh-ed25519 AAAA… me@host").unwrap_err();
        assert!(err.contains("no PEM block"), "{err}");
        let err = PrivateKey::from_encrypted_pem(COSIGN_PUBLIC_KEY, b"").unwrap_err();
        assert!(err.contains("\"PUBLIC KEY\""), "{err}");
    }

    #[test]
    fn an_encrypted_key_with_another_scrypt_cost_is_refused_before_deriving() {
        let json = r#"{"kdf":{"name":"scrypt","params":{"N":1073741824,"r":8,"p":1},"salt":"AA=="},"cipher":{"name":"nacl/secretbox","nonce":"AA=="},"ciphertext":"AA=="}"#;
        let err = PrivateKey::from_encrypted_pem(&pem_encode(PRIVATE_KEY_LABEL, json.as_bytes()), b"").unwrap_err();
        assert!(err.contains("scrypt cost"), "{err}");
        let short_nonce = json.replace("1073741824", "65536");
        let err =
            PrivateKey::from_encrypted_pem(&pem_encode(PRIVATE_KEY_LABEL, short_nonce.as_bytes()), b"").unwrap_err();
        assert!(err.contains("nonce"), "{err}");
    }
}
