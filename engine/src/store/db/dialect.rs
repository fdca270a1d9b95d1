//! SQLite's SQL as PostgreSQL reads it. The store's statements keep to what both databases
//! mean the same way; what differs only in spelling is rewritten here:
//! - parameters: `?N` and `?` become `$N` (outside string literals and quoted names);
//! - `INSERT OR IGNORE INTO …` becomes `INSERT INTO … ON CONFLICT DO NOTHING` (before a
//!   `RETURNING`, when there is one);
//! - `CROSS JOIN t ON …` (SQLite's way to fix the join order) becomes `JOIN t ON …`.
//!
//! What has no spelling in common (SQLite's JSON functions, pragmas) is chosen by the
//! repository itself through [`super::Connection::is_postgres`].

/// A statement rewritten for PostgreSQL and the number of parameters it takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Translated {
    /// The statement.
    pub sql: String,
    /// The highest parameter number it uses.
    pub params: usize,
}

/// Rewrites one SQLite statement for PostgreSQL.
pub(crate) fn translate(sql: &str) -> Translated {
    let (sql, params) = number_parameters(sql);
    Translated {
        sql: cross_join_on(&insert_or_ignore(&sql)),
        params,
    }
}

/// `CROSS JOIN t [alias] ON` → `JOIN t [alias] ON`.
fn cross_join_on(sql: &str) -> String {
    static CROSS_JOIN_ON: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(?i)\bCROSS\s+JOIN(\s+\w+(?:\s+\w+)?\s+ON\b)").expect("a valid pattern")
    });
    CROSS_JOIN_ON.replace_all(sql, "JOIN$1").into_owned()
}

/// `?N` → `$N`, `?` → the next number; quoted text is copied as it is.
fn number_parameters(sql: &str) -> (String, usize) {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut chars = sql.chars().peekable();
    let mut quote: Option<char> = None;
    let (mut next, mut highest) = (0usize, 0usize);
    while let Some(c) = chars.next() {
        if let Some(q) = quote {
            out.push(c);
            if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' => {
                quote = Some(c);
                out.push(c);
            }
            '?' => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                let n = digits.parse().unwrap_or_else(|_| next + 1);
                next = n;
                highest = highest.max(n);
                out.push('$');
                out.push_str(&n.to_string());
            }
            _ => out.push(c),
        }
    }
    (out, highest)
}

fn insert_or_ignore(sql: &str) -> String {
    let trimmed = sql.trim_start();
    let head = "INSERT OR IGNORE INTO";
    if !trimmed
        .get(..head.len())
        .is_some_and(|h| h.eq_ignore_ascii_case(head))
    {
        return sql.to_string();
    }
    let body = format!("INSERT INTO{}", &trimmed[head.len()..]);
    let body = body.trim_end().trim_end_matches(';');
    match find_keyword(body, "RETURNING") {
        Some(at) => format!(
            "{} ON CONFLICT DO NOTHING {}",
            body[..at].trim_end(),
            &body[at..]
        ),
        None => format!("{body} ON CONFLICT DO NOTHING"),
    }
}

/// The byte offset of `keyword` as a whole word outside quotes, case-insensitive.
fn find_keyword(sql: &str, keyword: &str) -> Option<usize> {
    let upper = sql.to_ascii_uppercase();
    let bytes = upper.as_bytes();
    let mut quote: Option<u8> = None;
    for (i, &b) in bytes.iter().enumerate() {
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'\'' || b == b'"' => quote = Some(b),
            None => {
                let word_start = i == 0 || !is_word(bytes[i - 1]);
                let end = i + keyword.len();
                if word_start
                    && upper[i..].starts_with(keyword)
                    && bytes.get(end).is_none_or(|&n| !is_word(n))
                {
                    return Some(i);
                }
            }
        }
    }
    None
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_and_bare_parameters_become_dollar_parameters_outside_quotes() {
        let t = translate("SELECT '?1', a FROM t WHERE a = ?2 AND b = ?1 AND c LIKE '%?%'");
        assert_eq!(
            t.sql,
            "SELECT '?1', a FROM t WHERE a = $2 AND b = $1 AND c LIKE '%?%'"
        );
        assert_eq!(t.params, 2);
        let t = translate("UPDATE t SET a = ?, b = ? WHERE c = ?");
        assert_eq!(t.sql, "UPDATE t SET a = $1, b = $2 WHERE c = $3");
        assert_eq!(t.params, 3);
        assert_eq!(translate("SELECT 1").params, 0);
    }

    #[test]
    fn a_cross_join_with_on_becomes_a_join_and_one_without_stays() {
        assert_eq!(
            translate("SELECT 1 FROM a CROSS JOIN decisions d ON d.x = a.x").sql,
            "SELECT 1 FROM a JOIN decisions d ON d.x = a.x"
        );
        assert_eq!(
            translate("SELECT 1 FROM a CROSS JOIN b").sql,
            "SELECT 1 FROM a CROSS JOIN b"
        );
    }

    #[test]
    fn insert_or_ignore_becomes_on_conflict_do_nothing_before_returning() {
        assert_eq!(
            translate("INSERT OR IGNORE INTO t (a) VALUES (?1);").sql,
            "INSERT INTO t (a) VALUES ($1) ON CONFLICT DO NOTHING"
        );
        assert_eq!(
            translate("insert or ignore into t (a) VALUES (?1) RETURNING a").sql,
            "INSERT INTO t (a) VALUES ($1) ON CONFLICT DO NOTHING RETURNING a"
        );
        assert_eq!(
            translate("INSERT INTO t (returning_x) VALUES (?1)").sql,
            "INSERT INTO t (returning_x) VALUES ($1)"
        );
    }
}
