//! Tenancy: API keys, access tokens (JWT, HS256), the key cache that makes revocation take
//! effect, and the tenants' limits (request rate, stored models and bytes).

pub mod limits;

pub use limits::{check_storage, RateLimiter};

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use infaas_core::{time::now_ms, Role};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use rand::Rng;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use infaas_store::Db;

use crate::error::Error;

/// Every API key starts with this, so leaked keys are easy to recognise and scan for.
pub const KEY_PREFIX: &str = "infaas_";
const ISSUER: &str = "infaas";

/// A freshly generated key: the secret is shown once, only the hash is stored.
pub struct NewKey {
    pub secret: String,
    pub prefix: String,
    pub hash: String,
}

pub fn generate_key() -> NewKey {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    let body: String = (0..40)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect();
    let secret = format!("{KEY_PREFIX}{body}");
    NewKey {
        prefix: secret[..KEY_PREFIX.len() + 6].to_string(),
        hash: hash_key(&secret),
        secret,
    }
}

/// Keys carry 238 bits of randomness, so a plain SHA-256 is a sufficient stored form.
pub fn hash_key(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Claims of an access token.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Claims {
    /// API key id the token was issued for.
    pub sub: String,
    /// Tenant id.
    pub tid: String,
    pub role: Role,
    pub iss: String,
    pub iat: i64,
    pub exp: i64,
}

/// Signs and checks access tokens, and derives the anti-forgery tokens of dashboard
/// sessions from them.
pub struct TokenIssuer {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
    /// HMAC key of anti-forgery tokens, derived from the signing secret (never the secret
    /// itself, so that no token of one kind can stand for the other).
    csrf: aws_lc_rs::hmac::Key,
    pub ttl: Duration,
    /// Tokens that passed the check, with their claims: a client sends the same token with
    /// every request, and checking its signature costs about 10 µs of each query. An entry
    /// serves only until its token expires (with the check's leeway); revocation is checked
    /// on every request regardless ([`KeyCache`]).
    verified: Mutex<HashMap<String, Claims>>,
}

/// Tokens [`TokenIssuer`] remembers at most (the map is emptied when full).
const VERIFIED_TOKENS: usize = 10_000;

impl TokenIssuer {
    pub fn new(secret: &[u8], ttl: Duration) -> TokenIssuer {
        // Only HS256 is accepted: tokens with `alg: none` or another algorithm are rejected.
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[ISSUER]);
        validation.set_required_spec_claims(&["exp", "iss", "sub"]);
        validation.leeway = 5;
        let derived = aws_lc_rs::hmac::sign(
            &aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, secret),
            b"infaas dashboard anti-forgery key",
        );
        TokenIssuer {
            encoding: EncodingKey::from_secret(secret),
            decoding: DecodingKey::from_secret(secret),
            validation,
            csrf: aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, derived.as_ref()),
            ttl,
            verified: Mutex::new(HashMap::new()),
        }
    }

    /// The anti-forgery token of a dashboard session: an HMAC of the session's access
    /// token, so it needs no storage and changes with every sign-in.
    pub fn csrf_token(&self, access_token: &str) -> String {
        hex::encode(aws_lc_rs::hmac::sign(&self.csrf, access_token.as_bytes()))
    }

    /// Whether `given` is the anti-forgery token of the session (constant time).
    pub fn csrf_matches(&self, access_token: &str, given: &str) -> bool {
        match hex::decode(given.trim()) {
            Ok(tag) => aws_lc_rs::hmac::verify(&self.csrf, access_token.as_bytes(), &tag).is_ok(),
            Err(_) => false,
        }
    }

    pub fn issue(&self, key_id: &str, tenant_id: &str, role: Role) -> Result<String, Error> {
        let now = now_ms() / 1000;
        let claims = Claims {
            sub: key_id.to_string(),
            tid: tenant_id.to_string(),
            role,
            iss: ISSUER.to_string(),
            iat: now,
            exp: now + self.ttl.as_secs() as i64,
        };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .map_err(Error::internal)
    }

    pub fn verify(&self, token: &str) -> Result<Claims, Error> {
        let oldest_exp = now_ms() / 1000 - self.validation.leeway as i64;
        if let Ok(verified) = self.verified.lock() {
            if let Some(claims) = verified.get(token).filter(|c| c.exp >= oldest_exp) {
                return Ok(claims.clone());
            }
        }
        let claims = self.check(token)?;
        if let Ok(mut verified) = self.verified.lock() {
            if verified.len() >= VERIFIED_TOKENS {
                verified.clear();
            }
            verified.insert(token.to_string(), claims.clone());
        }
        Ok(claims)
    }

    /// The token's claims once its signature, algorithm, issuer and expiry check out.
    fn check(&self, token: &str) -> Result<Claims, Error> {
        use jsonwebtoken::errors::ErrorKind;
        jsonwebtoken::decode::<Claims>(token, &self.decoding, &self.validation)
            .map(|d| d.claims)
            .map_err(|e| {
                let why = match e.kind() {
                    ErrorKind::ExpiredSignature => {
                        "the access token has expired; request a new one at POST /v1/auth/token"
                    }
                    ErrorKind::InvalidSignature => "the access token's signature is invalid",
                    ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName => {
                        "the access token's algorithm is not accepted (HS256 only)"
                    }
                    ErrorKind::InvalidIssuer => "the access token was not issued by infaas",
                    ErrorKind::MissingRequiredClaim(_) => "the access token lacks a required claim",
                    _ => "the access token is malformed",
                };
                Error::Unauthenticated(why.to_string())
            })
    }
}

