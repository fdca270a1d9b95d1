//! The structured result of a command and the view elements the human formats draw.

use serde::Serialize;

/// Process exit codes (documented in `docs/concepts.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Exit {
    /// 0: the requested work finished.
    Ok,
    /// 1: any failure.
    Failure,
    /// 2: the command line could not be parsed.
    Usage,
    /// 3: stopped because a human must answer (an approval or a confirmation).
    NeedsHuman,
    /// 4: refused: the caller's role or an organization's policy does not allow it.
    Denied,
    /// 130: interrupted (Ctrl-C).
    Interrupted,
}

impl Exit {
    /// The numeric exit code.
    pub fn code(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::Failure => 1,
            Exit::Usage => 2,
            Exit::NeedsHuman => 3,
            Exit::Denied => 4,
            Exit::Interrupted => 130,
        }
    }

    /// The envelope's `status`: `ok`, `error`, `needs_approval` or `cancelled`.
    pub fn status(self) -> &'static str {
        match self {
            Exit::Ok => "ok",
            Exit::Failure | Exit::Usage | Exit::Denied => "error",
            Exit::NeedsHuman => "needs_approval",
            Exit::Interrupted => "cancelled",
        }
    }
}

/// Severity of a message or status line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Success.
    Ok,
    /// Needs attention.
    Warn,
    /// Failure.
    Error,
    /// Information.
    Info,
}

impl Level {
    /// `OK`, `WARN`, `ERROR`, `INFO`.
    pub fn label(self) -> &'static str {
        match self {
            Level::Ok => "OK",
            Level::Warn => "WARN",
            Level::Error => "ERROR",
            Level::Info => "INFO",
        }
    }
}

/// A message: `{level, text}` in the envelope, a marked line in human formats.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Message {
    /// Severity.
    pub level: Level,
    /// The text.
    pub text: String,
}

/// Semantic colouring for a cell or value (the renderer maps it to colours, or to nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Tone {
    /// Default text.
    #[default]
    Normal,
    /// Success.
    Good,
    /// Needs attention.
    Warn,
    /// Failure.
    Bad,
    /// An identifier or name.
    Id,
    /// Secondary information.
    Dim,
}

/// A value with a tone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    /// The text (user content is shown unchanged, control characters excepted).
    pub text: String,
    /// Its tone.
    pub tone: Tone,
}

impl Cell {
    /// A cell with a tone.
    pub fn new(text: impl Into<String>, tone: Tone) -> Self {
        Self {
            text: text.into(),
            tone,
        }
    }
}

impl<T: Into<String>> From<T> for Cell {
    fn from(text: T) -> Self {
        Self {
            text: text.into(),
            tone: Tone::Normal,
        }
    }
}

/// Column alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Align {
    /// Left-aligned (text).
    #[default]
    Left,
    /// Right-aligned (numbers).
    Right,
}

/// A table column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// Header text.
    pub name: String,
    /// Alignment.
    pub align: Align,
}

impl Column {
    /// A left-aligned column.
    pub fn left(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            align: Align::Left,
        }
    }
    /// A right-aligned column.
    pub fn right(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            align: Align::Right,
        }
    }
}

/// A node of a tree element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeNode {
    /// The node's label.
    pub label: Cell,
    /// Children, in order.
    pub children: Vec<TreeNode>,
}

/// One block of human output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Element {
    /// Titled `Key: Value` lines.
    Panel {
        /// Title.
        title: String,
        /// Entries in order.
        entries: Vec<(String, Cell)>,
    },
    /// A titled table.
    Table {
        /// Title.
        title: String,
        /// Columns.
        columns: Vec<Column>,
        /// Rows; each has one cell per column.
        rows: Vec<Vec<Cell>>,
        /// What to print when there are no rows (`No plans found.`).
        empty: String,
    },
    /// A titled tree.
    Tree {
        /// Title.
        title: String,
        /// Top-level nodes.
        roots: Vec<TreeNode>,
    },
    /// A titled list of lines (recommendations, next steps).
    List {
        /// Title.
        title: String,
        /// Items in order.
        items: Vec<String>,
    },
}

