//! The layers, checked on the source tree of every crate of the workspace (so `cargo
//! test` keeps them). Each file is parsed (`syn`): every `use` tree, however rustfmt
//! wraps it, and every path in the code (macro arguments that parse as expressions
//! included) is checked; the test code of a file (`#[cfg(test)]` items) is left out,
//! as tests may use the whole crate.
//!
//! * the pure crate (`tfrecord-lirs-format`) does no I/O: it names no `std::fs`,
//!   `std::net`, `std::process`, `std::os`, `std::env`, nothing of `std::io` (no
//!   reader, writer, `io::Result` nor `io::Error`, through a `use` alias or not: its
//!   errors are its own, the engine maps I/O errors), no engine, and has no `unsafe`;
//! * in the engine, a module uses only its own layer and the ones below it
//!   ([`LAYERS`], the one list of them, lowest first), every `crate::` path names the
//!   module where the thing lives (not a re-export of `lib.rs`, which has no private
//!   `use` at all), no `pub use … as` alias is used inside the crate, and `unsafe`
//!   is only in the storage layer;
//! * no import cycle between the engine's top-level modules, nor between the modules
//!   of one of them (e.g. `read::cursor` and `read::elastic`);
//! * the front ends (CLI, TensorFlow bridge, Python extension, fuzz oracles) reach the
//!   format through the engine only: they name `tfrecord_lirs`, never
//!   `tfrecord_lirs_format` (nor depend on it);
//! * no source file of the pure crate or the engine longer than [`MAX_LINES`] outside
//!   its tests unless its first comment says why ("Over 600 lines: …").
//!
//! `checks_find_planted_violations` shows that each check can fail.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use syn::spanned::Spanned;
use syn::visit::{self, Visit};

/// The engine's top-level modules, lowest layer first; modules in one layer may use
/// each other (without a cycle). `lib.rs` (the crate-level docs) lists the same layers;
/// `format` (a facade of re-exports for users) is none of them: the crate's own code
/// names `tfrecord_lirs_format` itself.
const LAYERS: &[&[&str]] = &[
    &["remedy", "error", "pool"],
    &["storage"],
    &["compress", "scan", "advice"],
    &["options"],
    &["read"],
    &["write"],
    &["inspect"],
    &["pad_args"],
];

/// The crates on top of the engine.
const FRONT_ENDS: &[&str] = &[
    "tfrecord-lirs-cli",
    "tfrecord-lirs-ffi",
    "tfrecord-lirs-py",
    "tfrecord-lirs-fuzz-oracles",
];

/// Which modules use which (a module as its path's segments).
type Graph = BTreeMap<Vec<String>, BTreeSet<Vec<String>>>;

/// The most lines of a source file outside its `#[cfg(test)]` items, unless its first
/// comment (the `//!` lines it starts with) gives the reason, starting "Over 600 lines".
const MAX_LINES: usize = 600;

/// What the pure crate must not name: paths starting with these.
const NOT_PURE: &[&str] = &[
    "std::fs",
    "std::net",
    "std::process",
    "std::os",
    "std::env",
    "std::io",
    "tfrecord_lirs",
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

/// A path a file names: in a `use` (then `alias` is its `as` name, if any, and `public`
/// whether the `use` is `pub`) or in the code.
#[derive(Debug, Clone)]
struct Named {
    line: usize,
    /// The path as written (`crate`, `super`, `self` kept).
    path: Vec<String>,
    /// The (inline) module it is named in, from the crate root.
    module: Vec<String>,
    is_use: bool,
    public: bool,
    alias: Option<String>,
}

/// What one file names and holds, its test code left out.
#[derive(Debug, Default, Clone)]
struct Parsed {
    named: Vec<Named>,
    /// Lines of `unsafe` blocks, functions, impls and traits.
    unsafe_lines: Vec<usize>,
    /// The last line of an item outside the tests.
    last_line: usize,
    /// Modules declared at the file's top level (`mod x;` or `mod x { … }`).
    mods: Vec<String>,
    /// Modules of files of their own that are test code (`#[cfg(test)] mod tests;`).
    test_mods: Vec<String>,
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Ident>()
                .is_ok_and(|ident| ident == "test")
    })
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item::*;
    match item {
        Const(i) => &i.attrs,
        Enum(i) => &i.attrs,
        ExternCrate(i) => &i.attrs,
        Fn(i) => &i.attrs,
        ForeignMod(i) => &i.attrs,
        Impl(i) => &i.attrs,
        Macro(i) => &i.attrs,
        Mod(i) => &i.attrs,
        Static(i) => &i.attrs,
        Struct(i) => &i.attrs,
        Trait(i) => &i.attrs,
        TraitAlias(i) => &i.attrs,
        Type(i) => &i.attrs,
        Union(i) => &i.attrs,
        Use(i) => &i.attrs,
        _ => &[],
    }
}

