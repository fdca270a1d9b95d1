//! How one Execute step ended, whichever executor ran it (the script executor, a model
//! execution actor, a spawn step), and the question a paused model run waits on.

use serde_json::Value;

use crate::actors::messages::Message;

/// How one step ended.
#[derive(Debug, Clone, PartialEq)]
pub enum StepEnd {
    /// It did what it says.
    Done {
        /// A short record of what it produced (command output, tool result).
        output: Value,
    },
    /// It failed; the message says why.
    Failed {
        /// Error code (`STEP_FAILED`, `NOT_SUPPORTED`).
        code: String,
        /// What failed.
        message: String,
        /// What it produced.
        output: Value,
    },
    /// The plan was cancelled or interrupted while it ran.
    Stopped,
    /// A model execution actor asked the user a question (`request_decision`); its run is
    /// paused until the answer.
    Paused(Box<Question>),
    /// A human must approve first (`child_spawn`); the step runs again once answered.
    Awaiting {
        /// The pending approvals.
        approvals: Vec<crate::domain::approval::Approval>,
    },
}

/// A question the execution actor asked with `request_decision`, and the paused run.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    /// The question.
    pub question: String,
    /// The options (two or more).
    pub options: Vec<String>,
    /// The option the actor would choose, if it said.
    pub recommended: Option<String>,
    /// What the user needs to know to decide.
    pub context: Option<String>,
    /// The provider's id of the `request_decision` call.
    pub call_id: String,
    /// The conversation so far, ending with the call's placeholder result.
    pub transcript: Vec<Message>,
    /// Set when the pause is for a tool call's approval (a `tool_approval`) rather than a
    /// question.
    pub tool: Option<ToolAsk>,
}

/// A tool call waiting for a human's approval.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolAsk {
    /// The tool's real name (`local/deploy`, `everything.echo`).
    pub tool: String,
    /// The name the model called it by (the provider-safe form).
    pub called_as: String,
    /// The arguments, as the model sent them.
    pub arguments: Value,
    /// Why it needs approval.
    pub reason: String,
}
