//! Provider clients: one HTTP client per configured provider (`[providers.NAME]`, see
//! [`crate::config::Provider`]) speaking its wire format, with timeouts, retries and
//! error messages that say what to fix.
//!
//! Spec section 16 (built-in provider actors `openai/<model>`, `anthropic/<model>`; users add
//! OpenAI-compatible local servers). Behaviour:
//! - Every request has a connect timeout ([`ClientOptions::connect_timeout`]) and a read
//!   timeout (the provider's `timeout_secs`, applied to each read, so a stalled stream fails).
//! - Every call has an overall deadline, retries included (`call_deadline_secs`, default
//!   600 s), so a server dripping keep-alives or one token at a time cannot hold a plan.
//! - Streams are parsed in linear time (`sse-stream`); one SSE event is capped at
//!   [`ClientOptions::max_event_bytes`] and one reply at [`ClientOptions::max_answer_bytes`]:
//!   over a cap the call fails with [`ProviderError::TooLarge`] (not retried).
//! - Requests are checked before they are sent: temperature within the provider's range
//!   (0 to 2 OpenAI-compatible, 0 to 1 Anthropic), `top-p` within 0 to 1, a non-empty
//!   prompt for Anthropic ([`ProviderError::Invalid`]).
//! - Transient failures (connection errors, timeouts, a stream cut short, HTTP 408, 409, 429,
//!   5xx, in-stream `overloaded`/`api_error` events) are retried with exponential backoff and
//!   jitter (`backon`), honouring `retry-after` / `retry-after-ms` up to
//!   [`RETRY_AFTER_CAP`], at most `max_retries` attempts in total. With
//!   [`RetryMode::Never`] the first transient failure is returned as
//!   [`ProviderError::Transient`] so that the lifecycle can raise a `transient_failure`
//!   approval instead (plans whose `auto_retry_transient` is false).
//! - Permanent failures (401/403, unknown model, context too long, other refusals, malformed
//!   responses) are returned at once.
//! - The API key ([`ApiKey`]) is sent in a header marked sensitive and scrubbed from every
//!   text a provider sends back before it reaches an error.

pub mod anthropic;
pub mod budget;
pub mod embeddings;
pub mod openai;
pub mod secret;
#[cfg(test)]
mod test_turns;
pub mod wire;

use std::time::{Duration, Instant};

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use backon::{BackoffBuilder, ExponentialBuilder};
use futures_util::{StreamExt, TryStreamExt};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::config::{Provider, ProviderKind};
use crate::domain::messages::Message;
use crate::domain::messages::{ChatRequest, ChatResponse, StreamEvent};
use secret::ApiKey;
use wire::{StatusClass, StreamFailure, StreamStep};

/// The longest `retry-after` honoured; a provider asking for more fails the call as transient.
pub const RETRY_AFTER_CAP: Duration = Duration::from_secs(60);
/// Default connect timeout.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default first backoff delay (later ones grow exponentially, with jitter).
pub const DEFAULT_BASE_DELAY: Duration = Duration::from_millis(500);
/// Longest backoff delay when the provider gives no `retry-after`.
pub const MAX_BACKOFF_DELAY: Duration = Duration::from_secs(30);
/// Default cap on one SSE event, in bytes (8 MiB).
pub const MAX_EVENT_BYTES: usize = 8 << 20;
/// Default cap on one reply (text plus tool-call arguments, or a whole JSON body), in bytes
/// (16 MiB).
pub const MAX_ANSWER_BYTES: usize = 16 << 20;

/// A model actor's name split into provider and model: `ollama/llama3` →
/// (`ollama`, `llama3`). The model part may itself contain `/` (`vllm/meta-llama/Llama-3`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelRef {
    /// The provider's name, a key of `[providers.NAME]` or a built-in.
    pub provider: String,
    /// The model name as the provider knows it.
    pub model: String,
}

impl ModelRef {
    /// Parses `PROVIDER/MODEL`.
    ///
    /// # Errors
    /// [`ProviderError::BadModelName`] when either part is missing.
    pub fn parse(name: &str) -> Result<Self, ProviderError> {
        match name.split_once('/') {
            Some((p, m)) if !p.is_empty() && !m.is_empty() => Ok(Self {
                provider: p.to_string(),
                model: m.to_string(),
            }),
            _ => Err(ProviderError::BadModelName {
                name: name.to_string(),
            }),
        }
    }
}

impl std::fmt::Display for ModelRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.provider, self.model)
    }
}

