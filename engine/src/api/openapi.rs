//! The protocol published (spec section 21, "Server"): an OpenAPI 3.1 document generated from
//! the protocol's own types, served by `agents server` at `/v1/openapi.json`. Its schemas are
//! the JSON Schema (2020-12) of [`Request`], [`Response`], [`ErrorEnvelope`] and
//! [`EngineEvent`] as serde reads them, so the document cannot drift from the code.

use schemars::generate::SchemaSettings;
use serde_json::{Value, json};

use super::protocol::{ErrorEnvelope, Request, Response, VERSION};
use crate::domain::event::EngineEvent;

/// The OpenAPI 3.1 document of protocol [`VERSION`].
pub fn document() -> Value {
    let mut settings = SchemaSettings::draft2020_12();
    settings.definitions_path = "/components/schemas".into();
    let mut generator = settings.into_generator();
    let request = generator.subschema_for::<Request>();
    let response = generator.subschema_for::<Response>();
    let error = generator.subschema_for::<ErrorEnvelope>();
    let event = generator.subschema_for::<EngineEvent>();
    let schemas = generator.take_definitions(true);
    let failure = |what: &str| json!({"description": what, "content": {"application/json": {"schema": error}}});
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "CleverAgents engine protocol",
            "version": VERSION,
            "description": "Every call is one POST of a Request to /v1/call, answered by a Response \
                or an ErrorEnvelope. Events stream as Server-Sent Events (id: seq, data: an \
                EngineEvent; a final `end` event when the plan is final). Every path but the \
                health checks needs `Authorization: Bearer TOKEN` (agents server token create).",
        },
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "components": {
            "schemas": schemas,
            "securitySchemes": {"token": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"token": []}],
        "paths": {
            format!("/{VERSION}/call"): {"post": {
                "summary": "Answer one call of the protocol",
                "operationId": "call",
                "requestBody": {"required": true, "content": {"application/json": {"schema": request}}},
                "responses": {
                    "200": {"description": "The call's view", "content": {"application/json": {"schema": response}}},
                    "400": failure("A malformed request or a bad argument"),
                    "401": failure("No token, or a wrong or revoked one"),
                    "404": failure("An unknown plan, approval or name"),
                    "409": failure("A conflicting state (another process drives the plan, ...)"),
                    "501": failure("A call this server does not answer yet"),
                },
            }},
            format!("/{VERSION}/events"): {"get": {
                "summary": "Follow the event log as Server-Sent Events",
                "operationId": "events",
                "parameters": [
                    {"name": "plan", "in": "query", "required": false, "schema": {"type": "string"},
                     "description": "Only this plan's events (id or unique prefix)"},
                    {"name": "after", "in": "query", "required": false, "schema": {"type": "integer", "minimum": 0},
                     "description": "Events with a larger seq than this (Last-Event-ID wins when given)"},
                ],
                "responses": {
                    "200": {"description": "One `message` per event (id: seq) and `end` when the plan is final",
                            "content": {"text/event-stream": {"itemSchema": event}}},
                    "401": failure("No token, or a wrong or revoked one"),
                },
            }},
            format!("/{VERSION}/openapi.json"): {"get": {
                "summary": "This document (needs no token)",
                "operationId": "openapi",
                "security": [],
                "responses": {"200": {"description": "OpenAPI 3.1", "content": {"application/json": {}}}},
            }},
            "/healthz": {"get": {"summary": "Liveness", "security": [], "responses": {"200": {"description": "ok"}}}},
            "/readyz": {"get": {"summary": "Readiness: the database answers", "security": [], "responses": {"200": {"description": "ready"}, "503": {"description": "not ready"}}}},
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `$ref` of the document points at a schema the document holds.
    #[test]
    fn every_reference_resolves_to_a_published_schema() {
        let doc = document();
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        fn refs(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Object(o) => {
                    if let Some(Value::String(r)) = o.get("$ref") {
                        out.push(r.clone());
                    }
                    o.values().for_each(|x| refs(x, out));
                }
                Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
                _ => {}
            }
        }
        let mut all = Vec::new();
        refs(&doc, &mut all);
        assert!(all.len() > 20, "{} references", all.len());
        for r in all {
            let name = r
                .strip_prefix("#/components/schemas/")
                .unwrap_or_else(|| panic!("{r} is not a component reference"));
            assert!(schemas.contains_key(name), "{r} is not published");
        }
    }

    /// The request schema names every call the protocol has.
    #[test]
    fn the_request_schema_names_every_call() {
        let text = document().to_string();
        for call in [
            "hello",
            "plan_status",
            "events",
            "run",
            "change",
            "plan_view",
        ] {
            assert!(text.contains(&format!("\"{call}\"")), "{call} missing");
        }
    }
}
