//! The benchmarks' S3 server, and a load generator to show it is not the limit.
//!
//! `serve`: a real S3 implementation (the `s3s` protocol crate over `s3s-fs`'s objects
//! in a directory), async on loopback, every object GET held a delay first: constant,
//! or a lognormal draw keyed by (seed, object, byte range), never by arrival order, so
//! the same reads wait the same in every run (as tests/latency.py's `KeyedLatency`).
//! `GET /_bench/stats` answers the GETs, HEADs and bytes served so far as JSON (the
//! benchmarks take the difference around each row).
//!
//! `load`: many ranged GETs in flight through `object_store` (the client the core
//! uses), to measure the GETs per second the server sustains.
//!
//! ```text
//! s3-bench-server serve --root DIR [--port 0] [--latency-ms 50 --sigma 0.8 --seed 11]
//! s3-bench-server load --endpoint http://127.0.0.1:PORT --bucket b --key k --requests 50000
//! ```

mod latency;
mod server;

use std::time::Instant;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(about = "The benchmarks' S3 server (s3s-fs with keyed latency) and its load generator")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serves the buckets under `--root` (one directory each) on 127.0.0.1.
    Serve {
        /// Directory of the buckets.
        #[arg(long)]
        root: std::path::PathBuf,
        /// Port (0: any free one; the port taken is printed).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// Median delay of each object GET, in milliseconds.
        #[arg(long, default_value_t = 0.0)]
        latency_ms: f64,
        /// Log-space sigma of the lognormal delay (0: constant).
        #[arg(long, default_value_t = 0.0)]
        sigma: f64,
        /// Seed of the lognormal draws.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Worker threads of the server's runtime.
        #[arg(long, default_value_t = 2)]
        threads: usize,
    },
    /// Ranged GETs of one object, many in flight; prints GET/s as JSON.
    Load {
        /// http://127.0.0.1:PORT of a `serve`.
        #[arg(long)]
        endpoint: String,
        #[arg(long)]
        bucket: String,
        #[arg(long)]
        key: String,
        /// GETs in all.
        #[arg(long, default_value_t = 50_000)]
        requests: usize,
        /// GETs in flight.
        #[arg(long, default_value_t = 256)]
        in_flight: usize,
        /// Bytes per GET.
        #[arg(long, default_value_t = 4096)]
        range_bytes: u64,
        /// Worker threads of the client's runtime.
        #[arg(long, default_value_t = 2)]
        threads: usize,
        /// Uploads an object of this many bytes as `--key` first (0: it is there).
        #[arg(long, default_value_t = 0)]
        put_bytes: usize,
        /// Reads the whole object front to back instead (`--requests` is then the
        /// object's ranges): a sequential reader's pattern.
        #[arg(long)]
        sequential: bool,
    },
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    match Cli::parse().command {
        Command::Serve {
            root,
            port,
            latency_ms,
            sigma,
            seed,
            threads,
        } => {
            let latency = latency::KeyedLatency::new(latency_ms, sigma, seed);
            runtime(threads)?.block_on(server::serve(root, port, latency))
        }
        Command::Load {
            endpoint,
            bucket,
            key,
            requests,
            in_flight,
            range_bytes,
            threads,
            put_bytes,
            sequential,
        } => runtime(threads)?.block_on(load(
            &endpoint,
            &bucket,
            &key,
            (requests, in_flight, range_bytes),
            (put_bytes, sequential),
        )),
    }
}

fn runtime(threads: usize) -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .enable_all()
        .build()
}

/// `requests` GETs of `range_bytes` at offsets spread over the object (a fixed stride,
/// so runs repeat), `in_flight` at a time.
async fn load(
    endpoint: &str,
    bucket: &str,
    key: &str,
    (requests, in_flight, range_bytes): (usize, usize, u64),
    (put_bytes, sequential): (usize, bool),
) -> Result<(), Box<dyn std::error::Error>> {
    use futures::StreamExt;
    use object_store::ObjectStore;
    let store = object_store::aws::AmazonS3Builder::new()
        .with_endpoint(endpoint)
        .with_bucket_name(bucket)
        .with_region("us-east-1")
        .with_allow_http(true)
        .with_skip_signature(true)
        .with_client_options(object_store::ClientOptions::new().with_allow_http(true))
        .build()?;
    let path = object_store::path::Path::from(key);
    if put_bytes > 0 {
        let bytes: Vec<u8> = (0..put_bytes).map(|i| (i % 251) as u8).collect();
        store.put(&path, bytes.into()).await?;
    }
    let size = store.head(&path).await?.size;
    let slots = size.div_ceil(range_bytes).max(1);
    let requests = if sequential {
        slots as usize
    } else {
        requests
    };
    let started = Instant::now();
    let mut bytes = 0u64;
    let mut gets = futures::stream::iter(0..requests as u64)
        .map(|i| {
            // A stride coprime with most slot counts: every slot, in a scattered order.
            let slot = if sequential { i } else { i.wrapping_mul(7919) % slots };
            let at = slot * range_bytes;
            let range = at..(at + range_bytes).min(size);
            let store = &store;
            let path = &path;
            async move { store.get_range(path, range).await }
        })
        .buffered(in_flight.max(1));
    while let Some(got) = gets.next().await {
        bytes += got?.len() as u64;
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{}",
        serde_json::json!({
            "requests": requests,
            "in_flight": in_flight,
            "range_bytes": range_bytes,
            "seconds": secs,
            "gets_per_second": requests as f64 / secs,
            "bytes": bytes,
        })
    );
    Ok(())
}
