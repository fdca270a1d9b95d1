//! JWTs of configured OIDC issuers (`[[server.oidc]]` in `config.toml`): a CI job's identity
//! token or a single sign-on provider's, accepted as the server's user one of its claims names
//! (spec section 22, "who may do what"). The issuer's signing keys come from its JWKS: a file
//! read when the configuration is loaded, or a URL fetched on first use, kept, and fetched again
//! when a token names a key it does not hold.
//!
//! Only signed tokens are accepted (RS256, ES256); the signature, the issuer, the audience and
//! the validity period (`exp`, `nbf`) are checked, and each refusal names its reason.

use std::time::{Duration, Instant};

use base64::Engine as _;
use cleveragents_engine::config::OidcIssuer;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation, errors::ErrorKind};

/// Seconds of clock difference allowed between the issuer and this server for `exp`/`nbf`.
const LEEWAY_SECS: u64 = 30;

/// How soon after one fetch a token naming an unknown key may make the server fetch the
/// issuer's keys again (so that forged key ids cannot make it fetch for every request).
const REFETCH_AFTER: Duration = Duration::from_secs(30);

/// How long one JWKS fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// The signing algorithms accepted.
const ACCEPTED: [Algorithm; 2] = [Algorithm::RS256, Algorithm::ES256];

/// The configured issuers and their keys.
#[derive(Debug, Default)]
pub struct Verifier {
    issuers: Vec<Issuer>,
}

#[derive(Debug)]
struct Issuer {
    config: OidcIssuer,
    /// The keys, with when they were fetched (a file's: when it was read).
    keys: tokio::sync::Mutex<Option<(JwkSet, Instant)>>,
}

/// A JWT accepted: who it names and who issued it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    /// The issuer (`iss`).
    pub issuer: String,
    /// The user the configured claim names.
    pub user: String,
}

/// Whether `bearer` has the shape of a JWT (three base64url parts), so that it is checked as
/// one rather than as a token of this server.
pub fn looks_like_jwt(bearer: &str) -> bool {
    let parts: Vec<&str> = bearer.split('.').collect();
    parts.len() == 3
        && parts[..2].iter().all(|p| !p.is_empty())
        && parts.iter().all(|p| {
            p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'=')
        })
}

fn part(bearer: &str, index: usize) -> Option<serde_json::Value> {
    let text = bearer.split('.').nth(index)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text.trim_end_matches('='))
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn read_jwks(path: &std::path::Path) -> Result<JwkSet, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the JWKS file {}: {e}", path.display()))?;
    serde_json::from_str(&text)
        .map_err(|e| format!("the JWKS file {} is not a JWK set: {e}", path.display()))
}

impl Verifier {
    /// The issuers of `config`, their JWKS files read now.
    ///
    /// # Errors
    /// Which file cannot be read or parsed.
    pub fn new(config: &[OidcIssuer]) -> Result<Self, String> {
        let issuers = config
            .iter()
            .map(|c| {
                let keys = match &c.jwks_file {
                    Some(path) => Some((read_jwks(path)?, Instant::now())),
                    None => None,
                };
                Ok(Issuer {
                    config: c.clone(),
                    keys: tokio::sync::Mutex::new(keys),
                })
            })
            .collect::<Result<_, String>>()?;
        Ok(Self { issuers })
    }

    /// Whether any issuer is configured.
    pub fn is_empty(&self) -> bool {
        self.issuers.is_empty()
    }

