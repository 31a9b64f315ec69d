//! The storage contract as checks: one set of cases, each run against any source of
//! positioned reads ([`ReadAt`]) through the function that opens it, so every storage
//! (each local backend, object storage, the block-cache tier, a front end's own file
//! systems) is held to the same reads, ranges, short files, missing files, sizes,
//! concurrent readers and cancelled requests.
//!
//! The caller puts [`fixtures`] under a base (a directory or a URL prefix) with its
//! own means, then calls [`run`] with that base and its opener; every case that does
//! not hold is one line in the answer. Public so the front ends can run the same cases
//! against the file systems only they reach (TensorFlow's, through Python).

use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use crate::error::{ErrorKind, Result};

use crate::storage::local::{read_full_from, Backend};
use crate::storage::ranged::ReadScope;
use crate::storage::{ReadAt, Storage};

/// Opens one path (or URL) of the storage under test.
pub type Open<'a> = dyn Fn(&Path) -> Result<Box<dyn ReadAt>> + Sync + 'a;

/// One case: `Err` says what did not hold.
pub type Case = fn(&str, &Open<'_>) -> std::result::Result<(), String>;

/// The bytes of the long fixture: past one block of the local tier (4 MiB), so a read
/// across a block boundary is among the cases.
pub const LONG: usize = (4 << 20) + 12_345;

/// The name under the base that no case writes: opening it must fail as missing.
pub const MISSING: &str = "missing.bin";

/// The files the cases read: (name under the base, bytes).
pub fn fixtures() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("empty.bin", Vec::new()),
        ("one.bin", pattern(1)),
        ("short.bin", pattern(4095)),
        ("long.bin", pattern(LONG)),
    ]
}