/// Whether transient failures are retried inside the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RetryMode {
    /// Retry with backoff, at most `max_retries` attempts in total.
    #[default]
    Auto,
    /// Return the first transient failure (the lifecycle asks the user).
    Never,
}

/// Client settings that are not in the provider's config table.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Connect timeout.
    pub connect_timeout: Duration,
    /// Read timeout; `None` uses the provider's `timeout_secs`.
    pub read_timeout: Option<Duration>,
    /// First backoff delay.
    pub base_delay: Duration,
    /// Whether to retry transient failures.
    pub retry: RetryMode,
    /// Deadline of one call, retries included; `None` uses the provider's
    /// `call_deadline_secs`.
    pub call_deadline: Option<Duration>,
    /// Largest SSE event accepted, in bytes.
    pub max_event_bytes: usize,
    /// Largest reply accepted, in bytes.
    pub max_answer_bytes: usize,
    /// The window of the provider's rate limits (`requests_per_minute`,
    /// `tokens_per_minute`): one minute.
    pub rate_window: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            read_timeout: None,
            base_delay: DEFAULT_BASE_DELAY,
            retry: RetryMode::Auto,
            call_deadline: None,
            max_event_bytes: MAX_EVENT_BYTES,
            max_answer_bytes: MAX_ANSWER_BYTES,
            rate_window: Duration::from_secs(60),
        }
    }
}

/// How a call abandoned at its call deadline is described ([`ProviderError::abandoned`]).
const CALL_DEADLINE_PASSED: &str = "no complete reply within the call deadline";

/// A provider call that failed. Messages name the provider and say what to fix; they never
/// contain the API key.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProviderError {
    /// `NAME` is not `PROVIDER/MODEL`.
    #[error(
        "`{name}` is not a model actor name: expected PROVIDER/MODEL, e.g. openai/gpt-4.1 or ollama/llama3"
    )]
    BadModelName {
        /// The name as given.
        name: String,
    },
    /// No provider of that name is configured.
    #[error(
        // A command inside a sentence stays (D-commands-2): it explains the error rather than suggesting the next step.
        "no provider named `{name}`; configured providers: {known}. Add one with `agents config set providers.{name}.kind openai` and `providers.{name}.base_url URL`"
    )]
    UnknownProvider {
        /// The provider name.
        name: String,
        /// The providers that exist, comma-separated.
        known: String,
    },
    /// The provider needs a key and its environment variable is unset or empty.
    #[error("provider `{provider}` needs an API key: set the environment variable {env}")]
    MissingKey {
        /// The provider.
        provider: String,
        /// The variable to set.
        env: String,
    },
    /// The provider refused the key (HTTP 401/403).
    #[error("provider `{provider}` rejected the API key (HTTP {status}): {fix}")]
    Auth {
        /// The provider.
        provider: String,
        /// 401 or 403.
        status: u16,
        /// What to do: check the named environment variable, or configure one.
        fix: String,
    },
    /// The provider does not know the model.
    #[error(
        "provider `{provider}` does not know model `{model}`: {detail}. Check the model name (the part after `{provider}/`)"
    )]
    UnknownModel {
        /// The provider.
        provider: String,
        /// The model.
        model: String,
        /// The provider's words.
        detail: String,
    },
    /// The conversation is longer than the model's context window.
    #[error(
        "the conversation is too long for `{provider}/{model}`: {detail}. Use a model with a larger context window or give the actor less context"
    )]
    ContextTooLong {
        /// The provider.
        provider: String,
        /// The model.
        model: String,
        /// The provider's words.
        detail: String,
    },
    /// The URL does not exist on the server.
    #[error(
        "provider `{provider}` has no endpoint {url} (HTTP 404): check `providers.{provider}.base_url` ({hint})"
    )]
    NotFound {
        /// The provider.
        provider: String,
        /// The URL requested.
        url: String,
        /// What the base URL of this kind looks like.
        hint: String,
    },
    /// The request cannot be sent as it is (an option out of the provider's range, an empty
    /// prompt the provider would refuse); nothing was sent.
    #[error("the request to provider `{provider}` cannot be sent: {detail}")]
    Invalid {
        /// The provider.
        provider: String,
        /// What is wrong and how to fix it.
        detail: String,
    },
    /// The reply (or one event of its stream) is larger than this client accepts.
    #[error(
        "provider `{provider}` sent {what} larger than the {limit} bytes this client accepts; the reply was discarded"
    )]
    TooLarge {
        /// The provider.
        provider: String,
        /// `one stream event` or `a reply`.
        what: &'static str,
        /// The cap, in bytes.
        limit: usize,
    },
    /// Any other refusal (HTTP 4xx).
    #[error("provider `{provider}` refused the request (HTTP {status}): {detail}")]
    Rejected {
        /// The provider.
        provider: String,
        /// The status.
        status: u16,
        /// The provider's words.
        detail: String,
    },
    /// The response is not what the wire format allows.
    #[error(
        "provider `{provider}` sent a malformed response: {detail}. Check that `providers.{provider}.kind` ({kind}) matches the server's API"
    )]
    Malformed {
        /// The provider.
        provider: String,
        /// The configured kind.
        kind: &'static str,
        /// What is wrong.
        detail: String,
    },
    /// The provider configuration cannot be used (bad URL or header).
    #[error("provider `{provider}` is misconfigured: {detail}")]
    Config {
        /// The provider.
        provider: String,
        /// What is wrong.
        detail: String,
    },
    /// A transient failure that was not (or no longer) retried.
    #[error("provider `{provider}` failed after {attempts} attempt(s): {reason}")]
    Transient {
        /// The provider.
        provider: String,
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        reason: String,
    },
    /// The call was cancelled.
    #[error("the call to provider `{provider}` was cancelled")]
    Cancelled {
        /// The provider.
        provider: String,
    },
}

