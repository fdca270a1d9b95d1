//! Embeddings through a provider's OpenAI-compatible `POST {base_url}/embeddings` endpoint
//! (spec section 24 "search_code_semantically"), with the same client as model calls: its
//! timeouts, key header, retries with backoff for transient failures, call deadline and
//! key scrubbing.
//!
//! Request: `{"model": MODEL, "input": [TEXT, ...]}`. Reply: `{"data": [{"index": N,
//! "embedding": [F32, ...]}, ...]}`, one entry per input (in any order; `index` places it).

use std::sync::atomic::{AtomicU32, Ordering};

use backon::{BackoffBuilder, ExponentialBuilder};
use serde_json::{Value, json};

use super::{Failure, MAX_BACKOFF_DELAY, ProviderClient, ProviderError, RETRY_AFTER_CAP};
use crate::config::ProviderKind;

/// The embeddings endpoint of an OpenAI-compatible base URL.
pub fn endpoint(base_url: &str) -> String {
    format!("{}/embeddings", base_url.trim_end_matches('/'))
}

/// The vectors of a reply, in input order; `Err` says what is malformed.
///
/// # Errors
/// A missing `data` array, an entry without a numeric `embedding`, a count that differs from
/// `inputs`, or vectors of different lengths.
pub fn parse_reply(value: &Value, inputs: usize) -> Result<Vec<Vec<f32>>, String> {
    let data = value["data"]
        .as_array()
        .ok_or("the reply has no `data` array")?;
    if data.len() != inputs {
        return Err(format!(
            "the reply has {} embeddings for {inputs} inputs",
            data.len()
        ));
    }
    let mut out: Vec<Option<Vec<f32>>> = vec![None; inputs];
    for (i, item) in data.iter().enumerate() {
        let at = item["index"].as_u64().map_or(i, |n| n as usize);
        let vector = item["embedding"]
            .as_array()
            .ok_or_else(|| format!("`data[{i}].embedding` is not an array of numbers"))?
            .iter()
            .map(|x| x.as_f64().map(|f| f as f32))
            .collect::<Option<Vec<f32>>>()
            .ok_or_else(|| format!("`data[{i}].embedding` holds a value that is not a number"))?;
        let slot = out
            .get_mut(at)
            .ok_or_else(|| format!("`data[{i}].index` is {at}, past the {inputs} inputs"))?;
        *slot = Some(vector);
    }
    let vectors: Vec<Vec<f32>> = out
        .into_iter()
        .enumerate()
        .map(|(i, v)| v.ok_or_else(|| format!("no embedding for input {i}")))
        .collect::<Result<_, _>>()?;
    if let Some(first) = vectors.first()
        && (first.is_empty() || vectors.iter().any(|v| v.len() != first.len()))
    {
        return Err("the embeddings are empty or of different lengths".into());
    }
    Ok(vectors)
}

impl ProviderClient {
    /// Embeds `inputs` with this client's model, one request, retrying transient failures
    /// like [`ProviderClient::complete`] does, within the call deadline.
    ///
    /// # Errors
    /// [`ProviderError::Config`] for an Anthropic provider (no embeddings endpoint); any other
    /// [`ProviderError`] as for completions.
    pub async fn embed(&self, inputs: &[String]) -> Result<Vec<Vec<f32>>, ProviderError> {
        if self.provider.kind != ProviderKind::Openai {
            return Err(ProviderError::Config {
                provider: self.provider.name.clone(),
                detail: "it is an Anthropic provider, which has no embeddings endpoint; name an OpenAI-compatible provider (`kind = \"openai\"`) in `[index] embeddings`".into(),
            });
        }
        if inputs.is_empty() {
            return Ok(Vec::new());
        }
        let deadline = self.call_deadline();
        let attempts = AtomicU32::new(0);
        match tokio::time::timeout(deadline, self.embed_within(inputs, &attempts)).await {
            Ok(r) => r,
            Err(_) => Err(ProviderError::Transient {
                provider: self.provider.name.clone(),
                attempts: attempts.load(Ordering::Relaxed).max(1),
                reason: format!(
                    "no embeddings within the call deadline of {} s (`providers.{}.call_deadline_secs`)",
                    deadline.as_secs_f64(),
                    self.provider.name
                ),
            }),
        }
    }

    async fn embed_within(
        &self,
        inputs: &[String],
        attempts: &AtomicU32,
    ) -> Result<Vec<Vec<f32>>, ProviderError> {
        let mut backoff = ExponentialBuilder::default()
            .with_min_delay(self.options.base_delay)
            .with_max_delay(MAX_BACKOFF_DELAY)
            .with_jitter()
            .without_max_times()
            .build();
        let max_attempts = self.max_attempts();
        let mut attempt = 0;
        loop {
            attempt += 1;
            attempts.store(attempt, Ordering::Relaxed);
            let (reason, retry_after) = match self.embed_attempt(inputs).await {
                Ok(v) => return Ok(v),
                Err(Failure::Permanent(e)) => return Err(e),
                Err(Failure::Transient {
                    reason,
                    retry_after,
                }) => (self.scrub(&reason), retry_after),
            };
            let give_up = |reason: String| ProviderError::Transient {
                provider: self.provider.name.clone(),
                attempts: attempt,
                reason,
            };
            if attempt >= max_attempts {
                return Err(give_up(reason));
            }
            let delay = match retry_after {
                Some(d) if d > RETRY_AFTER_CAP => return Err(give_up(reason)),
                Some(d) => d,
                None => backoff.next().unwrap_or(MAX_BACKOFF_DELAY),
            };
            tracing::info!(provider = %self.provider.name, model = %self.model, attempt, %reason, "transient embeddings failure; retrying");
            tokio::time::sleep(delay).await;
        }
    }

    async fn embed_attempt(&self, inputs: &[String]) -> Result<Vec<Vec<f32>>, Failure> {
        let url = endpoint(&self.provider.base_url);
        let body = json!({"model": self.model, "input": inputs});
        let resp = self.post_json(&url, &body).await?;
        let bytes = self.read_body(resp).await?;
        let value: Value = serde_json::from_slice(&bytes)
            .map_err(|e| self.malformed(format!("the embeddings reply is not JSON ({e})")))?;
        if let Some(err) = value.get("error").filter(|e| !e.is_null()) {
            return Err(self.stream_error(err));
        }
        parse_reply(&value, inputs.len()).map_err(|d| self.malformed(d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_put_in_input_order_and_bad_ones_are_named() {
        let v = json!({"data": [
            {"index": 1, "embedding": [0.0, 1.0]},
            {"index": 0, "embedding": [1.0, 0.0]},
        ]});
        assert_eq!(
            parse_reply(&v, 2).unwrap(),
            vec![vec![1.0, 0.0], vec![0.0, 1.0]]
        );
        assert!(
            parse_reply(&v, 3)
                .unwrap_err()
                .contains("2 embeddings for 3")
        );
        let ragged = json!({"data": [{"embedding": [1.0]}, {"embedding": [1.0, 2.0]}]});
        assert!(parse_reply(&ragged, 2).unwrap_err().contains("lengths"));
        assert!(parse_reply(&json!({}), 1).is_err());
    }
}
