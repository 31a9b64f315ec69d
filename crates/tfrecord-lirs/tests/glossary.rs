//! The glossary (docs/FORMAT.md, "Glossary: one meaning per word") applied: phrases it
//! retired appear in no doc, comment or message of the tree (docs/, the crates' sources,
//! the Python package, the op's C++). The glossary's own table is left out (it names
//! what each word never means).

use std::fs;
use std::path::{Path, PathBuf};

/// Retired phrases (lower case, matched as whole words) and what to say instead.
const RETIRED: &[(&str, &str)] = &[
    // "window" is a fetch window only.
    (
        "look-ahead window",
        "lookahead (best-fit's pending instances)",
    ),
    (
        "lookahead window",
        "lookahead (best-fit's pending instances)",
    ),
    ("best-fit window", "best-fit lookahead"),
    // A batch holds instances; a record is a TFRecord frame (fillers are records too).
    ("records per batch", "instances per batch"),
    ("records per epoch", "instances per epoch"),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The retired phrases of `text`, as `line: phrase (say …)`.
fn retired_in(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.starts_with("| **") {
            continue; // A row of the glossary itself.
        }
        let lower = line.to_lowercase();
        for (phrase, instead) in RETIRED {
            let whole = lower.match_indices(phrase).any(|(at, _)| {
                let before = lower[..at].chars().next_back();
                let after = lower[at + phrase.len()..].chars().next();
                !before.is_some_and(|c| c.is_alphanumeric() || c == '-')
                    && !after.is_some_and(|c| c.is_alphanumeric() || c == '-')
            });
            if whole {
                found.push(format!("{}: \"{phrase}\" (say: {instead})", n + 1));
            }
        }
    }
    found
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk(&path, out);
        } else if path
            .extension()
            .is_some_and(|e| ["md", "rs", "py", "pyi", "cc", "h"].contains(&&*e.to_string_lossy()))
        {
            out.push(path);
        }
    }
}

#[test]
fn no_retired_phrase_in_docs_or_code() {
    let root = root();
    let mut files = vec![root.join("README.md")];
    for dir in ["docs", "python/tfrecord_lirs", "tf_op"] {
        walk(&root.join(dir), &mut files);
    }
    for entry in fs::read_dir(root.join("crates")).unwrap() {
        walk(&entry.unwrap().path().join("src"), &mut files);
    }
    assert!(files.len() > 100, "only {} files found", files.len());
    let mut bad = Vec::new();
    for file in files {
        let Ok(text) = fs::read_to_string(&file) else {
            continue;
        };
        for found in retired_in(&text) {
            bad.push(format!(
                "{}:{found}",
                file.strip_prefix(&root).unwrap_or(&file).display()
            ));
        }
    }
    assert!(bad.is_empty(), "retired phrases:\n{}", bad.join("\n"));
}

#[test]
fn the_lint_finds_planted_phrases() {
    assert_eq!(
        retired_in("/// The best-fit lookahead, in instances.\n"),
        Vec::<String>::new()
    );
    assert_eq!(
        retired_in("| **window** | a fetch window | the look-ahead window |\n"),
        Vec::<String>::new()
    );
    let found = retired_in("ok\n/// Bounded Look-ahead window; may reorder.\n");
    assert!(
        found.len() == 1 && found[0].starts_with("2: \"look-ahead window\""),
        "{found:?}"
    );
    assert_eq!(retired_in("# 256 records per batch\n").len(), 1);
}
