//! The Rust side of `make bench`: data generation, page-cache control, and the
//! measurements that need the core crate directly. Driven by `benchmarks/run_bench.py`;
//! every measurement prints one JSON object per line on stdout.
//!
//! ```text
//! lirs_bench gen-mix   OUT N SEED      plain TFRecord, kdd-like sizes (mean 362 B, sd 30 %)
//! lirs_bench gen-fixed OUT N SIZE      plain TFRecord, N payloads of SIZE bytes
//! lirs_bench gen-ids   OUT N SIZE      the same, each payload starting with its index
//!                                      (u64 LE), so a reader can check permutations
//! lirs_bench cache     drop|check FILE drop FILE from the page cache / count cached pages
//! lirs_bench pages     PLAIN PADDED    page reads per data page: instance vs page-aware
//! lirs_bench cold      FILE THREADS WINDOW DEPTH MAX_SECS
//!                                      cold cache, page-aware, O_DIRECT, Fetcher
//! lirs_bench micro     MIX TINY SECS   read(id), EpochOrder next(), epoch_order, CRC32C
//! lirs_bench limit     MIX ROUNDS      the gather limit (a plain loop over a map) and
//!                                      Reader::read_batch, interleaved, 1 thread
//! lirs_bench copy-limit FILE EPOCHS    the copy-out limit of a gen-ids file: a random
//!                                      permutation, 256 payloads per batch copied out
//!                                      of a map kept across epochs, no CRC, 1 thread
//! ```
//!
//! Build: `cargo build --release -p tfrecord-lirs --example lirs_bench`.

use std::hint::black_box;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tfrecord_lirs::{
    format, local, read_table, Backend, Batch, FetchOptions, Fetcher, MmapOptIn, OrderParams,
    Reader, ReaderOptions, TFRecordWriter,
};
// Benchmark-only page-cache tools (hidden from the library's API).
use tfrecord_lirs::local::page_cache::{cached_pages, drop_from_page_cache};

