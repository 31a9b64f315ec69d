//! Order version 1 against version 2: nanoseconds per position, epoch-start time and the
//! anonymous memory an epoch order holds. Prints one line per measurement.
//!
//! ```text
//! order_bench gen   OUT N                   plain TFRecord of N 1-byte payloads + table
//! order_bench start FILE VERSION PAGE_AWARE NUM_SHARDS SHARD_INDEX
//!                                           one process per run: RssAnon before/after
//!                                           the order, the epoch start, and the shard read
//!                                           position by position
//! order_bench micro N SECS                  OrderV2 alone (no file): ns per position,
//!                                           sequential and random, both kinds
//! ```
//!
//! Build: `cargo build --release -p tfrecord-lirs --example order_bench`.

use std::hint::black_box;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use tfrecord_lirs::{
    build_offset_table, default_table_path, OrderParams, OrderV2, OrderVersion, Reader,
    ReaderOptions, TFRecordWriter,
};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("gen") if args.len() == 3 => gen(Path::new(&args[1]), parse(&args[2])),
        Some("start") if args.len() == 6 => start(
            Path::new(&args[1]),
            parse(&args[2]),
            parse(&args[3]) != 0,
            parse(&args[4]),
            parse(&args[5]),
        ),
        Some("micro") if args.len() == 3 => micro(parse(&args[1]), parse(&args[2])),
        _ => Err("usage: see the comment at the top of examples/order_bench.rs".into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("order_bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn parse(s: &str) -> u64 {
    s.parse().unwrap_or_else(|_| panic!("not a number: {s}"))
}

fn gen(out: &Path, n: u64) -> Res<()> {
    let t = Instant::now();
    let mut w = TFRecordWriter::create(out)?;
    for i in 0..n {
        w.write_instance(&[i as u8])?;
    }
    w.finish_synced(false)?;
    build_offset_table(out, &default_table_path(out))?;
    println!("gen {n} records in {:.1} s", t.elapsed().as_secs_f64());
    Ok(())
}

/// This thread's CPU time so far, in ns (`/proc/thread-self/schedstat`): on a loaded
/// machine it counts only the time the thread ran, unlike the wall clock.
fn cpu_ns() -> Res<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat")?;
    Ok(stat
        .split_whitespace()
        .next()
        .ok_or("empty schedstat")?
        .parse()?)
}

/// This process's anonymous resident memory (RssAnon), in bytes.
fn rss_anon() -> Res<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status
        .lines()
        .find(|l| l.starts_with("RssAnon:"))
        .ok_or("no RssAnon in /proc/self/status")?;
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .ok_or("bad RssAnon line")?
        .parse()?;
    Ok(kb * 1024)
}

fn start(file: &Path, version: u64, page_aware: bool, k: u64, i: u64) -> Res<()> {
    let version = OrderVersion::from_number(version)?;
    let reader = Reader::open_one(file, None, &ReaderOptions::default())?;
    let params = OrderParams {
        seed: 1,
        epoch: 0,
        page_aware,
        num_shards: k,
        shard_index: i,
    };
    let before = rss_anon()?;
    let (t, cpu) = (Instant::now(), cpu_ns()?);
    let mut order = reader.epoch_order_with_version(&params, version)?;
    let (start_secs, start_cpu) = (t.elapsed().as_secs_f64(), cpu_ns()? - cpu);
    let after = rss_anon()?;
    let len = order.len();
    let (t, cpu) = (Instant::now(), cpu_ns()?);
    let mut sum = 0u64;
    for id in &mut order {
        sum = sum.wrapping_add(id);
    }
    let (walk, walk_cpu) = (t.elapsed(), cpu_ns()? - cpu);
    black_box(sum);
    let per = |ns: u128| ns as f64 / len.max(1) as f64;
    println!(
        "v{} page_aware={page_aware} shard {i}/{k}: N={} shard={len} epoch start {:.6} s \
         (CPU {:.6} s), RssAnon +{:.1} MB held by the order, walk {:.2} ns/position \
         (CPU {:.2})",
        version.number(),
        reader.len(),
        start_secs,
        start_cpu as f64 / 1e9,
        (after.saturating_sub(before)) as f64 / 1e6,
        per(walk.as_nanos()),
        per(u128::from(walk_cpu)),
    );
    Ok(())
}

/// Runs `f` over batches until `secs` have passed; returns ns per position.
fn per_position(secs: u64, batch: u64, mut f: impl FnMut(u64) -> u64) -> f64 {
    let deadline = Duration::from_secs(secs);
    let t = Instant::now();
    let mut positions = 0u64;
    let mut round = 0u64;
    while t.elapsed() < deadline {
        black_box(f(round));
        positions += batch;
        round += 1;
    }
    t.elapsed().as_nanos() as f64 / positions as f64
}

fn micro(n: u64, secs: u64) -> Res<()> {
    const WINDOW: u64 = 4096;
    for (page_aware, c) in [(false, 1u64), (true, 24)] {
        let params = OrderParams {
            seed: 1,
            page_aware,
            ..Default::default()
        };
        let t = Instant::now();
        let order = OrderV2::new(n, c, &params)?;
        let start_ns = t.elapsed().as_nanos();
        let windows = (order.len() / WINDOW).max(1);
        let mut out = Vec::with_capacity(WINDOW as usize);
        let sequential = per_position(secs, WINDOW, |round| {
            let lo = (round % windows) * WINDOW;
            out.clear();
            order
                .ids_into(lo..(lo + WINDOW).min(order.len()), &mut out)
                .unwrap();
            out[out.len() - 1]
        });
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let random = per_position(secs, 1, |_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            order.id_at(x % order.len()).unwrap()
        });
        println!(
            "v2 micro N={n} page_aware={page_aware} C={c}: start {start_ns} ns, \
             sequential {sequential:.2} ns/position, random id_at {random:.2} ns"
        );
    }
    Ok(())
}
