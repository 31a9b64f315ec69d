//! The command line's schema (clap): the commands, their flags and help text, and the
//! rules of single values (`--page-size`, `--num-shards`, `--order-version`,
//! `--window`), which are the core's, in the CLI's words. Rules that tie several
//! arguments together are in `usage.rs`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use tfrecord_lirs::options::defaults;
use tfrecord_lirs::text_index::TextIndexFormat;
use tfrecord_lirs::{OrderVersion, PageSize};

use crate::report::Failure;

#[derive(Parser)]
#[command(
    name = "tfrecord-lirs",
    version,
    about = "Random access and full-range shuffling for TFRecord files (LIRS)"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Keep the bytes read from object storage (s3://, gs://, ...) in this local
    /// directory, in blocks shared by every process that names it: an object read
    /// whole once is then read from local disk, with no request [default:
    /// $TFRECORD_LIRS_CACHE_DIR, else none]
    #[arg(long, global = true, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// The most bytes --cache-dir holds; the least recently used blocks are evicted
    /// past it [default: 34359738368 (32 GiB)]
    #[arg(long, global = true, value_name = "BYTES", value_parser = parse_cache_bytes)]
    pub cache_bytes: Option<u64>,
}

/// `--cache-bytes`: at least 1.
fn parse_cache_bytes(s: &str) -> Result<u64, String> {
    match s.parse::<u64>().map_err(|e| format!("{e}"))? {
        0 => Err("cache_bytes must be at least 1".to_string()),
        n => Ok(n),
    }
}

/// `--page-size`: a power of two from 512 to 16777216, else a usage error.
fn parse_page_size(s: &str) -> Result<u64, String> {
    let bytes: u64 = s.parse().map_err(|e| format!("{e}"))?;
    tfrecord_lirs::options::page_size(bytes)
        .map(PageSize::get)
        .map_err(|e| e.to_string())
}

/// `--num-shards`: at least 1 (the core's rule).
fn parse_num_shards(s: &str) -> Result<u64, String> {
    let n = s.parse::<u64>().map_err(|e| format!("{e}"))?;
    tfrecord_lirs::options::num_shards(n).map_err(|e| e.to_string())
}

/// `--reuse-factor`: a whole number >= 1 (the core's rule; "1.5" is refused).
fn parse_reuse_factor(s: &str) -> Result<u64, String> {
    let number = s.parse::<f64>().map_err(|e| format!("{e}"))?;
    tfrecord_lirs::options::reuse_factor(number).map_err(|e| e.to_string())
}

/// `--batch-size` of the refurbish schedule: >= 1.
fn parse_batch_size(s: &str) -> Result<u64, String> {
    match s.parse::<u64>().map_err(|e| format!("{e}"))? {
        0 => Err("batch_size must be >= 1, got 0".to_string()),
        n => Ok(n),
    }
}

/// `--order-version`: 1 or 2.
fn parse_order_version(s: &str) -> Result<OrderVersion, String> {
    let number = s.parse::<u64>().map_err(|e| format!("{e}"))?;
    tfrecord_lirs::options::order_version(number).map_err(|e| e.to_string())
}

/// `--window`: at least one record.
fn parse_window(s: &str) -> Result<usize, String> {
    let n = s.parse::<usize>().map_err(|e| format!("{e}"))?;
    tfrecord_lirs::options::best_fit_lookahead(n as u64).map_err(|e| e.to_string())?;
    Ok(n)
}

