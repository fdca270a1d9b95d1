//! The code tokenizer (spec section 24 "language-aware tokenization"): identifiers are kept
//! whole and also split at `snake_case` underscores, `camelCase` humps and letter/digit
//! boundaries; paths split at `/` and `.`. Every token is lowercased, so `parseConfig`,
//! `parse_config` and `ParseConfig` all answer to `parse` and `config`, and each to its own
//! whole form (`parseconfig`, `parse_config`).

use tantivy::tokenizer::{Token, TokenStream, Tokenizer};

/// Longest token kept, in bytes (longer runs are data, not names).
pub const MAX_TOKEN_BYTES: usize = 64;

/// The registered name of the tokenizer in the index.
pub const NAME: &str = "code";

/// A tokenizer for source code and paths.
#[derive(Clone, Default)]
pub struct CodeTokenizer {
    tokens: Vec<Token>,
}

/// The stream over one text's tokens.
pub struct CodeTokenStream<'a> {
    tokens: &'a mut [Token],
    next: usize,
}

impl TokenStream for CodeTokenStream<'_> {
    fn advance(&mut self) -> bool {
        self.next += 1;
        self.next <= self.tokens.len()
    }
    fn token(&self) -> &Token {
        &self.tokens[self.next - 1]
    }
    fn token_mut(&mut self) -> &mut Token {
        &mut self.tokens[self.next - 1]
    }
}

impl Tokenizer for CodeTokenizer {
    type TokenStream<'a> = CodeTokenStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> CodeTokenStream<'a> {
        self.tokens.clear();
        let mut position = 0;
        for (start, word) in words(text) {
            let mut push = |from: usize, to: usize| {
                let piece = &text[from..to];
                if piece.is_empty() || piece.len() > MAX_TOKEN_BYTES {
                    return;
                }
                self.tokens.push(Token {
                    offset_from: from,
                    offset_to: to,
                    position,
                    text: piece.to_lowercase(),
                    position_length: 1,
                });
                position += 1;
            };
            push(start, start + word.len());
            let parts = split_identifier(word);
            if parts.len() > 1 {
                for (from, to) in parts {
                    push(start + from, start + to);
                }
            }
        }
        CodeTokenStream {
            tokens: &mut self.tokens,
            next: 0,
        }
    }
}

/// The identifier-like runs of `text` (letters, digits, `_`) with their byte offsets.
pub fn words(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut rest = text.char_indices().peekable();
    std::iter::from_fn(move || {
        while let Some(&(_, c)) = rest.peek() {
            if is_word(c) {
                break;
            }
            rest.next();
        }
        let (start, _) = *rest.peek()?;
        let mut end = start;
        while let Some(&(i, c)) = rest.peek() {
            if !is_word(c) {
                break;
            }
            end = i + c.len_utf8();
            rest.next();
        }
        Some((start, &text[start..end]))
    })
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The parts of an identifier as byte ranges: split at `_`, at a lower-to-upper hump
/// (`parseConfig`), before the last capital of a run followed by lowercase (`HTTPServer` ->
/// `HTTP`, `Server`) and between letters and digits.
pub fn split_identifier(word: &str) -> Vec<(usize, usize)> {
    let chars: Vec<(usize, char)> = word.char_indices().collect();
    let mut parts = Vec::new();
    let mut start: Option<usize> = None;
    for (k, &(i, c)) in chars.iter().enumerate() {
        if c == '_' {
            if let Some(s) = start.take() {
                parts.push((s, i));
            }
            continue;
        }
        if let Some(s) = start {
            let prev = chars[k - 1].1;
            let next = chars.get(k + 1).map(|x| x.1);
            let hump = prev.is_lowercase() && c.is_uppercase();
            let acronym_end =
                prev.is_uppercase() && c.is_uppercase() && next.is_some_and(char::is_lowercase);
            let digit_edge = prev.is_ascii_digit() != c.is_ascii_digit() && prev != '_';
            if hump || acronym_end || digit_edge {
                parts.push((s, i));
                start = Some(i);
            }
        } else {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        parts.push((s, word.len()));
    }
    parts
}

/// The lowercased tokens of `text` as the index sees them (for queries and snippets).
pub fn tokens(text: &str) -> Vec<String> {
    let mut t = CodeTokenizer::default();
    let mut stream = t.token_stream(text);
    let mut out = Vec::new();
    while stream.advance() {
        out.push(stream.token().text.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn camel_snake_and_paths_split_and_stay_whole() {
        assert_eq!(
            tokens("parseConfig(snake_case_name)"),
            [
                "parseconfig",
                "parse",
                "config",
                "snake_case_name",
                "snake",
                "case",
                "name"
            ]
        );
        assert_eq!(
            tokens("src/engine/index.rs"),
            ["src", "engine", "index", "rs"]
        );
        assert_eq!(
            tokens("HTTPServer2"),
            ["httpserver2", "http", "server", "2"]
        );
        assert_eq!(tokens("x"), ["x"]);
    }

    #[test]
    fn long_runs_are_not_tokens() {
        let blob = "a".repeat(MAX_TOKEN_BYTES + 1);
        assert!(tokens(&blob).is_empty());
    }
}