/// Bytes no shifted copy of themselves matches within a page or a block: a read at the
/// wrong offset is seen.
fn pattern(len: usize) -> Vec<u8> {
    let mut x: u32 = 0x9e37_79b9;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// Every case, by name.
pub const CASES: &[(&str, Case)] = &[
    ("whole_files", whole_files),
    ("ranges", ranges),
    ("at_and_past_the_end", at_and_past_the_end),
    ("short_files", short_files),
    ("missing_file", missing_file),
    ("concurrent_readers", concurrent_readers),
    ("ranged_requests", ranged_requests),
];

/// Runs every case against the fixtures under `base` (a directory or URL prefix; a
/// `/` is put between it and the names), opened by `open`; one line per case that
/// fails, `case: what`.
pub fn run(base: &str, open: &Open<'_>) -> Vec<String> {
    CASES
        .iter()
        .filter_map(|(name, case)| case(base, open).err().map(|e| format!("{name}: {e}")))
        .collect()
}

/// [`run`] over `storage`, each file opened as the readers open a file of one record
/// (the default backend): for the front ends that run the cases through their own
/// storage (the op library's bridge, Python's gfile).
pub fn run_over(base: &str, storage: &Storage) -> Vec<String> {
    run(base, &|p: &Path| storage.open(p, Backend::Auto, 1, None))
}

fn path(base: &str, name: &str) -> PathBuf {
    PathBuf::from(format!("{}/{name}", base.trim_end_matches('/')))
}

fn expected(name: &str) -> Vec<u8> {
    let all = fixtures();
    let (_, bytes) = all
        .into_iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_default();
    bytes
}

fn opened(base: &str, name: &str, open: &Open<'_>) -> std::result::Result<Box<dyn ReadAt>, String> {
    let p = path(base, name);
    open(&p).map_err(|e| format!("{}: open failed: {e}", p.display()))
}

/// `len` bytes at `offset`, read to the end of the range or of the file (short reads
/// continued).
fn read(src: &dyn ReadAt, offset: u64, len: usize) -> std::result::Result<Vec<u8>, String> {
    let mut buf = vec![0u8; len];
    let n = read_full_from(src, &mut buf, offset)
        .map_err(|e| format!("read of {len} bytes at {offset} failed: {e}"))?;
    buf.truncate(n);
    Ok(buf)
}

fn same(what: &str, got: &[u8], want: &[u8]) -> std::result::Result<(), String> {
    if got == want {
        return Ok(());
    }
    let first = got.iter().zip(want).position(|(a, b)| a != b);
    Err(format!(
        "{what}: {} bytes read, {} expected, first difference at {first:?}",
        got.len(),
        want.len()
    ))
}

/// Each fixture reads whole as its bytes; its size is its length; a mapped view, if
/// the backend gives one, holds the same bytes.
pub fn whole_files(base: &str, open: &Open<'_>) -> std::result::Result<(), String> {
    for (name, want) in fixtures() {
        let src = opened(base, name, open)?;
        if src.size() != want.len() as u64 {
            return Err(format!(
                "{name}: size {} for {} bytes",
                src.size(),
                want.len()
            ));
        }
        same(name, &read(&*src, 0, want.len())?, &want)?;
        if let Some(view) = src.map_view() {
            same(&format!("{name} (mapped)"), &view, &want)?;
        };
    }
    Ok(())
}

/// The ranges that are read: unaligned, across page and block boundaries, the last
/// bytes.
fn probe_ranges(len: u64) -> Vec<Range<u64>> {
    let block = 4 << 20;
    vec![
        0..1,
        1..4097,
        4095..4097,
        4096..8192,
        len / 3..len / 3 + 65_543,
        block - 100..block + 100,
        len - 10..len,
        len - 1..len,
    ]
}

/// Ranges anywhere in the file read as the file's bytes there.
pub fn ranges(base: &str, open: &Open<'_>) -> std::result::Result<(), String> {
    let want = expected("long.bin");
    let src = opened(base, "long.bin", open)?;
    for r in probe_ranges(want.len() as u64) {
        let got = read(&*src, r.start, (r.end - r.start) as usize)?;
        same(
            &format!("range {r:?}"),
            &got,
            &want[r.start as usize..r.end as usize],
        )?;
    }
    Ok(())
}

/// A read at the end, or past it, returns 0 bytes; one that starts before the end and
/// asks for more returns the bytes up to the end.
pub fn at_and_past_the_end(base: &str, open: &Open<'_>) -> std::result::Result<(), String> {
    let want = expected("short.bin");
    let len = want.len() as u64;
    let src = opened(base, "short.bin", open)?;
    for offset in [len, len + 1, len + 10_000] {
        let mut buf = [0u8; 64];
        match src.read_at(&mut buf, offset) {
            Ok(0) => {}
            Ok(n) => return Err(format!("read at {offset} of {len} bytes: {n} bytes, not 0")),
            Err(e) => return Err(format!("read at {offset} of {len} bytes failed: {e}")),
        }
    }
    let tail = read(&*src, len - 10, 100)?;
    same("read across the end", &tail, &want[want.len() - 10..])
}

/// An empty file has size 0 and reads 0 bytes; a one-byte file reads its byte.
pub fn short_files(base: &str, open: &Open<'_>) -> std::result::Result<(), String> {
    let empty = opened(base, "empty.bin", open)?;
    if empty.size() != 0 {
        return Err(format!("empty.bin: size {}", empty.size()));
    }
    let mut buf = [0u8; 8];
    match empty.read_at(&mut buf, 0) {
        Ok(0) => {}
        other => return Err(format!("empty.bin: read at 0 gave {other:?}")),
    }
    let one = opened(base, "one.bin", open)?;
    same("one.bin", &read(&*one, 0, 8)?, &expected("one.bin"))
}

/// Opening a file that does not exist is a `NotFound` error naming it.
pub fn missing_file(base: &str, open: &Open<'_>) -> std::result::Result<(), String> {
    let p = path(base, MISSING);
    match open(&p) {
        Ok(_) => Err(format!("{}: opened, but it does not exist", p.display())),
        Err(e) if e.kind() != ErrorKind::NotFound => Err(format!(
            "{}: kind {:?}, not NotFound: {e}",
            p.display(),
            e.kind()
        )),
        Err(e) if !e.to_string().contains(MISSING) => {
            Err(format!("the error does not name {}: {e}", p.display()))
        }
        Err(_) => Ok(()),
    }
}

/// Threads reading overlapping ranges of one source at once, and each of its own
/// source of the same file, all read the file's bytes.
pub fn concurrent_readers(base: &str, open: &Open<'_>) -> std::result::Result<(), String> {
    const THREADS: u64 = 8;
    let want = expected("long.bin");
    let len = want.len() as u64;
    let shared = opened(base, "long.bin", open)?;
    let check = |src: &dyn ReadAt, t: u64| -> std::result::Result<(), String> {
        for i in 0..16u64 {
            // Every thread's ranges overlap its neighbours'.
            let start = (t * 4093 + i * (len / 17)) % (len - 1);
            let end = (start + 70_001 + t * 31).min(len);
            let got = read(src, start, (end - start) as usize)?;
            same(
                &format!("thread {t}, range {start}..{end}"),
                &got,
                &want[start as usize..end as usize],
            )?;
        }
        Ok(())
    };
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let shared = &*shared;
                let check = &check;
                s.spawn(move || {
                    check(shared, t)?;
                    let own = opened(base, "long.bin", open)?;
                    check(&*own, t + THREADS)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a reading thread panicked".into()))
            })
            .collect::<std::result::Result<Vec<()>, String>>()
    })
    .map(drop)
}

