//! The layers, checked on the source tree (so `cargo test` keeps them):
//!
//! * the pure crate (`tfrecord-lirs-format`) does no file I/O: no `std::fs`, no
//!   `std::io` readers or writers, no `io::Result` returns, no `unsafe`;
//! * in the engine, a module uses only its own layer and the ones below it
//!   ([`LAYERS`], the one list of them, lowest first), every `crate::` path names the
//!   module where the thing lives (not a re-export of `lib.rs`, which has no private
//!   `use` at all), and no `pub use … as` alias is used inside the crate;
//! * no import cycle between the engine's top-level modules, nor between the modules
//!   of one of them (e.g. `read::cursor` and `read::elastic`);
//! * no source file of either crate longer than [`MAX_LINES`] outside its tests unless
//!   its first comment says why ("Over 600 lines: …").
//!
//! The test code of a file (`#[cfg(test)]` items) is left out: tests may use the
//! whole crate. `checks_find_planted_violations` shows that each check can fail.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The engine's top-level modules, lowest layer first; modules in one layer may use
/// each other (without a cycle). `lib.rs` (the crate-level docs) lists the same layers;
/// `format` (a facade of re-exports for users) is none of them: the crate's own code
/// names `tfrecord_lirs_format` itself.
const LAYERS: &[&[&str]] = &[
    &["pool"],
    &["storage"],
    &["compress", "scan", "advice"],
    &["options"],
    &["read"],
    &["write"],
    &["inspect"],
    &["pad_args"],
];

/// Which modules use which (a module as its path's segments).
type Graph = BTreeMap<Vec<String>, BTreeSet<Vec<String>>>;

/// The most lines of a source file outside its `#[cfg(test)]` items, unless its first
/// comment (the `//!` lines it starts with) gives the reason, starting "Over 600 lines".
const MAX_LINES: usize = 600;

/// What the pure crate must not name (after comments and strings are removed).
const NOT_PURE: &[&str] = &[
    "std::fs",
    "std::net",
    "std::process",
    "std::os",
    "std::env",
    "io::Read",
    "io::Write",
    "io::Seek",
    "io::BufRead",
    "io::BufReader",
    "io::BufWriter",
    "io::Result",
    "io::stdin",
    "io::stdout",
    "io::stderr",
    "File::",
    "OpenOptions",
];

/// The names of `std::io` whose import would mean I/O (`use std::io::{Read, …}`).
const NOT_PURE_IO_NAMES: &[&str] = &[
    "Read",
    "Write",
    "Seek",
    "BufRead",
    "BufReader",
    "BufWriter",
    "Result",
    "stdin",
    "stdout",
    "stderr",
];

fn crate_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(name)
}