impl Element {
    /// A panel from `(key, value)` pairs.
    pub fn panel<K: Into<String>, V: Into<Cell>>(
        title: impl Into<String>,
        entries: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        Element::Panel {
            title: title.into(),
            entries: entries
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }
}

/// Typed command data, serialized as it is by json and yaml (with the same bytes a
/// `serde_json::Value` of it would give, the workspace keeping map keys in insertion order).
#[derive(Clone)]
pub struct Payload(std::sync::Arc<dyn erased_serde::Serialize + Send + Sync>);

impl Payload {
    /// Wraps a typed value.
    pub fn new(value: impl Serialize + Send + Sync + 'static) -> Self {
        Payload(std::sync::Arc::new(value))
    }
}

impl std::fmt::Debug for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Payload(..)")
    }
}

impl Serialize for Payload {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        erased_serde::serialize(&*self.0, serializer)
    }
}

/// A command's result.
#[derive(Debug, Clone)]
pub struct Report {
    /// Command path without the binary name (`config get`).
    pub command: String,
    /// Typed data for json/yaml (snake_case keys; full ids; RFC 3339 times).
    pub data: serde_json::Value,
    /// When set, what json/yaml serialize in place of `data`: a typed value written straight
    /// to the output, for data too large to hold as a `serde_json::Value` (a large diff).
    pub payload: Option<Payload>,
    /// What the human formats draw, in order.
    pub elements: Vec<Element>,
    /// Messages shown before the status line (and in the envelope's `messages`).
    pub messages: Vec<Message>,
    /// The final status line.
    pub status: Message,
    /// The exit code (normally [`Exit::Ok`]; diagnostics with errors use [`Exit::Failure`]).
    pub exit: Exit,
    /// For a report that ends in failure (exit code not 0) while still carrying data, the
    /// envelope's `error` object.
    pub error: Option<ErrorBody>,
    /// A value meant for a pipe (a new token): the plain format prints this line alone.
    pub plain_only: Option<String>,
    /// The json format already printed this command's one document while it ran (`server
    /// start`'s `{"listening": ...}`): nothing more is printed on stdout in json.
    pub announced: bool,
}

impl Report {
    /// A successful report with an OK status line.
    pub fn ok(command: impl Into<String>, data: impl Serialize, status: impl Into<String>) -> Self {
        Self {
            command: command.into(),
            data: serde_json::to_value(data).expect("command data always serializes"),
            elements: Vec::new(),
            messages: Vec::new(),
            status: Message {
                level: Level::Ok,
                text: status.into(),
            },
            exit: Exit::Ok,
            error: None,
            payload: None,
            plain_only: None,
            announced: false,
        }
    }

    /// Marks the report as already announced in json ([`Report::announced`]).
    pub fn announced(mut self) -> Self {
        self.announced = true;
        self
    }

    /// Prints only `line` in the plain format (the other formats are unchanged).
    pub fn plain_only(mut self, line: impl Into<String>) -> Self {
        self.plain_only = Some(line.into());
        self
    }

    /// The data as json/yaml show it: the [`Payload`] converted into a value when there is one,
    /// else a copy of `data`.
    pub fn data_value(&self) -> serde_json::Value {
        match &self.payload {
            Some(p) => serde_json::to_value(p).expect("command data always serializes"),
            None => self.data.clone(),
        }
    }

    /// Adds a view element.
    pub fn with(mut self, element: Element) -> Self {
        self.elements.push(element);
        self
    }

    /// Ends the report in failure: exit code, a final ERROR line, and the envelope's `error`.
    pub fn failed(mut self, error: ErrorBody) -> Self {
        self.exit = error.exit;
        self.status = Message {
            level: Level::Error,
            text: error.message.clone(),
        };
        self.error = Some(error);
        self
    }

    /// Adds a message shown before the status line.
    pub fn message(mut self, level: Level, text: impl Into<String>) -> Self {
        self.messages.push(Message {
            level,
            text: text.into(),
        });
        self
    }
}

/// A failure as rendered at the edge: `{code, message, detail, suggestions}` plus the exit code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorBody {
    /// Stable code: `NOT_FOUND`, `INVALID_INPUT`, `CONFLICT`, `NEEDS_APPROVAL`, ...
    pub code: &'static str,
    /// What went wrong, in one sentence.
    pub message: String,
    /// More context (file, line, cause), if any.
    pub detail: Option<String>,
    /// Commands or actions that fix it.
    pub suggestions: Vec<String>,
    /// The exit code.
    #[serde(skip)]
    pub exit: Exit,
}