/// `items` without their `#[cfg(test)]` items (in inline modules and impls too).
fn strip_tests(items: &mut Vec<syn::Item>) {
    items.retain(|item| !is_cfg_test(item_attrs(item)));
    for item in items {
        match item {
            syn::Item::Mod(m) => {
                if let Some((_, inner)) = &mut m.content {
                    strip_tests(inner);
                }
            }
            syn::Item::Impl(i) => i.items.retain(|it| match it {
                syn::ImplItem::Fn(f) => !is_cfg_test(&f.attrs),
                syn::ImplItem::Const(c) => !is_cfg_test(&c.attrs),
                syn::ImplItem::Type(t) => !is_cfg_test(&t.attrs),
                _ => true,
            }),
            _ => {}
        }
    }
}

struct Collect {
    module: Vec<String>,
    out: Parsed,
}

impl Collect {
    fn use_tree(&mut self, tree: &syn::UseTree, prefix: &mut Vec<String>, public: bool) {
        let push = |this: &mut Self, path: Vec<String>, line: usize, alias: Option<String>| {
            this.out.named.push(Named {
                line,
                path,
                module: this.module.clone(),
                is_use: true,
                public,
                alias,
            })
        };
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(&p.tree, prefix, public);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut path = prefix.clone();
                if n.ident != "self" {
                    path.push(n.ident.to_string());
                }
                push(self, path, n.ident.span().start().line, None);
            }
            syn::UseTree::Rename(r) => {
                let mut path = prefix.clone();
                if r.ident != "self" {
                    path.push(r.ident.to_string());
                }
                let alias = Some(r.rename.to_string());
                push(self, path, r.ident.span().start().line, alias);
            }
            syn::UseTree::Glob(g) => push(self, prefix.clone(), g.span().start().line, None),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(t, prefix, public);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Collect {
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let public = matches!(u.vis, syn::Visibility::Public(_));
        let mut prefix = Vec::new();
        if u.leading_colon.is_some() {
            prefix.push(String::new());
        }
        self.use_tree(&u.tree, &mut prefix, public);
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if m.content.is_some() {
            self.module.push(m.ident.to_string());
            visit::visit_item_mod(self, m);
            self.module.pop();
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.leading_colon.is_none() && p.segments.len() > 1 {
            self.out.named.push(Named {
                line: p.span().start().line,
                path: p.segments.iter().map(|s| s.ident.to_string()).collect(),
                module: self.module.clone(),
                is_use: false,
                public: false,
                alias: None,
            });
        }
        visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        visit::visit_macro(self, m);
        // Arguments of `format!`, `assert!`, `vec!` … are expressions: their paths count.
        use syn::punctuated::Punctuated;
        if let Ok(args) =
            m.parse_body_with(Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated)
        {
            for arg in &args {
                self.visit_expr(arg);
            }
        }
    }

    fn visit_expr_unsafe(&mut self, e: &'ast syn::ExprUnsafe) {
        self.out.unsafe_lines.push(e.unsafe_token.span.start().line);
        visit::visit_expr_unsafe(self, e);
    }

    fn visit_signature(&mut self, s: &'ast syn::Signature) {
        if let Some(u) = &s.unsafety {
            self.out.unsafe_lines.push(u.span.start().line);
        }
        visit::visit_signature(self, s);
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        if let Some(u) = &i.unsafety {
            self.out.unsafe_lines.push(u.span.start().line);
        }
        visit::visit_item_impl(self, i);
    }

    fn visit_item_trait(&mut self, t: &'ast syn::ItemTrait) {
        if let Some(u) = &t.unsafety {
            self.out.unsafe_lines.push(u.span.start().line);
        }
        visit::visit_item_trait(self, t);
    }
}

/// Parses `text` (the file `file`, of module `module`); panics naming the file if it
/// is not Rust.
fn parse(file: &Path, module: &[String], text: &str) -> Parsed {
    // Each file is checked by several rules: parsed once.
    type Key = (PathBuf, Vec<String>, String);
    static PARSED: std::sync::Mutex<BTreeMap<Key, Parsed>> = std::sync::Mutex::new(BTreeMap::new());
    let key = (file.to_path_buf(), module.to_vec(), text.to_string());
    if let Some(p) = PARSED.lock().unwrap().get(&key) {
        return p.clone();
    }
    let parsed = parse_now(file, module, text);
    PARSED.lock().unwrap().insert(key, parsed.clone());
    parsed
}

fn parse_now(file: &Path, module: &[String], text: &str) -> Parsed {
    let mut ast =
        syn::parse_file(text).unwrap_or_else(|e| panic!("{}: does not parse: {e}", file.display()));
    let test_mods = ast
        .items
        .iter()
        .filter_map(|i| match i {
            syn::Item::Mod(m) if m.content.is_none() && is_cfg_test(&m.attrs) => {
                Some(m.ident.to_string())
            }
            _ => None,
        })
        .collect();
    strip_tests(&mut ast.items);
    let mut c = Collect {
        module: module.to_vec(),
        out: Parsed::default(),
    };
    c.visit_file(&ast);
    c.out.last_line = ast
        .items
        .iter()
        .map(|i| i.span().end().line)
        .max()
        .unwrap_or(0);
    c.out.test_mods = test_mods;
    c.out.mods = ast
        .items
        .iter()
        .filter_map(|i| match i {
            syn::Item::Mod(m) => Some(m.ident.to_string()),
            _ => None,
        })
        .collect();
    c.out
}

/// `files` without the files of test modules (`#[cfg(test)] mod tests;` and what is
/// under them).
fn without_test_files(files: &[(PathBuf, String)]) -> Vec<(PathBuf, String)> {
    let tests: Vec<Vec<String>> = files
        .iter()
        .flat_map(|(f, text)| {
            let module = module_of(f);
            parse(f, &module, text).test_mods.into_iter().map(move |m| {
                let mut path = module.clone();
                path.push(m);
                path
            })
        })
        .collect();
    files
        .iter()
        .filter(|(f, _)| !tests.iter().any(|t| module_of(f).starts_with(t)))
        .cloned()
        .collect()
}

/// The crate module a file is (`read/fetch/workers.rs` → `read::fetch::workers`).
fn module_of(file: &Path) -> Vec<String> {
    let mut parts: Vec<String> = file
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" && stem != "main" {
        parts.push(stem.to_string());
    }
    parts
}