/// Remembers for a few seconds whether a key is active, so that a request costs no
/// database round trip; revocation through this server takes effect at once.
#[derive(Default)]
pub struct KeyCache {
    entries: Mutex<HashMap<String, (bool, Instant)>>,
}

const KEY_CACHE_TTL: Duration = Duration::from_secs(5);

impl KeyCache {
    /// Whether the key `key_id` of `tenant_id` is active (not revoked).
    pub async fn is_active(&self, db: &Db, tenant_id: &str, key_id: &str) -> Result<bool, Error> {
        let cache_key = format!("{tenant_id}/{key_id}");
        if let Ok(map) = self.entries.lock() {
            if let Some((active, at)) = map.get(&cache_key) {
                if at.elapsed() < KEY_CACHE_TTL {
                    return Ok(*active);
                }
            }
        }
        let active = db.api_key_active(tenant_id, key_id).await?;
        if let Ok(mut map) = self.entries.lock() {
            if map.len() > 100_000 {
                map.clear();
            }
            map.insert(cache_key, (active, Instant::now()));
        }
        Ok(active)
    }

    pub fn invalidate(&self, tenant_id: &str, key_id: &str) {
        if let Ok(mut map) = self.entries.lock() {
            map.remove(&format!("{tenant_id}/{key_id}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_unique_and_hashed() {
        let a = generate_key();
        let b = generate_key();
        assert_ne!(a.secret, b.secret);
        assert!(a.secret.starts_with(KEY_PREFIX));
        assert!(a.secret.starts_with(&a.prefix));
        assert_eq!(a.hash, hash_key(&a.secret));
        assert_ne!(a.hash, a.secret);
    }

    #[test]
    fn tokens_round_trip_and_reject_tampering() {
        let issuer = TokenIssuer::new(&[7u8; 32], Duration::from_secs(60));
        let t = issuer.issue("k1", "t1", Role::Member).unwrap();
        let c = issuer.verify(&t).unwrap();
        assert_eq!(
            (c.sub.as_str(), c.tid.as_str(), c.role),
            ("k1", "t1", Role::Member)
        );
        let other = TokenIssuer::new(&[8u8; 32], Duration::from_secs(60));
        assert!(other
            .verify(&t)
            .unwrap_err()
            .to_string()
            .contains("signature"));
    }

    #[test]
    fn remembered_tokens_serve_until_they_expire() {
        let issuer = TokenIssuer::new(&[7u8; 32], Duration::from_secs(60));
        let t = issuer.issue("k1", "t1", Role::Member).unwrap();
        assert_eq!(issuer.verify(&t).unwrap().sub, "k1");
        let mark = |sub: &str, exp: i64| {
            let mut verified = issuer.verified.lock().unwrap();
            let c = verified.get_mut(&t).expect("remembered");
            c.sub = sub.to_string();
            c.exp = exp;
        };
        // A remembered, unexpired entry answers without a new check.
        mark("from memory", now_ms() / 1000 + 60);
        assert_eq!(issuer.verify(&t).unwrap().sub, "from memory");
        // Past its expiry (and the leeway) it is not used: the token is checked again.
        mark("stale", now_ms() / 1000 - 60);
        assert_eq!(issuer.verify(&t).unwrap().sub, "k1");
        // A token that fails the check is never remembered.
        let other = TokenIssuer::new(&[8u8; 32], Duration::from_secs(60));
        assert!(other.verify(&t).is_err());
        assert!(other.verified.lock().unwrap().is_empty());
    }

    #[test]
    fn anti_forgery_tokens_belong_to_one_session_and_secret() {
        let issuer = TokenIssuer::new(&[7u8; 32], Duration::from_secs(60));
        let session = issuer.issue("k1", "t1", Role::Member).unwrap();
        let csrf = issuer.csrf_token(&session);
        assert!(issuer.csrf_matches(&session, &csrf));
        // Another session, another secret, a tampered or empty token: no match.
        let other_session = issuer.issue("k2", "t1", Role::Member).unwrap();
        assert!(!issuer.csrf_matches(&other_session, &csrf));
        let other = TokenIssuer::new(&[8u8; 32], Duration::from_secs(60));
        assert!(!other.csrf_matches(&session, &csrf));
        let mut tampered = csrf.clone().into_bytes();
        tampered[0] = if tampered[0] == b'0' { b'1' } else { b'0' };
        assert!(!issuer.csrf_matches(&session, &String::from_utf8(tampered).unwrap()));
        assert!(!issuer.csrf_matches(&session, ""));
        assert!(!issuer.csrf_matches(&session, "not hex"));
        // The token is not the session's signature: it cannot be used as one.
        assert!(!session.ends_with(&csrf));
    }
}
