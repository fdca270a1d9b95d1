pub fn count_words(text:&str)->usize{
    text.split_whitespace().count()
}

/// The longest word, if any.
pub fn longest_word(text: &str) -> Option<&str> {
  text.split_whitespace().max_by_key(|w|w.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn counts() { assert_eq!(count_words("a b  c"), 3); }
}