/// A path named in `module` as segments from the crate root (`crate::`, `super::`,
/// `self::` paths); `None` for other paths (std, other crates, local names).
fn from_root(module: &[String], path: &[String]) -> Option<Vec<String>> {
    let first = path.first()?;
    let resolved = match first.as_str() {
        "crate" => path[1..].to_vec(),
        "super" => {
            let up = path.iter().take_while(|s| *s == "super").count();
            let mut base = if up < module.len() {
                module[..module.len() - up].to_vec()
            } else {
                Vec::new()
            };
            base.extend(path[up..].iter().cloned());
            base
        }
        "self" if path.len() > 1 => {
            let mut base = module.to_vec();
            base.extend(path[1..].iter().cloned());
            base
        }
        _ => return None,
    };
    (!resolved.is_empty()).then_some(resolved)
}

/// A path with its first segment replaced by what a `use` of the same file binds to
/// that name (`use std::io; io::Result` → `std::io::Result`).
fn expanded(path: &[String], uses: &BTreeMap<String, Vec<String>>) -> Vec<String> {
    match path.first().and_then(|first| uses.get(first)) {
        Some(full) if full != path => {
            let mut out = full.clone();
            out.extend(path[1..].iter().cloned());
            out
        }
        _ => path.to_vec(),
    }
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// Violations of the pure crate's rule in its `files`.
fn pure_violations(files: &[(PathBuf, String)]) -> Vec<String> {
    let mut bad = Vec::new();
    for (file, text) in files {
        let parsed = parse(file, &module_of(file), text);
        // What each name a `use` binds stands for.
        let uses: BTreeMap<String, Vec<String>> = parsed
            .named
            .iter()
            .filter(|n| n.is_use && !n.path.is_empty())
            .map(|n| {
                let name = n
                    .alias
                    .clone()
                    .unwrap_or_else(|| n.path.last().unwrap().clone());
                (name, n.path.clone())
            })
            .collect();
        for n in &parsed.named {
            let full = if n.is_use {
                n.path.clone()
            } else {
                expanded(&n.path, &uses)
            };
            let joined = full.join("::");
            for word in NOT_PURE {
                let hit = joined == *word
                    || joined.starts_with(&format!("{word}::"))
                    // `use std::io::*` brings every reader and writer.
                    || (n.is_use && word.starts_with(&format!("{joined}::")) && joined.len() > 3
                        && text.lines().nth(n.line - 1).is_some_and(|l| l.contains('*')));
                if hit {
                    bad.push(format!(
                        "{}:{}: the pure crate names `{joined}` ({word})",
                        file.display(),
                        n.line
                    ));
                }
            }
        }
        for line in &parsed.unsafe_lines {
            bad.push(format!(
                "{}:{line}: the pure crate has `unsafe` code",
                file.display()
            ));
        }
    }
    bad.sort();
    bad.dedup();
    bad
}

/// The engine's checks over its `files` (paths relative to `src/`): the violations, and
/// the dependencies between modules found on the way.
fn engine_violations(files: &[(PathBuf, String)]) -> (Vec<String>, Graph) {
    let mut bad = Vec::new();
    let mut edges: Graph = BTreeMap::new();
    let modules: BTreeSet<Vec<String>> = files.iter().map(|(f, _)| module_of(f)).collect();
    let parsed: Vec<(&PathBuf, Vec<String>, Parsed)> = files
        .iter()
        .map(|(f, text)| {
            let module = module_of(f);
            let p = parse(f, &module, text);
            (f, module, p)
        })
        .collect();
    // The names `pub use … as` gives, for users: the crate's own code never goes
    // through them.
    let aliases: BTreeSet<String> = parsed
        .iter()
        .flat_map(|(_, _, p)| p.named.iter())
        .filter(|n| n.is_use && n.public)
        .filter_map(|n| n.alias.clone())
        .collect();
    for (file, module, p) in &parsed {
        let name = file.display();
        if module.is_empty() {
            // lib.rs: module declarations and re-exports for users, nothing it uses itself.
            for n in p.named.iter().filter(|n| n.is_use && !n.public) {
                bad.push(format!(
                    "{name}:{}: lib.rs has a crate-internal `use` of `{}` (a short path for the crate's own code): name the module where the thing lives instead",
                    n.line,
                    n.path.join("::")
                ));
            }
            continue;
        }
        if module[..] == ["format"] {
            continue; // The facade for users: re-exports of the format crate only.
        }
        let top = &module[0];
        let Some(own) = layer_of(top) else {
            bad.push(format!("{name}: module `{top}` is in no layer of LAYERS"));
            continue;
        };
        if own != layer_of("storage").unwrap() {
            for line in &p.unsafe_lines {
                bad.push(format!("{name}:{line}: `unsafe` outside the storage layer"));
            }
        }
        let mut found: Vec<(usize, Vec<String>)> = p
            .named
            .iter()
            .filter_map(|n| from_root(&n.module, &n.path).map(|path| (n.line, path)))
            .collect();
        found.sort();
        found.dedup();
        for (line, path) in found {
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
                let nested = to.starts_with(module) || module.starts_with(&to);
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

/// Violations of a front end's rule in its `files` (`krate` names the crate).
fn front_end_violations(krate: &str, files: &[(PathBuf, String)]) -> Vec<String> {
    let mut bad = Vec::new();
    for (file, text) in &without_test_files(files) {
        let parsed = parse(file, &module_of(file), text);
        for n in &parsed.named {
            if n.path.first().is_some_and(|s| s == "tfrecord_lirs_format") {
                bad.push(format!(
                    "{krate}/{}:{}: a front end names the format crate (`{}`): reach it through the engine (`tfrecord_lirs`)",
                    file.display(),
                    n.line,
                    n.path.join("::")
                ));
            }
        }
    }
    bad.sort();
    bad.dedup();
    bad
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
        let lines = parse(file, &module_of(file), text).last_line;
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
    let (engine, pure) = (&without_test_files(engine), &without_test_files(pure));
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
    let (lib, text) = engine
        .iter()
        .find(|(f, _)| f == Path::new("lib.rs"))
        .unwrap();
    for module in parse(lib, &[], text).mods {
        assert!(
            module == "format" || layer_of(&module).is_some(),
            "lib.rs declares `{module}`, which is in no layer of LAYERS (tests/layers.rs)"
        );
    }
    let mut bad = violations(&engine, &pure);
    for krate in FRONT_ENDS {
        bad.extend(front_end_violations(
            krate,
            &sources(&crate_dir(krate).join("src")),
        ));
    }
    assert!(bad.is_empty(), "the layers are broken:\n{}", bad.join("\n"));
}

/// The `[dependencies]` table of a crate's manifest.
fn dependencies(krate: &str) -> String {
    let manifest = fs::read_to_string(crate_dir(krate).join("Cargo.toml")).unwrap();
    manifest
        .split("[dependencies]")
        .nth(1)
        .unwrap()
        .split("\n[")
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn the_pure_crate_depends_on_no_engine() {
    let deps = dependencies("tfrecord-lirs-format");
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
fn the_front_ends_depend_on_the_engine_not_the_format() {
    for krate in FRONT_ENDS {
        let deps = dependencies(krate);
        assert!(
            deps.lines()
                .any(|l| l.trim_start().starts_with("tfrecord-lirs ")
                    || l.trim_start().starts_with("tfrecord-lirs.")),
            "{krate} does not depend on the engine"
        );
        assert!(
            !deps
                .lines()
                .any(|l| l.trim_start().starts_with("tfrecord-lirs-format")),
            "{krate} depends on tfrecord-lirs-format: reach it through the engine"
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
        file("storage/mod.rs", "use crate::pool::spawn;\n// crate::read::Reader in a comment\nconst S: &str = \"crate::read\";\nfn f() { unsafe {} }\n"),
        file("read/mod.rs", "use crate::storage::{local, Storage};\nuse super::storage::x;\n#[cfg(test)]\nmod tests {\n    use crate::Reader;\n}\n"),
        file("read/a.rs", "use crate::read::b::B;\n"),
        file("read/b.rs", "pub struct B;\n"),
    ];
    let pure_clean = vec![file("order.rs", "use std::ops::Range;\n/// std::fs and std::io::Error in docs\nfn f() -> std::result::Result<(), std::fmt::Error> { Ok(()) }\n")];
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
        // As rustfmt wraps a long group.
        (
            "storage/mod.rs",
            "use crate::{\n    pool::spawn,\n    read::{\n        reader::Reader,\n        x,\n    },\n};\n",
            "storage/mod.rs:4: `storage` (layer 1) uses `crate::read::reader::Reader` of the higher layer",
        ),
        // In a macro's arguments, and in an inline module.
        (
            "storage/mod.rs",
            "fn f() { println!(\"{}\", crate::read::X); }\n",
            "of the higher layer",
        ),
        (
            "storage/mod.rs",
            "mod inner {\n    use super::super::read::x;\n}\n",
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
            "read/mod.rs",
            "fn f() { unsafe { g() } }\n",
            "`unsafe` outside the storage layer",
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
    // A test module in a file of its own is test code too.
    let mut with_tests = clean.clone();
    with_tests.push(file(
        "read/b/tests.rs",
        &format!("use crate::Reader;\n{long}"),
    ));
    with_tests.retain(|(p, _)| p != Path::new("read/b.rs"));
    with_tests.push(file(
        "read/b.rs",
        "pub struct B;\n#[cfg(test)]\nmod tests;\n",
    ));
    assert_eq!(violations(&with_tests, &pure_clean), Vec::<String>::new());
    let tested = format!("fn f() {{}}\n#[cfg(test)]\nmod tests {{\n{long}}}\n");
    assert_eq!(
        violations(&clean, &[file("long.rs", &tested)]),
        Vec::<String>::new()
    );

    let pure_planted: &[(&str, &str)] = &[
        ("use std::fs::File;\n", "std::fs"),
        ("use std::io::{self, Read};\n", "std::io::Read"),
        (
            "use std::io::{\n    ErrorKind,\n    Write,\n};\n",
            "x.rs:3: the pure crate names `std::io::Write`",
        ),
        ("use std::io::*;\n", "names `std::io`"),
        ("fn f() -> std::io::Result<()> { Ok(()) }\n", "io::Result"),
        (
            "use std::io;\nfn f() -> io::Result<()> { Ok(()) }\n",
            "io::Result",
        ),
        ("fn f(w: &mut dyn std::io::Write) {}\n", "io::Write"),
        ("use std::io::ErrorKind;\n", "std::io::ErrorKind"),
        (
            "fn f() -> Result<(), std::io::Error> { Ok(()) }\n",
            "std::io::Error",
        ),
        ("fn f() { unsafe {} }\n", "unsafe"),
        ("unsafe fn f() {}\n", "unsafe"),
        (
            "use tfrecord_lirs::Reader;\n",
            "names `tfrecord_lirs::Reader`",
        ),
    ];
    for (text, expect) in pure_planted {
        let bad = violations(&clean, &[file("x.rs", text)]);
        assert!(
            bad.iter().any(|b| b.contains(expect)),
            "{text:?} gave {bad:?}, not {expect:?}"
        );
    }

    assert_eq!(
        front_end_violations("cli", &[file("main.rs", "use tfrecord_lirs::Reader;\n")]),
        Vec::<String>::new()
    );
    for text in [
        "use tfrecord_lirs_format::order::OrderV2;\n",
        "use {\n    std::fs,\n    tfrecord_lirs_format::{\n        order::OrderV2,\n    },\n};\n",
        "fn f() { let _ = tfrecord_lirs_format::framing::HEADER; }\n",
    ] {
        let bad = front_end_violations("cli", &[file("main.rs", text)]);
        assert!(
            bad.iter().any(|b| b.contains("names the format crate")),
            "{text:?} gave {bad:?}"
        );
    }
}
