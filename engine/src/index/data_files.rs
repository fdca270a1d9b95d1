//! Files that hold test data rather than code: the fixtures, golden outputs and snapshots a
//! project's tests read (`test/fixtures/<case>/input.js`, `testdata/`, `__snapshots__/`).
//! They are written in the project's languages and repeat the words of the code they
//! exercise, and being short they score high in a lexical ranking: a large tree has
//! thousands of them. Searches over files rank them apart from code
//! ([`crate::index::view::View::search_files`]).

/// Names of directories whose files are test data, as they are written (one path token
/// each, so an index query can leave them out).
pub const DATA_DIRS: &[&str] = &[
    "fixtures",
    "__fixtures__",
    "fixture",
    "testdata",
    "test_data",
    "__snapshots__",
    "snapshots",
    "golden",
];

/// What a data file's score counts against a code file's in a search over files.
pub const DATA_FACTOR: f32 = 0.25;

/// Whether `path` lies under a test data directory ([`DATA_DIRS`]).
pub fn is_data(path: &str) -> bool {
    let mut dirs = path.split('/');
    dirs.next_back();
    dirs.any(|d| DATA_DIRS.contains(&d))
}

/// The path tokens that mark a data directory: a file whose path holds none of them is not
/// data ([`is_data`]); one that holds one may still be code (`src/fixtures.rs`).
pub fn path_tokens() -> Vec<String> {
    let mut out: Vec<String> = DATA_DIRS.iter().map(|d| d.to_lowercase()).collect();
    out.dedup();
    out
}

/// A data file's search score counted against code ([`DATA_FACTOR`]); a code file's as
/// it is.
pub fn file_score(path: &str, score: f32) -> f32 {
    if is_data(path) {
        score * DATA_FACTOR
    } else {
        score
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::tokenizer;

    #[test]
    fn files_under_a_fixture_snapshot_or_testdata_directory_are_data() {
        assert!(is_data("packages/core/test/fixtures/classes/input.js"));
        assert!(is_data("src/__snapshots__/render.test.ts.snap"));
        assert!(is_data("cmd/testdata/script.go"));
        assert!(is_data("src/__fixtures__/page.tsx"));
    }

    #[test]
    fn code_and_tests_are_not_data_even_when_named_like_a_data_directory() {
        assert!(!is_data("packages/core/src/classes.ts"));
        assert!(!is_data("packages/core/test/index.js"));
        assert!(!is_data("src/fixtures.rs"));
        assert!(!is_data("fixtures"));
    }

    #[test]
    fn every_data_directory_is_one_whole_path_token() {
        for dir in DATA_DIRS {
            let tokens = tokenizer::tokens(&format!("a/{dir}/b.js"));
            assert!(tokens.contains(&dir.to_lowercase()), "{dir}: {tokens:?}");
        }
    }

    #[test]
    fn a_data_file_scores_below_a_code_file_that_matched_as_well() {
        let code = file_score("src/parser.ts", 2.0);
        let data = file_score("test/fixtures/parser/input.ts", 2.0);
        assert_eq!(code, 2.0);
        assert!(data < code);
    }
}