/// Every `.rs` file under `dir`, as (path relative to `dir`, text).
fn sources(dir: &Path) -> Vec<(PathBuf, String)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(PathBuf, String)>) {
        let mut entries: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(root, &path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = fs::read_to_string(&path).unwrap();
                out.push((path.strip_prefix(root).unwrap().to_path_buf(), text));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    assert!(!out.is_empty(), "no sources under {}", dir.display());
    out
}

/// `text` with comments, string and character literals blanked out (newlines kept, so
/// line numbers still hold).
fn code_only(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if c[i] == '/' && next == Some('*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if c[i] == 'r'
            && (next == Some('"') || next == Some('#'))
            && (i == 0 || !(c[i - 1].is_alphanumeric() || c[i - 1] == '_'))
        {
            // A raw string: r"…", r#"…"#.
            let mut j = i + 1;
            while j < c.len() && c[j] == '#' {
                j += 1;
            }
            if c.get(j) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            let hashes = j - i - 1;
            let mut k = j + 1;
            while k < c.len()
                && !(c[k] == '"' && (0..hashes).all(|h| c.get(k + 1 + h) == Some(&'#')))
            {
                k += 1;
            }
            let end = (k + 1 + hashes).min(c.len());
            for &ch in &c[i..end] {
                blank(&mut out, ch);
            }
            i = end;
        } else if c[i] == '"' {
            blank(&mut out, c[i]);
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    blank(&mut out, c[i]);
                    i += 1;
                }
                if i < c.len() {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
            if i < c.len() {
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if c[i] == '\'' {
            // A character literal ('x', '\n', '\u{..}'), or a lifetime ('a), kept.
            let end = if next == Some('\\') {
                (i + 2..c.len()).find(|&k| c[k] == '\'').map(|k| k + 1)
            } else if c.get(i + 2) == Some(&'\'') {
                Some(i + 3)
            } else {
                None
            };
            match end {
                Some(end) => {
                    for &ch in &c[i..end] {
                        blank(&mut out, ch);
                    }
                    i = end;
                }
                None => {
                    out.push(c[i]);
                    i += 1;
                }
            }
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// `code` (from [`code_only`]) without its `#[cfg(test)]` items.
fn without_tests(code: &str) -> String {
    let mut c: Vec<char> = code.chars().collect();
    let marker: Vec<char> = "#[cfg(test)]".chars().collect();
    let mut i = 0;
    while i + marker.len() <= c.len() {
        if c[i..i + marker.len()] != marker[..] {
            i += 1;
            continue;
        }
        // The item after the attribute ends at a `;` outside brackets, or with the
        // block its first `{` opens.
        let mut j = i + marker.len();
        let mut depth = 0i32;
        while j < c.len() {
            match c[j] {
                '(' | '[' => depth += 1,
                ')' | ']' => depth -= 1,
                ';' if depth == 0 => break,
                '{' if depth == 0 => {
                    let mut braces = 0;
                    while j < c.len() {
                        match c[j] {
                            '{' => braces += 1,
                            '}' => {
                                braces -= 1;
                                if braces == 0 {
                                    break;
                                }
                            }
                            _ => {}
                        }
                        j += 1;
                    }
                    break;
                }
                _ => {}
            }
            j += 1;
        }
        for ch in &mut c[i..(j + 1).min(code.len())] {
            if *ch != '\n' {
                *ch = ' ';
            }
        }
        i = j;
    }
    c.into_iter().collect()
}

/// The engine module a file is (`read/fetch/workers.rs` → `read::fetch::workers`).
fn module_of(file: &Path) -> Vec<String> {
    let mut parts: Vec<String> = file
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_string());
    }
    parts
}

/// The paths from the crate root that `code` names: `crate::a::b`, `use crate::{a, b::c}`
/// and `super::` paths, resolved from `module` (the file's module), each as its segments
/// (the first is a top-level module, or whatever else the root holds), with its line.
fn crate_paths(module: &[String], code: &str) -> Vec<(usize, Vec<String>)> {
    let mut found = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let mut at = 0;
        while let Some((start, up)) = find_root_path(line, at) {
            at = start;
            // Where the path starts: the root, or (for `super::`) a module of the crate.
            let from_root: Vec<String> = match up {
                Some(up) if up < module.len() => module[..module.len() - up].to_vec(),
                _ => Vec::new(),
            };
            let rest = &line[start..];
            let items = if rest.starts_with('{') {
                group_items(rest)
            } else {
                group_items(&format!(
                    "{{{}}}",
                    rest.split([' ', ';', '(', ')', '<', '>', '&', ','])
                        .next()
                        .unwrap()
                ))
            };
            for item in items {
                let mut path = from_root.clone();
                path.extend(item);
                found.push((n + 1, path));
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

/// The items of a `{…}` group (first-level), each as its leading path segments.
fn group_items(group: &str) -> Vec<Vec<String>> {
    let mut items = Vec::new();
    let mut depth = 0;
    let mut current = String::new();
    for ch in group.chars() {
        match ch {
            '{' => {
                depth += 1;
                if depth > 1 {
                    current.push(ch);
                }
            }
            '}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
                current.push(ch);
            }
            ',' if depth == 1 => items.push(std::mem::take(&mut current)),
            _ => current.push(ch),
        }
    }
    items.push(current);
    items
        .iter()
        .map(|item| {
            item.trim()
                .split("::")
                .map(|s| {
                    s.trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect::<String>()
                })
                .take_while(|s| !s.is_empty() && s != "self")
                .collect::<Vec<_>>()
        })
        .filter(|segments| !segments.is_empty())
        .collect()
}

/// The next `crate::` (returns where its path starts, `None`) or `super::…::` (returns
/// where its path starts and how many levels it climbs) in `line` from byte `from`.
fn find_root_path(line: &str, from: usize) -> Option<(usize, Option<usize>)> {
    let hay = &line[from..];
    let starts_word = |at: usize| {
        at == 0 || {
            let prev = line.as_bytes()[at - 1];
            !(prev.is_ascii_alphanumeric() || prev == b'_' || prev == b':')
        }
    };
    let mut best: Option<(usize, Option<usize>)> = None;
    let mut search = 0;
    while let Some(p) = hay[search..].find("crate::") {
        let at = from + search + p;
        if starts_word(at) {
            best = Some((at + "crate::".len(), None));
            break;
        }
        search += p + 1;
    }
    let mut search = 0;
    while let Some(p) = hay[search..].find("super::") {
        let at = from + search + p;
        if starts_word(at) {
            if best.is_none_or(|(b, _)| at < b) {
                let mut end = at;
                let mut up = 0;
                while line[end..].starts_with("super::") {
                    end += "super::".len();
                    up += 1;
                }
                best = Some((end, Some(up)));
            }
            break;
        }
        search += p + 1;
    }
    best
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// Violations of the pure crate's rule in its `files`.
fn pure_violations(files: &[(PathBuf, String)]) -> Vec<String> {
    let mut bad = Vec::new();
    for (file, text) in files {
        let code = without_tests(&code_only(text));
        for (n, line) in code.lines().enumerate() {
            for word in NOT_PURE {
                if line.contains(word) {
                    bad.push(format!(
                        "{}:{}: the pure crate names `{word}`",
                        file.display(),
                        n + 1
                    ));
                }
            }
            // `unsafe` as a keyword (`#![forbid(unsafe_code)]` is the rule, not a use).
            let is_word =
                |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_');
            if line.match_indices("unsafe").any(|(at, _)| {
                !is_word(line.as_bytes().get(at + 6))
                    && (at == 0 || !is_word(line.as_bytes().get(at - 1)))
            }) {
                bad.push(format!(
                    "{}:{}: the pure crate has `unsafe` code",
                    file.display(),
                    n + 1
                ));
            }
            if let Some(p) = line.find("std::io::{") {
                for item in group_items(&line[p + "std::io::".len()..]) {
                    if NOT_PURE_IO_NAMES.contains(&item[0].as_str()) {
                        bad.push(format!(
                            "{}:{}: the pure crate imports `std::io::{}`",
                            file.display(),
                            n + 1,
                            item[0]
                        ));
                    }
                }
            }
        }
    }
    bad
}

/// The engine's checks over its `files` (paths relative to `src/`): the violations, and
/// the dependencies between modules found on the way.
fn engine_violations(files: &[(PathBuf, String)]) -> (Vec<String>, Graph) {
    let mut bad = Vec::new();
    let mut edges: Graph = BTreeMap::new();
    let modules: BTreeSet<Vec<String>> = files.iter().map(|(f, _)| module_of(f)).collect();
    let aliases: BTreeSet<String> = files
        .iter()
        .flat_map(|(_, text)| {
            code_only(text)
                .lines()
                .filter_map(|l| {
                    let l = l.trim();
                    let rest = l
                        .strip_prefix("pub use ")
                        .or_else(|| l.strip_prefix("pub(crate) use "))?;
                    let (_, alias) = rest.trim_end_matches(';').rsplit_once(" as ")?;
                    Some(alias.trim().to_string())
                })
                .collect::<Vec<_>>()
        })
        .collect();
    for (file, text) in files {
        let module = module_of(file);
        let code = without_tests(&code_only(text));
        let name = file.display();
        if module.is_empty() {
            // lib.rs: module declarations and re-exports for users, nothing it uses itself.
            for (n, line) in code.lines().enumerate() {
                let t = line.trim_start();
                if t.starts_with("use ") || t.starts_with("pub(crate) use ") {
                    bad.push(format!(
                        "{name}:{}: lib.rs has a crate-internal `use` (a short path for the crate's own code): name the module where the thing lives instead",
                        n + 1
                    ));
                }
            }
            continue;
        }
        if module == ["format"] {
            continue; // The facade for users: re-exports of the format crate only.
        }
        let top = &module[0];
        let Some(own) = layer_of(top) else {
            bad.push(format!("{name}: module `{top}` is in no layer of LAYERS"));
            continue;
        };
        for (line, path) in crate_paths(&module, &code) {
            for segment in &path {
                if aliases.contains(segment) {
                    bad.push(format!(
                        "{name}:{line}: `crate::{}` goes through the alias `{segment}` (a `pub use … as` for users)",
                        path.join("::")
                    ));
                }
            }
            let target = &path[0];
            let Some(theirs) = layer_of(target) else {
                bad.push(format!(
                    "{name}:{line}: `crate::{}` does not name a module of the layers (a re-export of lib.rs?): name the module where it lives",
                    path.join("::")
                ));
                continue;
            };
            if theirs > own {
                bad.push(format!(
                    "{name}:{line}: `{top}` (layer {own}) uses `crate::{}` of the higher layer {theirs}",
                    path.join("::")
                ));
            }
            // Dependencies between top-level modules, and between the files' modules
            // (a file and the modules it is in or holds excepted: `mod.rs` and its
            // children share their items by design).
            if target != top {
                edges
                    .entry(vec![top.clone()])
                    .or_default()
                    .insert(vec![target.clone()]);
            }
            let to = (1..=path.len())
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|m| modules.contains(m));
            if let Some(to) = to {
                let nested = to.starts_with(&module) || module.starts_with(&to);
                if !nested {
                    let mut from = vec!["file".to_string()];
                    from.extend(module.iter().cloned());
                    let mut to_file = vec!["file".to_string()];
                    to_file.extend(to);
                    edges.entry(from).or_default().insert(to_file);
                }
            }
        }
    }
    (bad, edges)
}

/// A cycle in `edges`, if any, as the modules on it.
fn find_cycle(edges: &Graph) -> Option<Vec<String>> {
    fn visit(
        node: &Vec<String>,
        edges: &Graph,
        state: &mut BTreeMap<Vec<String>, u8>,
        stack: &mut Vec<Vec<String>>,
    ) -> Option<Vec<String>> {
        state.insert(node.clone(), 1);
        stack.push(node.clone());
        for next in edges.get(node).into_iter().flatten() {
            match state.get(next).copied().unwrap_or(0) {
                1 => {
                    let from = stack.iter().position(|n| n == next).unwrap();
                    let mut cycle: Vec<String> =
                        stack[from..].iter().map(|n| n.join("::")).collect();
                    cycle.push(next.join("::"));
                    return Some(cycle);
                }
                0 => {
                    if let Some(cycle) = visit(next, edges, state, stack) {
                        return Some(cycle);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(node.clone(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in edges.keys() {
        if state.get(node).copied().unwrap_or(0) == 0 {
            if let Some(cycle) = visit(node, edges, &mut state, &mut Vec::new()) {
                return Some(cycle);
            }
        }
    }
    None
}

/// Files longer than [`MAX_LINES`] outside their tests that do not say why.
fn long_files(files: &[(PathBuf, String)]) -> Vec<String> {
    let mut bad = Vec::new();
    for (file, text) in files {
        let code = without_tests(&code_only(text));
        // Lines up to the last one with code outside the tests (tests come last).
        let lines = code
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .last()
            .map_or(0, |(n, _)| n + 1);
        let first_comment: String = text
            .lines()
            .take_while(|l| l.starts_with("//!"))
            .collect::<Vec<_>>()
            .join("\n");
        if lines > MAX_LINES && !first_comment.contains("Over 600 lines") {
            bad.push(format!(
                "{}: {lines} lines outside its tests (more than {MAX_LINES}): split it by job, or say why in its first comment (\"Over 600 lines: …\")",
                file.display()
            ));
        }
    }
    bad
}

/// Every violation in the engine's `engine` files and the pure crate's `pure` files.
fn violations(engine: &[(PathBuf, String)], pure: &[(PathBuf, String)]) -> Vec<String> {
    let mut bad = pure_violations(pure);
    let (engine_bad, edges) = engine_violations(engine);
    bad.extend(engine_bad);
    bad.extend(long_files(engine));
    bad.extend(long_files(pure));
    if let Some(cycle) = find_cycle(&edges) {
        bad.push(format!("an import cycle: {}", cycle.join(" -> ")));
    }
    bad
}

#[test]
fn the_layers_hold() {
    let engine = sources(&crate_dir("tfrecord-lirs").join("src"));
    let pure = sources(&crate_dir("tfrecord-lirs-format").join("src"));
    // Every top-level module of the engine is in a layer (or is the users' facade).
    let lib = engine
        .iter()
        .find(|(f, _)| f == Path::new("lib.rs"))
        .unwrap();
    for line in code_only(&lib.1).lines() {
        let t = line.trim();
        let Some(rest) = t
            .strip_prefix("mod ")
            .or_else(|| t.strip_prefix("pub mod "))
        else {
            continue;
        };
        let module = rest.trim_end_matches(';');
        assert!(
            module == "format" || layer_of(module).is_some(),
            "lib.rs declares `{module}`, which is in no layer of LAYERS (tests/layers.rs)"
        );
    }
    let bad = violations(&engine, &pure);
    assert!(bad.is_empty(), "the layers are broken:\n{}", bad.join("\n"));
}

#[test]
fn the_pure_crate_depends_on_no_engine() {
    let manifest =
        fs::read_to_string(crate_dir("tfrecord-lirs-format").join("Cargo.toml")).unwrap();
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .unwrap()
        .split("\n[")
        .next()
        .unwrap();
    for forbidden in [
        "tfrecord-lirs",
        "memmap2",
        "libc",
        "tempfile",
        "object_store",
    ] {
        assert!(
            !deps.lines().any(|l| l.trim_start().starts_with(forbidden)),
            "tfrecord-lirs-format depends on {forbidden}"
        );
    }
}

#[test]
fn checks_find_planted_violations() {
    let file = |path: &str, text: &str| (PathBuf::from(path), text.to_string());
    let lib = file(
        "lib.rs",
        "mod pool;\nmod storage;\nmod read;\npub use storage::local as io;\n",
    );
    let clean = vec![
        lib.clone(),
        file("storage/mod.rs", "use crate::pool::spawn;\n// crate::read::Reader in a comment\nconst S: &str = \"crate::read\";\n"),
        file("read/mod.rs", "use crate::storage::{local, Storage};\nuse super::storage::x;\n#[cfg(test)]\nmod tests {\n    use crate::Reader;\n}\n"),
        file("read/a.rs", "use crate::read::b::B;\n"),
        file("read/b.rs", "pub struct B;\n"),
    ];
    let pure_clean = vec![file("order.rs", "use std::ops::Range;\nuse std::io::ErrorKind;\n/// std::fs in docs\nfn f() -> std::result::Result<(), std::io::Error> { Ok(()) }\n")];
    assert_eq!(violations(&clean, &pure_clean), Vec::<String>::new());

    let planted: &[(&str, &str, &str)] = &[
        (
            "storage/mod.rs",
            "use crate::read::reader::Reader;\n",
            "of the higher layer",
        ),
        (
            "storage/mod.rs",
            "fn f() { crate::read::go() }\n",
            "of the higher layer",
        ),
        (
            "storage/mod.rs",
            "use crate::{pool, read::x};\n",
            "of the higher layer",
        ),
        (
            "read/mod.rs",
            "use crate::Reader;\n",
            "does not name a module",
        ),
        ("read/mod.rs", "use crate::io::ReadAt;\n", "alias `io`"),
        (
            "read/mod.rs",
            "use crate::storage::io::ReadAt;\n",
            "alias `io`",
        ),
        (
            "lib.rs",
            "mod pool;\nuse read::reader;\n",
            "crate-internal `use`",
        ),
        ("read/b.rs", "use crate::read::a::A;\n", "import cycle"),
        ("read/b.rs", "use super::a::A;\n", "import cycle"),
        ("pool.rs", "use super::storage::x;\n", "of the higher layer"),
        ("cli/mod.rs", "\n", "in no layer"),
    ];
    for (path, text, expect) in planted {
        let mut engine: Vec<_> = clean
            .iter()
            .filter(|(p, _)| p != Path::new(path))
            .cloned()
            .collect();
        engine.push(file(path, text));
        let bad = violations(&engine, &pure_clean);
        assert!(
            bad.iter().any(|b| b.contains(expect)),
            "{path}: {text:?} gave {bad:?}, not {expect:?}"
        );
    }
    let long = "fn f() {}\n".repeat(MAX_LINES + 1);
    let bad = violations(&clean, &[file("long.rs", &long)]);
    assert!(
        bad.iter()
            .any(|b| b.contains("long.rs") && b.contains("outside its tests")),
        "{bad:?}"
    );
    let said = format!("//! Over 600 lines: one contract.\n{long}");
    assert_eq!(
        violations(&clean, &[file("long.rs", &said)]),
        Vec::<String>::new()
    );
    let tested = format!("fn f() {{}}\n#[cfg(test)]\nmod tests {{\n{long}}}\n");
    assert_eq!(
        violations(&clean, &[file("long.rs", &tested)]),
        Vec::<String>::new()
    );

    let pure_planted: &[(&str, &str)] = &[
        ("use std::fs::File;\n", "std::fs"),
        ("use std::io::{self, Read};\n", "std::io::Read"),
        ("fn f() -> std::io::Result<()> { Ok(()) }\n", "io::Result"),
        ("fn f(w: &mut dyn std::io::Write) {}\n", "io::Write"),
        ("fn f() { unsafe {} }\n", "unsafe"),
    ];
    for (text, expect) in pure_planted {
        let bad = violations(&clean, &[file("x.rs", text)]);
        assert!(
            bad.iter().any(|b| b.contains(expect)),
            "{text:?} gave {bad:?}, not {expect:?}"
        );
    }
}