impl ProviderError {
    /// Whether the failure is transient (worth retrying later, e.g. after user approval).
    pub fn is_transient(&self) -> bool {
        matches!(self, ProviderError::Transient { .. })
    }

    /// Whether the call was abandoned at its call deadline while the provider worked on it
    /// (its usage is unknown, not zero).
    pub fn abandoned(&self) -> bool {
        matches!(self, ProviderError::Transient { reason, .. } if reason.starts_with(CALL_DEADLINE_PASSED))
    }

    /// A short stable kind for records and events: `auth`, `unknown_model`, `transient`, ...
    pub fn kind(&self) -> &'static str {
        match self {
            ProviderError::BadModelName { .. } => "bad_model_name",
            ProviderError::UnknownProvider { .. } => "unknown_provider",
            ProviderError::MissingKey { .. } => "missing_key",
            ProviderError::Auth { .. } => "auth",
            ProviderError::UnknownModel { .. } => "unknown_model",
            ProviderError::ContextTooLong { .. } => "context_too_long",
            ProviderError::NotFound { .. } => "not_found",
            ProviderError::Invalid { .. } => "invalid_request",
            ProviderError::TooLarge { .. } => "too_large",
            ProviderError::Rejected { .. } => "rejected",
            ProviderError::Malformed { .. } => "malformed",
            ProviderError::Config { .. } => "config",
            ProviderError::Transient { .. } => "transient",
            ProviderError::Cancelled { .. } => "cancelled",
        }
    }
}

/// A successful call.
#[derive(Debug, Clone)]
pub struct Completion {
    /// The assembled reply.
    pub response: ChatResponse,
    /// Attempts it took (1 when nothing was retried).
    pub attempts: u32,
    /// Wall time including retries.
    pub duration: Duration,
}

/// Why the body of a stream stopped, as the SSE parser sees it.
#[derive(Debug, thiserror::Error)]
enum BodyError {
    /// The connection failed.
    #[error("{0}")]
    Transport(reqwest::Error),
    /// More bytes than one event may have arrived without completing an event.
    #[error("an event larger than the cap")]
    EventTooLarge,
}

/// One attempt's failure, before the retry decision.
enum Failure {
    Transient {
        reason: String,
        retry_after: Option<Duration>,
    },
    Permanent(ProviderError),
}

/// A client for one provider and model.
#[derive(Debug, Clone)]
pub struct ProviderClient {
    provider: Provider,
    model: String,
    key: Option<ApiKey>,
    http: reqwest::Client,
    options: ClientOptions,
}

