//! Who is signed in to the web page: a session per sign-in, kept in the server's memory (a
//! restart signs everyone out), named by a random id in an HttpOnly, SameSite=Strict cookie
//! (Secure when served over TLS). A session holds the token it was opened with, and that
//! token is checked again on every request, so a revoked or expired token ends the session
//! at once. Every form that changes something carries the session's CSRF token; a POST
//! without it, or whose `Origin` is another site's, is refused before anything runs.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, HeaderValue, header};

/// The session cookie's name.
pub const COOKIE: &str = "agents_session";

/// How long a session lasts after sign-in (its token may end it sooner).
pub const LIFETIME: Duration = Duration::from_secs(12 * 60 * 60);

/// Sessions open at once beyond which the oldest are dropped.
const MAX_SESSIONS: usize = 10_000;

/// One signed-in browser.
#[derive(Debug, Clone)]
pub struct Session {
    /// The token's secret the session was opened with (checked on every request).
    pub secret: String,
    /// The token every form of this session carries.
    pub csrf: String,
    /// When it ends.
    expires: Instant,
    /// A line to show once on the next page (what the last action did).
    pub notice: Option<String>,
}

/// The open sessions, by id.
#[derive(Debug, Default)]
pub struct Sessions {
    open: Mutex<HashMap<String, Session>>,
}

/// `bytes` random bytes as lowercase hex, from the operating system's generator.
///
/// # Panics
/// When the system has no random source (the server cannot run safely without one).
pub fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).expect("the operating system's random source");
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

impl Sessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        self.open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Opens a session for `secret`: its id.
    pub fn open(&self, secret: String) -> String {
        let id = random_hex(32);
        let now = Instant::now();
        let mut open = self.lock();
        open.retain(|_, s| s.expires > now);
        if open.len() >= MAX_SESSIONS
            && let Some(oldest) = open
                .iter()
                .min_by_key(|(_, s)| s.expires)
                .map(|(k, _)| k.clone())
        {
            open.remove(&oldest);
        }
        open.insert(
            id.clone(),
            Session {
                secret,
                csrf: random_hex(32),
                expires: now + LIFETIME,
                notice: None,
            },
        );
        id
    }

    /// The session `id`, while it lasts.
    pub fn get(&self, id: &str) -> Option<Session> {
        let mut open = self.lock();
        match open.get(id) {
            Some(s) if s.expires > Instant::now() => Some(s.clone()),
            Some(_) => {
                open.remove(id);
                None
            }
            None => None,
        }
    }

    /// Ends session `id`.
    pub fn close(&self, id: &str) {
        self.lock().remove(id);
    }

    /// Keeps `notice` for the next page session `id` shows.
    pub fn set_notice(&self, id: &str, notice: String) {
        if let Some(s) = self.lock().get_mut(id) {
            s.notice = Some(notice);
        }
    }

    /// The notice kept for session `id`, taken (shown once).
    pub fn take_notice(&self, id: &str) -> Option<String> {
        self.lock().get_mut(id).and_then(|s| s.notice.take())
    }
}

/// The session id the request's cookie names.
pub fn cookie_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.trim().to_string())
        .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The `Set-Cookie` value that keeps session `id` (or, with `None`, forgets it).
pub fn set_cookie(id: Option<&str>, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    let value = match id {
        Some(id) => format!(
            "{COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}{secure}",
            LIFETIME.as_secs()
        ),
        None => format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0{secure}"),
    };
    HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// Whether two secrets are equal, compared in time independent of where they differ.
pub fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// Whether a POST may come from where it says it comes from: without an `Origin` header
/// (older browsers, scripts) it may; with one, only from this server (its scheme and the
/// `Host` it was asked by).
pub fn same_origin(headers: &HeaderMap, tls: bool) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let (Ok(origin), Some(host)) = (
        origin.to_str(),
        headers.get(header::HOST).and_then(|h| h.to_str().ok()),
    ) else {
        return false;
    };
    let scheme = if tls { "https" } else { "http" };
    origin.eq_ignore_ascii_case(&format!("{scheme}://{host}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(k.clone(), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn a_session_is_found_by_its_cookie_and_forgotten_on_close() {
        let sessions = Sessions::default();
        let id = sessions.open("agt_secret".into());
        let h = headers(&[(header::COOKIE, &format!("theme=dark; {COOKIE}={id}"))]);
        let found = cookie_id(&h).unwrap();
        assert_eq!(sessions.get(&found).unwrap().secret, "agt_secret");
        sessions.close(&found);
        assert!(sessions.get(&found).is_none());
    }

    #[test]
    fn the_cookie_is_http_only_same_site_strict_and_secure_only_over_tls() {
        let plain = set_cookie(Some("ab"), false);
        let plain = plain.to_str().unwrap();
        assert!(plain.contains("HttpOnly") && plain.contains("SameSite=Strict"));
        assert!(!plain.contains("Secure"));
        assert!(
            set_cookie(Some("ab"), true)
                .to_str()
                .unwrap()
                .contains("; Secure")
        );
    }

    #[test]
    fn a_post_from_another_origin_is_not_this_servers() {
        let host = (header::HOST, "127.0.0.1:7420");
        assert!(same_origin(&headers(std::slice::from_ref(&host)), false));
        let ours = (header::ORIGIN, "http://127.0.0.1:7420");
        assert!(same_origin(&headers(&[host.clone(), ours]), false));
        let theirs = (header::ORIGIN, "http://evil.example");
        assert!(!same_origin(&headers(&[host.clone(), theirs]), false));
        let downgraded = (header::ORIGIN, "http://127.0.0.1:7420");
        assert!(!same_origin(&headers(&[host, downgraded]), true));
    }

    #[test]
    fn secrets_compare_equal_only_when_identical() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "ab"));
    }
}
