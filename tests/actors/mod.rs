//! Actors against the scripted provider server: both wire formats, streaming and not, real
//! file tools in temp directories.

mod accounting;
mod bounded;
mod caching;
mod cli;
mod edits;
mod failures;
mod fidelity;
mod tool_outcomes;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cleveragents_engine::actors::providers::{ClientOptions, ProviderClient, RetryMode};
use cleveragents_engine::actors::runtime::ActorEvent;
use cleveragents_engine::actors::secret::ApiKey;
use cleveragents_engine::config::{Provider, ProviderKind};

use crate::support::provider_server::ProviderServer;

/// The fake key the tests send; it must never show up anywhere.
pub const KEY: &str = "sk-scripted-TOPSECRET-4f9a8b7c6d5e";

/// The four ways of talking to a model.
pub const MODES: [(ProviderKind, bool); 4] = [
    (ProviderKind::Openai, false),
    (ProviderKind::Openai, true),
    (ProviderKind::Anthropic, false),
    (ProviderKind::Anthropic, true),
];

/// A provider of `kind` pointing at `server`.
pub fn provider(server: &ProviderServer, kind: ProviderKind) -> Provider {
    let base_url = match kind {
        ProviderKind::Openai => server.openai_base(),
        ProviderKind::Anthropic => server.anthropic_base(),
    };
    Provider {
        api_key_env: Some("SCRIPTED_API_KEY".into()),
        timeout_secs: 10,
        max_retries: 3,
        ..Provider::new("scripted", kind, &base_url)
    }
}

/// Options with short retry waits.
pub fn fast() -> ClientOptions {
    ClientOptions {
        base_delay: Duration::from_millis(20),
        read_timeout: Some(Duration::from_secs(5)),
        retry: RetryMode::Auto,
        ..ClientOptions::default()
    }
}

/// A client for model `m` of `provider` with [`KEY`].
pub fn client(provider: Provider, options: ClientOptions) -> ProviderClient {
    ProviderClient::new(provider, "m", ApiKey::new(KEY), options).unwrap()
}

/// Collects events.
#[derive(Clone, Default)]
pub struct Events(Arc<Mutex<Vec<ActorEvent>>>);

impl Events {
    /// A sink for `run_actor`.
    pub fn sink(&self) -> impl Fn(ActorEvent) + Send + Sync + use<> {
        let inner = self.0.clone();
        move |e| inner.lock().unwrap().push(e)
    }

    /// Everything so far.
    pub fn all(&self) -> Vec<ActorEvent> {
        self.0.lock().unwrap().clone()
    }

    /// The text deltas of `turn`, joined.
    pub fn text_of(&self, turn: u32) -> String {
        self.all()
            .into_iter()
            .filter_map(|e| match e {
                ActorEvent::TextDelta { turn: t, text } if t == turn => Some(text),
                _ => None,
            })
            .collect()
    }
}

/// A multi-thread runtime for one test.
pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}