impl ProviderClient {
    /// Finds the provider of `model_ref` among `providers` and reads its key from the
    /// environment through `env` (called with the variable's name).
    ///
    /// # Errors
    /// [`ProviderError::UnknownProvider`], [`ProviderError::MissingKey`],
    /// [`ProviderError::Config`].
    pub fn connect(
        providers: &[Provider],
        model_ref: &ModelRef,
        env: impl Fn(&str) -> Option<String>,
        options: ClientOptions,
    ) -> Result<Self, ProviderError> {
        let provider = providers
            .iter()
            .find(|p| p.name == model_ref.provider)
            .ok_or_else(|| ProviderError::UnknownProvider {
                name: model_ref.provider.clone(),
                known: providers
                    .iter()
                    .map(|p| p.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        let key =
            match &provider.api_key_env {
                Some(var) => Some(env(var).and_then(ApiKey::new).ok_or_else(|| {
                    ProviderError::MissingKey {
                        provider: provider.name.clone(),
                        env: var.clone(),
                    }
                })?),
                None => None,
            };
        Self::new(provider.clone(), &model_ref.model, key, options)
    }

    /// A client for `provider` and `model` with an explicit key.
    ///
    /// # Errors
    /// [`ProviderError::Config`] when the HTTP client cannot be built.
    pub fn new(
        provider: Provider,
        model: &str,
        key: Option<ApiKey>,
        options: ClientOptions,
    ) -> Result<Self, ProviderError> {
        let read_timeout = options
            .read_timeout
            .unwrap_or(Duration::from_secs(provider.timeout_secs.max(1)));
        let http = reqwest::Client::builder()
            .connect_timeout(options.connect_timeout)
            .read_timeout(read_timeout)
            .user_agent(concat!("cleveragents/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ProviderError::Config {
                provider: provider.name.clone(),
                detail: e.to_string(),
            })?;
        Ok(Self {
            provider,
            model: model.to_string(),
            key,
            http,
            options,
        })
    }

    /// The provider's configuration.
    pub fn provider(&self) -> &Provider {
        &self.provider
    }

    /// The model name.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// `provider/model`.
    pub fn actor_name(&self) -> String {
        format!("{}/{}", self.provider.name, self.model)
    }

    /// Maximum attempts in total (at least 1).
    pub fn max_attempts(&self) -> u32 {
        match self.options.retry {
            RetryMode::Auto => self.provider.max_retries.max(1),
            RetryMode::Never => 1,
        }
    }

    fn scrub(&self, text: &str) -> String {
        match &self.key {
            Some(k) => k.scrub(text),
            None => text.to_string(),
        }
    }

    /// Sends `req` (with `req.model` replaced by this client's model), retrying transient
    /// failures, and reports text deltas and retries through `on_event`. Cancelling `cancel`
    /// abandons the call at once.
    ///
    /// # Errors
    /// Any [`ProviderError`]; [`ProviderError::Transient`] once attempts are exhausted, a
    /// `retry-after` exceeds [`RETRY_AFTER_CAP`], or retries are off.
    pub async fn complete(
        &self,
        req: &ChatRequest,
        cancel: &CancellationToken,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<Completion, ProviderError> {
        self.check(req)?;
        let deadline = self.call_deadline();
        let attempts = AtomicU32::new(0);
        match tokio::time::timeout(
            deadline,
            self.complete_within(req, cancel, on_event, &attempts),
        )
        .await
        {
            Ok(result) => result,
            Err(_) => {
                let e = ProviderError::Transient {
                    provider: self.provider.name.clone(),
                    attempts: attempts.load(Ordering::Relaxed).max(1),
                    reason: format!(
                        "{CALL_DEADLINE_PASSED} of {} s (`providers.{}.call_deadline_secs`)",
                        deadline.as_secs_f64(),
                        self.provider.name
                    ),
                };
                tracing::warn!(provider = %self.provider.name, model = %self.model, error = %e, "model call failed");
                Err(e)
            }
        }
    }

    /// The provider's rate limiter, shared by every client of it in this process; `None`
    /// when it sets no rate limit.
    fn rate_limiter(&self) -> Option<std::sync::Arc<budget::RateLimiter>> {
        let p = &self.provider;
        if p.requests_per_minute.is_none() && p.tokens_per_minute.is_none() {
            return None;
        }
        Some(budget::RateLimiter::shared(
            &format!("{} {}", p.name, p.base_url),
            p.requests_per_minute,
            p.tokens_per_minute,
            self.options.rate_window,
        ))
    }

    /// The deadline of one call, retries included.
    pub fn call_deadline(&self) -> Duration {
        self.options
            .call_deadline
            .unwrap_or(Duration::from_secs(self.provider.call_deadline_secs.max(1)))
    }

    /// Checks what the provider would refuse, before anything is sent.
    fn check(&self, req: &ChatRequest) -> Result<(), ProviderError> {
        let invalid = |detail: String| ProviderError::Invalid {
            provider: self.provider.name.clone(),
            detail,
        };
        let max_temperature = match self.provider.kind {
            ProviderKind::Openai => 2.0,
            ProviderKind::Anthropic => 1.0,
        };
        if let Some(t) = req.sampling.temperature
            && !(0.0..=max_temperature).contains(&t)
        {
            return Err(invalid(format!(
                "temperature {t} is outside 0 to {max_temperature}, the range of `{}` providers; set a temperature in that range",
                self.provider.kind.as_str()
            )));
        }
        if let Some(p) = req.sampling.top_p
            && !(0.0..=1.0).contains(&p)
        {
            return Err(invalid(format!(
                "top-p {p} is outside 0 to 1; set `options.top-p` in that range"
            )));
        }
        let has_content = req.messages.iter().any(|m| match m {
            Message::User { text } => !text.trim().is_empty(),
            Message::Assistant { .. } | Message::ToolResults { .. } => true,
        });
        if self.provider.kind == ProviderKind::Anthropic && !has_content {
            return Err(invalid(
                "the prompt is empty and Anthropic refuses a conversation without content; give the actor a prompt".into(),
            ));
        }
        if self.provider.kind == ProviderKind::Anthropic && req.sampling.seed.is_some() {
            tracing::warn!(provider = %self.provider.name, "Anthropic has no sampling seed; `seed` is not sent");
        }
        Ok(())
    }

    async fn complete_within(
        &self,
        req: &ChatRequest,
        cancel: &CancellationToken,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
        attempts: &AtomicU32,
    ) -> Result<Completion, ProviderError> {
        let started = Instant::now();
        let mut req = req.clone();
        req.model.clone_from(&self.model);
        let max_attempts = self.max_attempts();
        let mut backoff = ExponentialBuilder::default()
            .with_min_delay(self.options.base_delay)
            .with_max_delay(MAX_BACKOFF_DELAY)
            .with_jitter()
            .without_max_times()
            .build();
        let cancelled = || ProviderError::Cancelled {
            provider: self.provider.name.clone(),
        };
        let mut attempt = 0;
        let limiter = self.rate_limiter();
        let estimate = budget::estimate_tokens(self.request_body(&req).to_string().len())
            + u64::from(req.max_tokens.unwrap_or(0));
        loop {
            attempt += 1;
            attempts.store(attempt, Ordering::Relaxed);
            if let Some(l) = &limiter {
                tokio::select! {
                    () = cancel.cancelled() => return Err(cancelled()),
                    () = l.acquire(estimate) => {}
                }
            }
            let result = tokio::select! {
                () = cancel.cancelled() => return Err(cancelled()),
                r = self.attempt(&req, on_event) => r,
            };
            let (reason, retry_after) = match result {
                Ok(response) => {
                    if let Some(l) = &limiter
                        && response.usage_reported
                    {
                        l.settle(estimate, response.usage.total());
                    }
                    tracing::info!(
                        provider = %self.provider.name,
                        model = %self.model,
                        attempts = attempt,
                        input_tokens = response.usage.input_tokens,
                        output_tokens = response.usage.output_tokens,
                        tool_calls = response.tool_calls.len(),
                        "model call finished"
                    );
                    return Ok(Completion {
                        response,
                        attempts: attempt,
                        duration: started.elapsed(),
                    });
                }
                Err(Failure::Permanent(e)) => {
                    tracing::warn!(provider = %self.provider.name, model = %self.model, kind = e.kind(), error = %e, "model call failed");
                    return Err(e);
                }
                Err(Failure::Transient {
                    reason,
                    retry_after,
                }) => (self.scrub(&reason), retry_after),
            };
            let give_up = |reason: String| {
                let e = ProviderError::Transient {
                    provider: self.provider.name.clone(),
                    attempts: attempt,
                    reason,
                };
                tracing::warn!(provider = %self.provider.name, model = %self.model, error = %e, "model call failed");
                e
            };
            if attempt >= max_attempts {
                return Err(give_up(reason));
            }
            let delay = match retry_after {
                Some(d) if d > RETRY_AFTER_CAP => {
                    return Err(give_up(format!(
                        "{reason}; the provider asked to wait {} s, more than the {} s this client waits",
                        d.as_secs(),
                        RETRY_AFTER_CAP.as_secs()
                    )));
                }
                Some(d) => d,
                None => backoff.next().unwrap_or(MAX_BACKOFF_DELAY),
            };
            tracing::info!(provider = %self.provider.name, model = %self.model, attempt, delay_ms = delay.as_millis() as u64, %reason, "transient provider failure; retrying");
            on_event(StreamEvent::Retrying {
                attempt,
                delay,
                reason,
            });
            tokio::select! {
                () = cancel.cancelled() => return Err(cancelled()),
                () = tokio::time::sleep(delay) => {}
            }
        }
    }

    fn endpoint(&self) -> String {
        match self.provider.kind {
            ProviderKind::Openai => openai::endpoint(&self.provider.base_url),
            ProviderKind::Anthropic => anthropic::endpoint(&self.provider.base_url),
        }
    }

    fn headers(&self) -> Result<HeaderMap, ProviderError> {
        let bad = |detail: String| ProviderError::Config {
            provider: self.provider.name.clone(),
            detail,
        };
        let mut h = HeaderMap::new();
        for (name, value) in &self.provider.headers {
            let n = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| bad(format!("`headers.{name}` is not a valid header name")))?;
            let v = HeaderValue::from_str(value).map_err(|_| {
                bad(format!(
                    "the value of `headers.{name}` is not a valid header value"
                ))
            })?;
            h.insert(n, v);
        }
        if let Some(key) = &self.key {
            let (name, value) = match self.provider.kind {
                ProviderKind::Openai => ("authorization", format!("Bearer {}", key.expose())),
                ProviderKind::Anthropic => ("x-api-key", key.expose().to_string()),
            };
            let mut v = HeaderValue::from_str(&value).map_err(|_| {
                bad("the API key contains characters not allowed in an HTTP header".into())
            })?;
            v.set_sensitive(true);
            h.insert(name, v);
        }
        if self.provider.kind == ProviderKind::Anthropic {
            h.insert(
                "anthropic-version",
                HeaderValue::from_static(anthropic::API_VERSION),
            );
        }
        Ok(h)
    }

    fn describe(&self, e: &reqwest::Error) -> String {
        use std::error::Error as _;
        let mut text = if e.is_timeout() {
            "no response in time (timed out)".to_string()
        } else if e.is_connect() {
            format!("cannot connect to {}", self.provider.base_url)
        } else if e.is_body() || e.is_decode() {
            "the connection broke while the response was being received".to_string()
        } else {
            "the connection failed".to_string()
        };
        let mut source = e.source();
        while let Some(s) = source {
            text.push_str(": ");
            text.push_str(&s.to_string());
            source = s.source();
        }
        self.scrub(&text)
    }

    fn malformed(&self, detail: String) -> Failure {
        Failure::Permanent(ProviderError::Malformed {
            provider: self.provider.name.clone(),
            kind: self.provider.kind.as_str(),
            detail: self.scrub(&detail),
        })
    }

    /// The JSON body `req` is sent as.
    /// Both wires carry a completion cap: the actor's `max_tokens`, else the default (8192,
    /// lowered to the model's limit), so that no call generates until its deadline.
    pub fn request_body(&self, req: &ChatRequest) -> Value {
        let default_max = anthropic::default_max_tokens(
            &self.model,
            self.provider
                .models
                .get(&self.model)
                .and_then(|m| m.max_output_tokens),
        );
        match self.provider.kind {
            ProviderKind::Openai => {
                openai::request_body(req, self.provider.max_tokens_field(), default_max)
            }
            ProviderKind::Anthropic => anthropic::request_body(req, default_max),
        }
    }

    fn too_large(&self, what: &'static str, limit: usize) -> Failure {
        Failure::Permanent(ProviderError::TooLarge {
            provider: self.provider.name.clone(),
            what,
            limit,
        })
    }

    /// Reads a whole (non-streamed) body, failing once it passes the reply cap.
    async fn read_body(&self, mut resp: reqwest::Response) -> Result<Vec<u8>, Failure> {
        let limit = self.options.max_answer_bytes;
        let mut bytes = Vec::new();
        loop {
            match resp.chunk().await {
                Ok(Some(chunk)) => {
                    if bytes.len() + chunk.len() > limit {
                        return Err(self.too_large("a reply", limit));
                    }
                    bytes.extend_from_slice(&chunk);
                }
                Ok(None) => return Ok(bytes),
                Err(e) => {
                    return Err(Failure::Transient {
                        reason: self.describe(&e),
                        retry_after: None,
                    });
                }
            }
        }
    }

    /// POSTs `body` as JSON to `url` with the provider's headers: the response of a 2xx
    /// status; a connection error is transient, any other status is classified by
    /// [`Self::http_failure`].
    async fn post_json(&self, url: &str, body: &Value) -> Result<reqwest::Response, Failure> {
        let headers = self.headers().map_err(Failure::Permanent)?;
        let resp = self
            .http
            .post(url)
            .headers(headers)
            .json(body)
            .send()
            .await
            .map_err(|e| Failure::Transient {
                reason: self.describe(&e),
                retry_after: None,
            })?;
        let status = resp.status();
        if !status.is_success() {
            let retry_after = wire::retry_after(resp.headers());
            let text = resp.text().await.unwrap_or_default();
            return Err(self.http_failure(status, &text, url, retry_after));
        }
        Ok(resp)
    }

    async fn attempt(
        &self,
        req: &ChatRequest,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<ChatResponse, Failure> {
        let body = self.request_body(req);
        let resp = self.post_json(&self.endpoint(), &body).await?;
        let is_sse = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if req.stream && is_sse {
            return self.read_stream(resp, on_event).await;
        }
        let bytes = self.read_body(resp).await?;
        let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
            self.malformed(format!(
                "the body is not JSON ({e}); it starts with {:?}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(80)])
            ))
        })?;
        if let Some(err) = value.get("error").filter(|e| !e.is_null()) {
            return Err(self.stream_error(err));
        }
        let parsed = match self.provider.kind {
            ProviderKind::Openai => openai::parse_response(&value),
            ProviderKind::Anthropic => anthropic::parse_response(&value),
        };
        let response = parsed.map_err(|d| self.malformed(d))?;
        if !response.text.is_empty() {
            on_event(StreamEvent::TextDelta(response.text.clone()));
        }
        Ok(response)
    }

    async fn read_stream(
        &self,
        resp: reqwest::Response,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<ChatResponse, Failure> {
        // Bytes received since the last complete event: the parser buffers at most one
        // event's worth, so failing the body once this passes the cap bounds its memory.
        let pending = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&pending);
        let event_cap = self.options.max_event_bytes;
        let answer_cap = self.options.max_answer_bytes;
        let bytes = resp
            .bytes_stream()
            .map_err(BodyError::Transport)
            .and_then(move |chunk| {
                let seen = counter.fetch_add(chunk.len(), Ordering::Relaxed) + chunk.len();
                std::future::ready(if seen > event_cap {
                    Err(BodyError::EventTooLarge)
                } else {
                    Ok(chunk)
                })
            });
        let mut events = sse_stream::SseStream::from_bytes_stream(bytes);
        let mut oa = openai::StreamAssembler::default();
        let mut an = anthropic::StreamAssembler::default();
        while let Some(event) = events.next().await {
            pending.store(0, Ordering::Relaxed);
            let event = event.map_err(|e| self.stream_failure(e))?;
            let data = event.data.unwrap_or_default();
            if data.len() > event_cap {
                return Err(self.too_large("one stream event", event_cap));
            }
            let (step, assembled) = match self.provider.kind {
                ProviderKind::Openai => (oa.feed(&data), oa.assembled_bytes()),
                ProviderKind::Anthropic => (
                    an.feed(event.event.as_deref().unwrap_or("message"), &data),
                    an.assembled_bytes(),
                ),
            };
            if assembled > answer_cap {
                return Err(self.too_large("a reply", answer_cap));
            }
            match step {
                Ok(StreamStep::Text(t)) => on_event(StreamEvent::TextDelta(t)),
                Ok(StreamStep::Nothing) => {}
                Ok(StreamStep::Done) => break,
                Err(StreamFailure::Malformed(d)) => return Err(self.malformed(d)),
                Err(StreamFailure::Provider(err)) => return Err(self.stream_error(&err)),
            }
        }
        let finished = match self.provider.kind {
            ProviderKind::Openai => oa.finish(),
            ProviderKind::Anthropic => an.finish(),
        };
        finished.ok_or_else(|| Failure::Transient {
            reason: "the stream ended before the reply was complete".into(),
            retry_after: None,
        })
    }

    /// What a failed stream read means: a cut connection (transient), an event over the cap
    /// (permanent), or bytes that are not SSE (malformed).
    fn stream_failure(&self, e: sse_stream::Error) -> Failure {
        match e {
            sse_stream::Error::Body(t) => match t.downcast_ref::<BodyError>() {
                Some(BodyError::EventTooLarge) => {
                    self.too_large("one stream event", self.options.max_event_bytes)
                }
                Some(BodyError::Transport(r)) => Failure::Transient {
                    reason: format!("the stream was interrupted: {}", self.describe(r)),
                    retry_after: None,
                },
                None => Failure::Transient {
                    reason: format!("the stream was interrupted: {}", self.scrub(&t.to_string())),
                    retry_after: None,
                },
            },
            other => self.malformed(format!("the event stream is not valid SSE ({other})")),
        }
    }

    /// An error object the provider sent with a success status or inside a stream.
    fn stream_error(&self, err: &Value) -> Failure {
        let (code, message) = wire::error_detail(&serde_json::json!({"error": err}).to_string());
        let message = self.scrub(&message);
        if wire::stream_error_is_transient(&code) {
            Failure::Transient {
                reason: format!("the provider reported `{code}`: {message}"),
                retry_after: None,
            }
        } else {
            self.classified(StatusClass::Rejected, 200, &code, message, "")
        }
    }

    fn http_failure(
        &self,
        status: reqwest::StatusCode,
        body: &str,
        url: &str,
        retry_after: Option<Duration>,
    ) -> Failure {
        let (code, message) = wire::error_detail(body);
        let message = self.scrub(&message);
        let class = wire::classify(status.as_u16(), &code, &message);
        if class == StatusClass::Transient {
            let mut reason = format!("HTTP {status}");
            if !message.is_empty() {
                reason.push_str(&format!(" ({message})"));
            }
            return Failure::Transient {
                reason,
                retry_after,
            };
        }
        self.classified(class, status.as_u16(), &code, message, url)
    }

    /// What to check in the base URL after a 404, by wire kind.
    fn not_found_hint(&self) -> String {
        let url = self.provider.base_url.trim_end_matches('/');
        match self.provider.kind {
            ProviderKind::Anthropic if url.ends_with("/v1") => format!(
                "remove the trailing /v1: the client adds /v1/messages itself, so use {}",
                url.trim_end_matches("/v1")
            ),
            ProviderKind::Anthropic => {
                "Anthropic-compatible base URLs end before /v1, e.g. https://api.anthropic.com; the client adds /v1/messages".into()
            }
            ProviderKind::Openai => {
                "OpenAI-compatible servers usually end in /v1; the client adds /chat/completions".into()
            }
        }
    }

    fn classified(
        &self,
        class: StatusClass,
        status: u16,
        code: &str,
        message: String,
        url: &str,
    ) -> Failure {
        let provider = self.provider.name.clone();
        let detail = if message.is_empty() {
            code.to_string()
        } else {
            message
        };
        Failure::Permanent(match class {
            StatusClass::Auth => ProviderError::Auth {
                status,
                fix: match &self.provider.api_key_env {
                    Some(env) => format!("check the key in the environment variable {env}"),
                    None => format!(
                        "the server wants a key; set `providers.{provider}.api_key_env` to the name of the environment variable holding it"
                    ),
                },
                provider,
            },
            StatusClass::UnknownModel => ProviderError::UnknownModel {
                provider,
                model: self.model.clone(),
                detail,
            },
            StatusClass::ContextTooLong => ProviderError::ContextTooLong {
                provider,
                model: self.model.clone(),
                detail,
            },
            StatusClass::NotFound => ProviderError::NotFound {
                hint: self.not_found_hint(),
                provider,
                url: url.to_string(),
            },
            StatusClass::Rejected | StatusClass::Transient => ProviderError::Rejected {
                provider,
                status,
                detail,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names_split_at_the_first_slash() {
        let m = ModelRef::parse("vllm/meta-llama/Llama-3").unwrap();
        assert_eq!(
            (m.provider.as_str(), m.model.as_str()),
            ("vllm", "meta-llama/Llama-3")
        );
        assert!(ModelRef::parse("gpt-4").is_err());
        assert!(ModelRef::parse("openai/").is_err());
    }

    #[test]
    fn a_missing_key_names_the_variable_and_an_unknown_provider_lists_the_known() {
        let providers = crate::config::Config::default().providers();
        let err = ProviderClient::connect(
            &providers,
            &ModelRef::parse("openai/gpt-4.1").unwrap(),
            |_| None,
            ClientOptions::default(),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "provider `openai` needs an API key: set the environment variable OPENAI_API_KEY"
        );
        let err = ProviderClient::connect(
            &providers,
            &ModelRef::parse("olama/llama3").unwrap(),
            |_| None,
            ClientOptions::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("anthropic, openai"), "{err}");
    }

    #[test]
    fn the_client_never_debug_prints_the_key() {
        let providers = crate::config::Config::default().providers();
        let client = ProviderClient::connect(
            &providers,
            &ModelRef::parse("anthropic/claude").unwrap(),
            |_| Some("sk-ant-VERYSECRET-123456".into()),
            ClientOptions::default(),
        )
        .unwrap();
        let shown = format!("{client:?}");
        assert!(!shown.contains("VERYSECRET"), "{shown}");
        let headers = format!("{:?}", client.headers().unwrap());
        assert!(!headers.contains("VERYSECRET"), "{headers}");
    }
}