/// A page size `--page-size` gave (already checked by its parser) as the core's type.
pub fn page_size(bytes: u64) -> Result<PageSize, Failure> {
    tfrecord_lirs::options::page_size(bytes)
        .map_err(|e| Failure::Message(format!("--page-size: {e}")))
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FitArg {
    /// Streaming, keeps input order.
    Next,
    /// Bounded lookahead; may reorder.
    Best,
    /// Best fit if the padding pays for these records (it saves a larger share of page
    /// reads than the share of bytes it adds), else no padding; says what it chose.
    Auto,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompressionArg {
    /// A plain TFRecord file.
    None,
    /// A gzip stream (TFRecordOptions(compression_type="GZIP")).
    Gzip,
    /// A zlib stream (TFRecordOptions(compression_type="ZLIB")).
    Zlib,
}

/// The text index formats of other TFRecord readers (docs/FORMAT.md).
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum IndexFormatArg {
    /// NVIDIA DALI's `tfrecord2idx` (`offset size` per record).
    Dali,
    /// The `tfrecord` PyPI package's `tfrecord2idx` (`offset size` per record).
    TfrecordPy,
}

impl From<IndexFormatArg> for TextIndexFormat {
    fn from(arg: IndexFormatArg) -> TextIndexFormat {
        match arg {
            IndexFormatArg::Dali => TextIndexFormat::Dali,
            IndexFormatArg::TfrecordPy => TextIndexFormat::TfrecordPy,
        }
    }
}

#[derive(Subcommand)]
pub enum Command {
    /// Scan DATA (CRC-checked, fillers skipped), write its offset table, print the instance count.
    ///
    /// With `--from FORMAT INDEX`, the table is taken from a DALI or `tfrecord`-package
    /// text index and checked against DATA (every record's CRCs; each entry's offset and
    /// size; unlisted records must be fillers); a wrong index is an error naming its line.
    ///
    /// Several files (`index a b c`, or a shell glob) are indexed each to its own
    /// table, `--jobs` at a time: every file is done even if some fail, and a summary
    /// names each failure (exit status 1 if any failed).
    Index(IndexArgs),
    /// Write a DALI or `tfrecord`-package text index of DATA (instances only, fillers left
    /// out), print the instance count.
    Export(ExportArgs),
    /// Rewrite any TFRecord file (plain, GZIP or ZLIB) as a padded (page-aligned) file
    /// OUT plus OUT.offsets; prints the overhead and the page reads per instance,
    /// padded and unpadded.
    ///
    /// With several inputs, OUT is a directory: each input's copy is written into it
    /// under the input's file name, `--jobs` at a time, with a summary. An existing
    /// output is not replaced without --force.
    Pad(PadArgs),
    /// Check every record's CRCs, the table against the file, and padded-file invariants.
    ///
    /// Several files are checked `--jobs` at a time, with a summary naming each failure.
    Verify(VerifyArgs),
    /// Instance count, sizes, pages, fillers, padding.
    ///
    /// Several files are described one after the other (with --json: a JSON array).
    Info(InfoArgs),
    /// Write exactly the payload bytes of instance ID to stdout.
    Get(GetArgs),
    /// Print one epoch's shuffled instance ids, one per line.
    ///
    /// Several files (or a pattern) are one dataset, ids running through them in
    /// order: the order is exactly the one `Loader`/`Sampler` walk for the same files
    /// and seed.
    Order(OrderArgs),
}

// The arguments of each subcommand, in the order its help lists them. Plain comments,
// not doc comments: clap would take a struct's doc comment for help text, which is
// the variant's in `Command`.

// `index`.
#[derive(Args)]
pub struct IndexArgs {
    /// The TFRecord files (with --from: DATA INDEX, a data file and its text index).
    #[arg(required = true, value_name = "DATA")]
    pub data: Vec<PathBuf>,
    /// The format of the text index INDEX (the second argument).
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub from: Option<IndexFormatArg>,
    /// Where to write the table [default: DATA.offsets] (one DATA only).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Files worked on at once (0: automatic).
    #[arg(long, default_value_t = defaults::JOBS as usize)]
    pub jobs: usize,
    /// fsync the table and its directory before exiting (durable on power loss).
    #[arg(long)]
    pub sync: bool,
}

// `export`.
#[derive(Args)]
pub struct ExportArgs {
    /// The TFRecord file.
    pub data: PathBuf,
    /// Index format.
    #[arg(long, value_enum)]
    pub format: IndexFormatArg,
    /// Where to write the index, `-` for stdout [default: DATA.idx for dali,
    /// DATA without its extension + .tfindex for tfrecord-py].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// fsync the index and its directory before exiting (durable on power loss).
    #[arg(long)]
    pub sync: bool,
}

// `pad`.
#[derive(Args)]
pub struct PadArgs {
    /// Input TFRecord files (padded or not; their fillers are dropped).
    #[arg(required = true, value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,
    /// The output data file, or with several inputs (or an existing directory) the
    /// output directory.
    #[arg(value_name = "OUT")]
    pub output: PathBuf,
    /// Replace existing outputs.
    #[arg(long)]
    pub force: bool,
    /// Files worked on at once (0: automatic).
    #[arg(long, default_value_t = defaults::JOBS as usize)]
    pub jobs: usize,
    /// Page size in bytes: a power of two from 512 to 16777216.
    #[arg(long, default_value_t = defaults::PAGE_SIZE, value_parser = parse_page_size)]
    pub page_size: u64,
    /// Placement policy.
    #[arg(long, value_enum, default_value = defaults::FIT)]
    pub fit: FitArg,
    /// Best-fit lookahead, in instances (only with --fit best) [default: 1024].
    #[arg(long, value_parser = parse_window)]
    pub window: Option<usize>,
    /// fsync the data, the table and their directory before exiting (durable on
    /// power loss).
    #[arg(long)]
    pub sync: bool,
    /// How INPUT is compressed; GZIP and ZLIB input (as TensorFlow writes with
    /// TFRecordOptions) is decompressed as it is read [default: detected from its
    /// first bytes].
    #[arg(long, value_enum)]
    pub compression: Option<CompressionArg>,
    /// Take INPUT's instances from its table INPUT.offsets, trusted: for a file
    /// padded by another tool (e.g. the LIRS reference implementation), whose
    /// padding records a scan would take for instances.
    #[arg(long, conflicts_with = "compression")]
    pub trust_table: bool,
}

// `verify`.
#[derive(Args)]
pub struct VerifyArgs {
    /// The TFRecord files.
    #[arg(required = true, value_name = "DATA")]
    pub data: Vec<PathBuf>,
    /// The offset table [default: DATA.offsets] (one DATA only).
    #[arg(long)]
    pub offsets: Option<PathBuf>,
    /// Files worked on at once (0: automatic).
    #[arg(long, default_value_t = defaults::JOBS as usize)]
    pub jobs: usize,
    /// Check the padded-file invariants for this page size [default: the one the
    /// fillers end on, if the file has fillers].
    #[arg(long, value_parser = parse_page_size)]
    pub page_size: Option<u64>,
    /// Trust the table: instance i is the record at its offset i, and any records
    /// between (or before the first) are padding written by another tool (e.g. the
    /// LIRS reference implementation). Padding must still be valid records.
    #[arg(long)]
    pub trust_table: bool,
}

// `info`.
#[derive(Args)]
pub struct InfoArgs {
    /// The TFRecord files.
    #[arg(required = true, value_name = "DATA")]
    pub data: Vec<PathBuf>,
    /// The offset table [default: DATA.offsets, if it exists] (one DATA only).
    #[arg(long)]
    pub offsets: Option<PathBuf>,
    /// Files worked on at once (0: automatic).
    #[arg(long, default_value_t = defaults::JOBS as usize)]
    pub jobs: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Count pages and judge padding for this page size [default: the one the
    /// fillers end on, if the file has fillers].
    #[arg(long, value_parser = parse_page_size)]
    pub page_size: Option<u64>,
    /// Trust the table: instance i is the record at its offset i, and any records
    /// between (or before the first) are padding written by another tool (e.g. the
    /// LIRS reference implementation). Padding must still be valid records.
    #[arg(long)]
    pub trust_table: bool,
}

// `get`.
#[derive(Args)]
pub struct GetArgs {
    /// The TFRecord file.
    pub data: PathBuf,
    /// The instance id (0-based, file order).
    pub id: u64,
    /// The offset table [default: DATA.offsets].
    #[arg(long)]
    pub offsets: Option<PathBuf>,
    /// Trust the table: instance i is the record at its offset i, and any records
    /// between (or before the first) are padding written by another tool (e.g. the
    /// LIRS reference implementation). Padding must still be valid records.
    #[arg(long)]
    pub trust_table: bool,
    /// Build a missing offset table on open (as `index` would, kept beside DATA, else
    /// in --cache-dir, else in memory); false: a missing table is an error.
    #[arg(long, value_name = "BOOL", default_value_t = defaults::INDEX_MISSING, action = clap::ArgAction::Set)]
    pub index_missing: bool,
}

// `order`.
#[derive(Args)]
pub struct OrderArgs {
    /// The TFRecord files (ids run through them in this order, a pattern's matches
    /// sorted: the ids of `Loader`, `Sampler` and `DataSource` given the same files).
    #[arg(required = true, value_name = "DATA")]
    pub data: Vec<PathBuf>,
    /// The offset table [default: DATA.offsets] (one DATA only).
    #[arg(long)]
    pub offsets: Option<PathBuf>,
    /// Shuffle seed.
    #[arg(long)]
    pub seed: u64,
    /// Epoch number.
    #[arg(long, default_value_t = defaults::EPOCH)]
    pub epoch: u64,
    /// Shuffle whole pages (units of instances starting in the same page).
    #[arg(long)]
    pub page_aware: bool,
    /// Number of shards (workers); needs --shard-index.
    #[arg(
        long,
        default_value_t = defaults::NUM_SHARDS,
        requires = "shard_index",
        value_parser = parse_num_shards
    )]
    pub num_shards: u64,
    /// This shard's index, below --num-shards; needs --num-shards.
    #[arg(long, default_value_t = defaults::SHARD_INDEX, requires = "num_shards")]
    pub shard_index: u64,
    /// Page size for page-aware units.
    #[arg(long, default_value_t = defaults::PAGE_SIZE, value_parser = parse_page_size)]
    pub page_size: u64,
    /// Trust the table: instance i is the record at its offset i, and any records
    /// between (or before the first) are padding written by another tool (e.g. the
    /// LIRS reference implementation). Padding must still be valid records.
    #[arg(long)]
    pub trust_table: bool,
    /// Build a missing offset table on open (as `index` would, kept beside DATA, else
    /// in --cache-dir, else in memory); false: a missing table is an error.
    #[arg(long, value_name = "BOOL", default_value_t = defaults::INDEX_MISSING, action = clap::ArgAction::Set)]
    pub index_missing: bool,
    /// Order algorithm: 1 (Fisher-Yates, FORMAT.md 5.1-5.7) or 2 (keyed bijections in
    /// O(1) memory, FORMAT.md 5.8).
    // "1" is `defaults::ORDER_VERSION` (clap takes text here; tests/without_tf/test_contract.py
    // checks the `--help` default against the core).
    #[arg(long, default_value = "1", value_parser = parse_order_version)]
    pub order_version: OrderVersion,
    /// Print the refurbish schedule (FORMAT.md 7) instead: one line per position,
    /// `ID<TAB>refresh|reuse<TAB>GENERATION`; R epochs a partial output serves
    /// (an integer >= 1; 1 is this order, every id a refresh).
    #[arg(long, value_name = "R", value_parser = parse_reuse_factor, conflicts_with = "page_aware")]
    pub reuse_factor: Option<u64>,
    /// The refurbish schedule's batch: refreshes are spread evenly over its batches.
    #[arg(
        long,
        default_value_t = defaults::BATCH_SIZE as u64,
        requires = "reuse_factor",
        value_parser = parse_batch_size
    )]
    pub batch_size: u64,
}
