//! Requests the providers' wire tests share.

use crate::domain::messages::{Message, ToolCall, ToolResult};
use crate::providers::ChatRequest;

/// A turn in which `shot` returned a PNG and `plain` returned text only.
pub(crate) fn image_turn() -> ChatRequest {
    let result = |id: &str, images: Vec<crate::domain::messages::ToolImage>| ToolResult {
        call_id: id.into(),
        content: format!("output of {id}"),
        is_error: false,
        images,
    };
    let call = |id: &str, name: &str| ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: "{}".into(),
    };
    ChatRequest {
        model: "m".into(),
        messages: vec![
            Message::User { text: "look".into() },
            Message::Assistant {
                text: String::new(),
                tool_calls: vec![call("c1", "srv.shot"), call("c2", "plain")],
            },
            Message::ToolResults {
                results: vec![
                    result(
                        "c1",
                        vec![crate::domain::messages::ToolImage {
                            mime_type: "image/png".into(),
                            data: "iVBORw0KGgo=".into(),
                        }],
                    ),
                    result("c2", Vec::new()),
                ],
            },
        ],
        ..ChatRequest::default()
    }
}