/// The ranges' bytes through a source's requests ([`ReadAt::ranged`]), waiting for
/// the callback.
fn ranged_read(
    src: &dyn ReadAt,
    ranges: &[Range<u64>],
    scope: &ReadScope,
) -> Option<io::Result<Vec<Vec<u8>>>> {
    let ranged = src.ranged()?;
    let (tx, rx) = mpsc::channel();
    ranged.read_ranges(
        ranges,
        scope,
        Box::new(move |done| {
            let _ = tx.send(done.map(|parts| parts.iter().map(|p| p.to_vec()).collect()));
        }),
    );
    // The callback is dropped uncalled only when the scope is: not here.
    Some(
        rx.recv()
            .unwrap_or_else(|_| Err(io::Error::other("the callback was dropped uncalled"))),
    )
}

/// For a source read by requests: the ranges' bytes; a range past the end is an
/// `UnexpectedEof` error; requests dropped (their scope dropped) before they are
/// answered leave the source reading as before. Holds trivially for other sources.
pub fn ranged_requests(base: &str, open: &Open<'_>) -> std::result::Result<(), String> {
    let want = expected("long.bin");
    let len = want.len() as u64;
    let src = opened(base, "long.bin", open)?;
    let Some(ranged) = src.ranged() else {
        return Ok(());
    };
    let asked = probe_ranges(len);
    // Dropped at once: its requests are cancelled, the callback never called.
    {
        let scope = ReadScope::new(4);
        ranged.read_ranges(&asked, &scope, Box::new(|_| {}));
    }
    let scope = ReadScope::new(4);
    let parts = ranged_read(&*src, &asked, &scope)
        .unwrap_or_else(|| Err(io::Error::other("no longer ranged")))
        .map_err(|e| format!("ranged read failed: {e}"))?;
    for (r, got) in asked.iter().zip(&parts) {
        same(
            &format!("ranged {r:?}"),
            got,
            &want[r.start as usize..r.end as usize],
        )?;
    }
    let past = len - 5..len + 5;
    match ranged_read(&*src, std::slice::from_ref(&past), &scope) {
        Some(Err(e)) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(()),
        Some(other) => Err(format!(
            "a range past the end gave {:?}, not UnexpectedEof",
            other.map(|p| p.len())
        )),
        None => Err("no longer ranged".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    /// The fixtures in memory, read with a fault: `shift` moves every read by that
    /// many bytes; `eof_error` makes a read at or past the end an error.
    struct Faulty {
        bytes: Vec<u8>,
        shift: u64,
        eof_error: bool,
    }

    impl ReadAt for Faulty {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
            if self.eof_error && offset >= self.bytes.len() as u64 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "past the end"));
            }
            Ok(crate::storage::local::copy_out(
                &self.bytes,
                buf,
                offset + self.shift,
            ))
        }
        fn size(&self) -> u64 {
            self.bytes.len() as u64
        }
    }

    fn faulty(shift: u64, eof_error: bool, missing_kind: ErrorKind) -> Vec<String> {
        let open = move |p: &Path| -> Result<Box<dyn ReadAt>> {
            let name = p.file_name().unwrap().to_str().unwrap();
            if name == MISSING {
                return Err(match missing_kind {
                    ErrorKind::NotFound => Error::io(p, io::ErrorKind::NotFound.into()),
                    _ => Error::io(p, io::Error::other("gone")),
                });
            }
            let bytes = expected(name);
            Ok(Box::new(Faulty {
                bytes,
                shift,
                eof_error,
            }))
        };
        run("mem://x", &open)
    }

    #[test]
    fn a_sound_source_passes_and_each_fault_is_named() {
        assert_eq!(faulty(0, false, ErrorKind::NotFound), Vec::<String>::new());
        let shifted = faulty(1, false, ErrorKind::NotFound);
        assert!(
            shifted.iter().any(|f| f.starts_with("ranges:")),
            "{shifted:?}"
        );
        let eof = faulty(0, true, ErrorKind::NotFound);
        assert!(
            eof.iter().any(|f| f.starts_with("at_and_past_the_end:")),
            "{eof:?}"
        );
        let missing = faulty(0, false, ErrorKind::Internal);
        assert!(
            missing.iter().any(|f| f.starts_with("missing_file:")),
            "{missing:?}"
        );
    }
}