/// The mmap backend's opt-in, for the benchmark's own files.
fn mmap_opt_in() -> Option<MmapOptIn> {
    // SAFETY: the benchmark reads files it wrote itself, and nothing writes or
    // truncates them while they are mapped.
    Some(unsafe { MmapOptIn::new() })
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("gen-mix") if args.len() == 4 => {
            gen_mix(Path::new(&args[1]), parse(&args[2]), parse(&args[3]))
        }
        Some("gen-fixed") if args.len() == 4 => {
            gen_fixed(Path::new(&args[1]), parse(&args[2]), parse(&args[3]))
        }
        Some("gen-ids") if args.len() == 4 => {
            gen_ids(Path::new(&args[1]), parse(&args[2]), parse(&args[3]))
        }
        Some("copy-limit") if args.len() == 3 => copy_limit(Path::new(&args[1]), parse(&args[2])),
        Some("cache") if args.len() == 3 => cache(&args[1], Path::new(&args[2])),
        Some("pages") if args.len() == 3 => pages(Path::new(&args[1]), Path::new(&args[2])),
        Some("cold") if args.len() == 6 => cold(
            Path::new(&args[1]),
            parse(&args[2]) as usize,
            parse(&args[3]) as usize,
            parse(&args[4]) as usize,
            parse(&args[5]),
        ),
        Some("limit") if args.len() == 3 => limit(Path::new(&args[1]), parse(&args[2])),
        Some("micro") if args.len() == 4 => {
            micro(Path::new(&args[1]), Path::new(&args[2]), parse(&args[3]))
        }
        _ => {
            eprintln!("usage: see the module docs of crates/tfrecord-lirs/examples/lirs_bench.rs");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

fn parse(s: &str) -> u64 {
    s.parse()
        .unwrap_or_else(|_| panic!("expected a non-negative integer, got {s:?}"))
}

fn emit(value: serde_json::Value) {
    println!("{value}");
}

/// A small deterministic generator (64-bit LCG, top bits), enough for sizes and ids.
struct Lcg(u64);

impl Lcg {
    fn new(seed: u64) -> Lcg {
        Lcg(seed ^ 0x9e37_79b9_7f4a_7c15)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(0x5851_f42d_4c95_7f2d)
            .wrapping_add(0x1405_7b7e_f767_814f);
        let x = self.0;
        (x ^ (x >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9) ^ (x >> 32)
    }

    /// Uniform in (0, 1).
    fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Standard normal (Box–Muller, one of the pair).
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.unit(), self.unit());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// A pool of non-zero pseudo-random bytes that payloads are cut from.
fn byte_pool(len: usize, rng: &mut Lcg) -> Vec<u8> {
    (0..len).map(|_| 1 + (rng.next_u64() % 255) as u8).collect()
}

/// The kdd-like payload size: normal, mean 362 B, sd 30 % of the mean, at least 1 B.
fn kdd_size(rng: &mut Lcg) -> usize {
    (362.0 + 0.3 * 362.0 * rng.normal()).round().max(1.0) as usize
}

fn gen_mix(out: &Path, n: u64, seed: u64) -> Res<()> {
    let t = Instant::now();
    let mut rng = Lcg::new(seed);
    let pool = byte_pool(1 << 16, &mut rng);
    let mut w = TFRecordWriter::create(out)?;
    let mut payload_bytes = 0u64;
    for _ in 0..n {
        let len = kdd_size(&mut rng).min(pool.len());
        let at = rng.below((pool.len() - len + 1) as u64) as usize;
        w.write_instance(&pool[at..at + len])?;
        payload_bytes += len as u64;
    }
    let size = w.position();
    w.finish_synced(false)?;
    emit(json!({"what": "gen-mix", "records": n, "bytes": size,
                "payload_mean": payload_bytes as f64 / n.max(1) as f64,
                "secs": t.elapsed().as_secs_f64()}));
    Ok(())
}

fn gen_fixed(out: &Path, n: u64, size: u64) -> Res<()> {
    let t = Instant::now();
    let mut rng = Lcg::new(size);
    let pool = byte_pool(size as usize + 4096, &mut rng);
    let mut w = TFRecordWriter::create(out)?;
    for i in 0..n {
        let at = (i % 4096) as usize;
        w.write_instance(&pool[at..at + size as usize])?;
    }
    let bytes = w.position();
    w.finish_synced(false)?;
    emit(json!({"what": "gen-fixed", "records": n, "bytes": bytes,
                "secs": t.elapsed().as_secs_f64()}));
    Ok(())
}

fn gen_ids(out: &Path, n: u64, size: u64) -> Res<()> {
    if size < 8 {
        return Err("gen-ids: SIZE must be at least 8 (the index)".into());
    }
    let t = Instant::now();
    let mut rng = Lcg::new(size);
    let pool = byte_pool(size as usize + 4096, &mut rng);
    let mut w = TFRecordWriter::create(out)?;
    let mut payload = vec![0u8; size as usize];
    for i in 0..n {
        let at = (i % 4096) as usize;
        payload.copy_from_slice(&pool[at..at + size as usize]);
        payload[..8].copy_from_slice(&i.to_le_bytes());
        w.write_instance(&payload)?;
    }
    let bytes = w.position();
    w.finish_synced(false)?;
    emit(json!({"what": "gen-ids", "records": n, "bytes": bytes,
                "secs": t.elapsed().as_secs_f64()}));
    Ok(())
}

/// The copy-out limit of the large-record rows: what a reader that checks nothing can
/// do on one core. Each epoch is a fresh random permutation (seeded by the epoch) cut
/// into batches of 256; each batch's payloads are copied out of a map that stays
/// mapped across epochs into one reused buffer; the indices in the copies must form a
/// full permutation.
fn copy_limit(file: &Path, epochs: u64) -> Res<()> {
    const BATCH: usize = 256;
    let mapped = local::open(file, Backend::Mmap, mmap_opt_in())?;
    let map = mapped.mapped().ok_or("the mmap backend did not map")?;
    let offsets = read_table(&tfrecord_lirs::default_table_path(file))?;
    let n = offsets.len();
    let mut buf: Vec<u8> = Vec::new();
    let mut seen = vec![false; n];
    let mut secs = Vec::new();
    // Epoch 0 warms the map's page tables, untimed.
    for epoch in 0..=epochs {
        let mut ids: Vec<u64> = (0..n as u64).collect();
        let mut rng = Lcg::new(epoch + 1);
        for i in (1..n).rev() {
            ids.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
        }
        seen.iter_mut().for_each(|s| *s = false);
        let t = Instant::now();
        for batch in ids.chunks(BATCH) {
            buf.clear();
            let mut starts = [0usize; BATCH];
            for (k, &id) in batch.iter().enumerate() {
                let at = offsets[id as usize] as usize;
                let len = u64::from_le_bytes(map[at..at + 8].try_into()?) as usize;
                starts[k] = buf.len();
                buf.extend_from_slice(&map[at + 12..at + 12 + len]);
            }
            for &s in &starts[..batch.len()] {
                let index = u64::from_le_bytes(buf[s..s + 8].try_into()?) as usize;
                match seen.get_mut(index) {
                    Some(slot) if !*slot => *slot = true,
                    _ => {
                        return Err(
                            format!("epoch {epoch}: index {index} twice or out of range").into(),
                        )
                    }
                }
            }
            black_box(&buf);
        }
        let elapsed = t.elapsed().as_secs_f64();
        if !seen.iter().all(|&s| s) {
            return Err(format!("epoch {epoch} is not a full permutation").into());
        }
        if epoch > 0 {
            secs.push(elapsed);
        }
    }
    emit(json!({"what": "copy-limit", "records": n, "secs": secs}));
    Ok(())
}

fn cache(action: &str, file: &Path) -> Res<()> {
    match action {
        "drop" => drop_from_page_cache(file)?,
        "check" => {}
        other => return Err(format!("cache: expected drop or check, got {other}").into()),
    }
    let (cached, pages) = cached_pages(file)?;
    emit(
        json!({"what": "cache", "action": action, "file": file.display().to_string(),
                "cached_pages": cached, "pages": pages}),
    );
    Ok(())
}

fn open(file: &Path, backend: Backend) -> Res<Arc<Reader>> {
    let options = ReaderOptions {
        backend,
        mmap_opt_in: mmap_opt_in(),
        ..ReaderOptions::default()
    };
    Ok(Arc::new(Reader::open_one(file, None, &options)?))
}

/// Row 4: one epoch, instance-based (one `read` per id) and page-aware (a `Fetcher`, which
/// reads each page-aware unit with one coalesced read), on the plain and the padded file.
fn pages(plain: &Path, padded: &Path) -> Res<()> {
    for (label, file) in [("unpadded", plain), ("padded", padded)] {
        let reader = open(file, Backend::Pread)?;
        for page_aware in [false, true] {
            let params = OrderParams {
                seed: 11,
                page_aware,
                ..OrderParams::default()
            };
            let order = reader.epoch_order(&params)?;
            reader.reset_io_stats();
            let t = Instant::now();
            let mut records = 0u64;
            if page_aware {
                let options = FetchOptions {
                    threads: 2,
                    window: 256,
                    depth: 4,
                };
                let mut fetcher = Fetcher::new(Arc::clone(&reader), order, options)?;
                while let Some(batch) = fetcher.next_batch() {
                    records += batch?.len() as u64;
                }
            } else {
                let mut buf = Vec::new();
                for id in order {
                    black_box(reader.read_span_into(id, &mut buf)?);
                    records += 1;
                }
            }
            let secs = t.elapsed().as_secs_f64();
            let s = reader.io_stats();
            if records != reader.len() {
                return Err(
                    format!("{label}: epoch read {records} of {} ids", reader.len()).into(),
                );
            }
            emit(
                json!({"what": "pages", "file": label, "page_aware": page_aware,
                        "records": records, "reads": s.reads, "page_reads": s.page_reads,
                        "distinct_pages": s.distinct_pages, "data_pages": s.data_pages,
                        "page_reads_per_data_page": s.page_reads as f64 / s.data_pages as f64,
                        "secs": secs}),
            );
        }
    }
    Ok(())
}

/// Row 3: drop `file` from the page cache, check that it is out, then read a page-aware
/// epoch with `threads` parallel O_DIRECT readers until done or `max_secs` have passed.
fn cold(file: &Path, threads: usize, window: usize, depth: usize, max_secs: u64) -> Res<()> {
    drop_from_page_cache(file)?;
    let (cached_before, pages) = cached_pages(file)?;
    let reader = open(file, Backend::Direct)?;
    let params = OrderParams {
        seed: 5,
        page_aware: true,
        ..OrderParams::default()
    };
    let order = reader.epoch_order(&params)?;
    let options = FetchOptions {
        threads,
        window,
        depth,
    };
    reader.reset_io_stats();
    let mut fetcher = Fetcher::new(Arc::clone(&reader), order, options)?;
    let limit = Duration::from_secs(max_secs);
    let t = Instant::now();
    let (mut records, mut bytes) = (0u64, 0u64);
    while let Some(batch) = fetcher.next_batch() {
        let batch = batch?;
        records += batch.len() as u64;
        bytes += batch.payload_bytes() as u64;
        if t.elapsed() >= limit {
            break;
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let s = reader.io_stats();
    drop(fetcher);
    let (cached_after, _) = cached_pages(file)?;
    emit(
        json!({"what": "cold", "threads": threads, "window": window, "depth": depth,
                "cached_pages_before": cached_before, "pages": pages,
                "cached_pages_after": cached_after,
                "records": records, "epoch_records": reader.len(), "payload_bytes": bytes,
                "reads": s.reads, "page_reads": s.page_reads, "data_pages": s.data_pages,
                "secs": secs, "pages_per_sec": s.page_reads as f64 / secs,
                "records_per_sec": records as f64 / secs}),
    );
    Ok(())
}

/// Runs `f` (which does `ops` operations) repeatedly for about `secs` seconds; returns
/// the best time per operation in nanoseconds over the repetitions.
fn best_ns(ops: u64, secs: f64, mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    let mut best = f64::INFINITY;
    let mut reps = 0;
    while reps < 3 || start.elapsed().as_secs_f64() < secs {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed().as_nanos() as f64 / ops as f64);
        reps += 1;
        if reps >= 1000 {
            break;
        }
    }
    best
}

/// Row 7: micro-benchmarks of the core operations, each the best of repeated runs.
fn micro(mix: &Path, tiny: &Path, secs: u64) -> Res<()> {
    let budget = secs as f64;
    // read(id) at random ids of the hot kdd-like file, each backend.
    for (name, backend) in [
        ("default backend (auto)", Backend::Auto),
        ("pread", Backend::Pread),
        ("mmap", Backend::Mmap),
    ] {
        let reader = open(mix, backend)?;
        let mut rng = Lcg::new(3);
        let ids: Vec<u64> = (0..200_000u64.min(reader.len() * 4))
            .map(|_| rng.below(reader.len()))
            .collect();
        let mut err = None;
        let ns = best_ns(ids.len() as u64, budget, || {
            for &id in &ids {
                match reader.read(id) {
                    Ok(v) => {
                        black_box(v);
                    }
                    Err(e) => err = Some(e),
                }
            }
        });
        if let Some(e) = err {
            return Err(e.into());
        }
        emit(
            json!({"what": "micro", "name": format!("Reader::read(id), random ids, {name}"),
                    "ns_per_op": ns, "ops": ids.len(), "n": reader.len()}),
        );
    }

    // Epoch orders over the tiny file's ids (10M at full scale).
    let reader = open(tiny, Backend::Pread)?;
    let n = reader.len();
    for page_aware in [false, true] {
        let kind = if page_aware {
            "page-aware"
        } else {
            "instance-based"
        };
        let params = OrderParams {
            seed: 9,
            page_aware,
            ..OrderParams::default()
        };
        let mut epoch = 0;
        let mut err = None;
        let ns = best_ns(1, budget, || {
            epoch += 1;
            match reader.epoch_order(&OrderParams { epoch, ..params }) {
                Ok(o) => {
                    black_box(o);
                }
                Err(e) => err = Some(e),
            }
        });
        if let Some(e) = err {
            return Err(e.into());
        }
        emit(
            json!({"what": "micro", "name": format!("epoch_order creation ({kind})"),
                    "ns_per_op": ns, "ops": 1, "n": n}),
        );
        // next() alone: each repetition gets a fresh order, created outside the timing.
        let (mut best, start, mut reps) = (f64::INFINITY, Instant::now(), 0);
        while reps < 3 || (start.elapsed().as_secs_f64() < budget && reps < 100) {
            let order = reader.epoch_order(&params)?;
            let t = Instant::now();
            let mut sum = 0u64;
            for id in order {
                sum = sum.wrapping_add(id);
            }
            black_box(sum);
            best = best.min(t.elapsed().as_nanos() as f64 / n as f64);
            reps += 1;
        }
        emit(
            json!({"what": "micro", "name": format!("EpochOrder::next() ({kind})"),
                    "ns_per_op": best, "ops": n, "n": n}),
        );
    }

    // CRC32C (masked, as TFRecord uses it) on large buffers and on kdd-sized payloads.
    let mut rng = Lcg::new(1);
    let big = byte_pool(1 << 20, &mut rng);
    let ns = best_ns(1, budget, || {
        black_box(format::masked_crc32c(black_box(&big)));
    });
    emit(
        json!({"what": "micro", "name": "format::masked_crc32c, 1 MiB buffer",
                "ns_per_op": ns, "ops": 1, "bytes_per_op": big.len(),
                "gb_per_sec": big.len() as f64 / ns}),
    );
    let ns = best_ns((big.len() / 362) as u64, budget, || {
        for chunk in big.chunks_exact(362) {
            black_box(format::masked_crc32c(black_box(chunk)));
        }
    });
    emit(
        json!({"what": "micro", "name": "format::masked_crc32c, 362 B payloads",
                "ns_per_op": ns, "ops": big.len() / 362, "bytes_per_op": 362,
                "gb_per_sec": 362.0 / ns}),
    );
    Ok(())
}

/// The gather limit: what one core can do with a random permutation of a hot file, as a
/// plain loop with no library around it: the offset table, a memory map, the header's
/// and the payload's CRC32C, and a copy of each payload into one batch buffer (256 per
/// batch). `prefetch`: load the table entries 48 and the records 16 positions ahead
/// (the permutation is known). Returns the number of payload bytes (kept observable).
fn gather_epoch(
    map: &[u8],
    offsets: &[u64],
    ids: &[u64],
    prefetch: bool,
    crc: bool,
    buf: &mut Vec<u8>,
    ends: &mut Vec<usize>,
) -> Res<u64> {
    const TABLE_AHEAD: usize = 48;
    const RECORD_AHEAD: usize = 16;
    let mut total = 0u64;
    for window in ids.chunks(256) {
        buf.clear();
        ends.clear();
        for (k, &id) in window.iter().enumerate() {
            if prefetch {
                if let Some(&ahead) = window.get(k + TABLE_AHEAD) {
                    local::prefetch(&offsets[ahead as usize]);
                }
                if let Some(&ahead) = window.get(k + RECORD_AHEAD) {
                    let at = offsets[ahead as usize] as usize;
                    let end = (at + 12 + 400).min(map.len());
                    for line in (at & !63..end).step_by(64) {
                        local::prefetch(&map[line]);
                    }
                }
            }
            let at = offsets[id as usize] as usize;
            let header = &map[at..at + 12];
            let len = u64::from_le_bytes(header[..8].try_into()?) as usize;
            if crc {
                let want = u32::from_le_bytes(header[8..12].try_into()?);
                if format::masked_crc32c(&header[..8]) != want {
                    return Err(format!("length CRC mismatch at byte {at}").into());
                }
            }
            let payload = &map[at + 12..at + 12 + len];
            if crc {
                let tail = &map[at + 12 + len..at + 16 + len];
                let want = u32::from_le_bytes(tail.try_into()?);
                if format::masked_crc32c(payload) != want {
                    return Err(format!("payload CRC mismatch at byte {at}").into());
                }
            }
            buf.extend_from_slice(payload);
            ends.push(buf.len());
        }
        total += buf.len() as u64;
        black_box(&buf);
    }
    Ok(total)
}

/// The limit rows of `make bench` and `Reader::read_batch` on the same permutation (the
/// LIRS order of one epoch), 1 thread, interleaved over `rounds` rounds: ns per record,
/// min and median.
fn limit(mix: &Path, rounds: u64) -> Res<()> {
    let mapped = local::open(mix, Backend::Mmap, mmap_opt_in())?;
    let map = mapped.mapped().ok_or("the mmap backend did not map")?;
    let offsets = read_table(&tfrecord_lirs::default_table_path(mix))?;
    let auto = open(mix, Backend::Auto)?;
    let ids: Vec<u64> = auto
        .epoch_order(&OrderParams {
            seed: 7,
            ..OrderParams::default()
        })?
        .collect();
    let n = ids.len() as f64;
    let readers = [
        ("Reader::read_batch, default backend (auto)", auto.clone()),
        (
            "Reader::read_batch, backend pread",
            open(mix, Backend::Pread)?,
        ),
        (
            "Reader::read_batch, backend mmap",
            open(mix, Backend::Mmap)?,
        ),
    ];
    let gathers = [
        ("gather limit: mmap + CRC32C + copy, prefetch", true, true),
        (
            "gather limit: mmap + CRC32C + copy, no prefetch",
            false,
            true,
        ),
        ("gather limit: mmap + copy, no CRC, prefetch", true, false),
        (
            "gather limit: mmap + copy, no CRC, no prefetch",
            false,
            false,
        ),
    ];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); gathers.len() + readers.len()];
    let (mut buf, mut ends) = (Vec::new(), Vec::new());
    let mut batch = Batch::default();
    for _ in 0..rounds.max(1) {
        for (v, &(_, prefetch, crc)) in gathers.iter().enumerate() {
            let t = Instant::now();
            black_box(gather_epoch(
                map, &offsets, &ids, prefetch, crc, &mut buf, &mut ends,
            )?);
            times[v].push(t.elapsed().as_nanos() as f64 / n);
        }
        for (r, (_, reader)) in readers.iter().enumerate() {
            let t = Instant::now();
            for window in ids.chunks(256) {
                reader.read_batch(window, &mut batch)?;
                black_box(batch.payload_bytes());
            }
            times[gathers.len() + r].push(t.elapsed().as_nanos() as f64 / n);
        }
    }
    let names = gathers
        .iter()
        .map(|g| g.0)
        .chain(readers.iter().map(|r| r.0));
    for (name, mut t) in names.zip(times) {
        t.sort_by(f64::total_cmp);
        let median = t[t.len() / 2];
        emit(
            json!({"what": "limit", "name": name, "ns_per_rec_min": t[0],
                    "ns_per_rec_median": median, "rec_per_sec": 1e9 / median,
                    "records": ids.len(), "rounds": t.len(),
                    "auto_mapped": auto.is_mapped()}),
        );
    }
    Ok(())
}