    /// Checks `bearer` as a JWT of a configured issuer: who it names, or why it is refused
    /// (a sentence the 401 carries).
    ///
    /// # Errors
    /// The reason it is refused.
    pub async fn verify(&self, bearer: &str) -> Result<Accepted, String> {
        let header = part(bearer, 0).ok_or("the JWT's header is not base64url JSON")?;
        let alg = header.get("alg").and_then(|a| a.as_str()).unwrap_or("none");
        if alg.eq_ignore_ascii_case("none") || bearer.ends_with('.') {
            return Err("the JWT is unsigned (alg `none`); only signed JWTs are accepted".into());
        }
        let algorithm = ACCEPTED
            .into_iter()
            .find(|a| format!("{a:?}") == alg)
            .ok_or_else(|| {
                format!("the JWT's algorithm `{alg}` is not accepted (RS256 or ES256 are)")
            })?;
        let claims = part(bearer, 1).ok_or("the JWT's claims are not base64url JSON")?;
        let iss = claims
            .get("iss")
            .and_then(|i| i.as_str())
            .ok_or("the JWT has no issuer (`iss`)")?;
        let issuer = self
            .issuers
            .iter()
            .find(|i| i.config.issuer == iss)
            .ok_or_else(|| format!("the JWT's issuer `{iss}` is not configured on this server"))?;
        let kid = header.get("kid").and_then(|k| k.as_str());
        let key = issuer.key(kid).await?;
        let mut validation = Validation::new(algorithm);
        validation.leeway = LEEWAY_SECS;
        validation.validate_nbf = true;
        validation.set_audience(&[issuer.config.audience.as_str()]);
        validation.set_issuer(&[issuer.config.issuer.as_str()]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        let data = jsonwebtoken::decode::<serde_json::Value>(bearer, &key, &validation)
            .map_err(|e| refusal(e.kind(), &issuer.config))?;
        let claim = issuer.config.user_claim();
        let user = data
            .claims
            .get(claim)
            .and_then(|v| v.as_str())
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .ok_or_else(|| format!("the JWT has no `{claim}` claim naming a user"))?;
        Ok(Accepted {
            issuer: issuer.config.issuer.clone(),
            user: user.to_string(),
        })
    }
}

/// Why `decode` refused a token, for the 401.
fn refusal(kind: &ErrorKind, issuer: &OidcIssuer) -> String {
    match kind {
        ErrorKind::ExpiredSignature => "the JWT has expired (`exp` is past)".into(),
        ErrorKind::ImmatureSignature => "the JWT is not valid yet (`nbf` is ahead)".into(),
        ErrorKind::InvalidAudience => format!(
            "the JWT's audience is wrong: this server accepts `{}`",
            issuer.audience
        ),
        ErrorKind::InvalidIssuer => "the JWT's issuer is not the configured one".into(),
        ErrorKind::InvalidSignature => "the JWT's signature does not verify".into(),
        ErrorKind::MissingRequiredClaim(c) => format!("the JWT has no `{c}` claim"),
        ErrorKind::InvalidAlgorithm | ErrorKind::MissingAlgorithm => {
            "the JWT's algorithm does not match its issuer's key".into()
        }
        other => format!("the JWT is not usable: {other:?}"),
    }
}

impl Issuer {
    /// The key `kid` names (or the only key, when the token names none), fetching the
    /// issuer's keys when they are not held or lack it.
    async fn key(&self, kid: Option<&str>) -> Result<DecodingKey, String> {
        let mut held = self.keys.lock().await;
        let found = |set: &JwkSet| match kid {
            Some(k) => set.find(k).cloned(),
            None if set.keys.len() == 1 => set.keys.first().cloned(),
            None => None,
        };
        let jwk = match held.as_ref().and_then(|(set, _)| found(set)) {
            Some(jwk) => jwk,
            None => {
                let url = self.config.jwks_url.as_deref();
                let stale = held
                    .as_ref()
                    .is_none_or(|(_, at)| at.elapsed() >= REFETCH_AFTER);
                let fresh = match url {
                    Some(url) if stale => {
                        let set = fetch(url).await?;
                        *held = Some((set.clone(), Instant::now()));
                        found(&set)
                    }
                    _ => None,
                };
                fresh.ok_or_else(|| match kid {
                    Some(k) => format!(
                        "the JWT's key `{k}` is not among its issuer's keys (`{}`)",
                        self.config.issuer
                    ),
                    None => "the JWT names no key (`kid`) and its issuer has several".to_string(),
                })?
            }
        };
        DecodingKey::from_jwk(&jwk).map_err(|e| format!("the issuer's key is not usable: {e}"))
    }
}

async fn fetch(url: &str) -> Result<JwkSet, String> {
    let client = reqwest::Client::builder()
        .timeout(FETCH_TIMEOUT)
        .build()
        .map_err(|e| format!("cannot fetch the issuer's keys: {e}"))?;
    let response = client
        .get(url)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|e| format!("cannot fetch the issuer's keys from {url}: {e}"))?;
    response
        .json::<JwkSet>()
        .await
        .map_err(|e| format!("the issuer's keys at {url} are not a JWK set: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_three_base64url_parts_look_like_a_jwt() {
        assert!(looks_like_jwt("eyJh.eyJi.c2ln"));
        assert!(looks_like_jwt("eyJh.eyJi."));
        assert!(!looks_like_jwt("agt_0000"));
        assert!(!looks_like_jwt("a.b"));
        assert!(!looks_like_jwt("a b.c.d"));
    }
}
