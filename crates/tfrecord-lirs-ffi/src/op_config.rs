//! What the kernels hand over, read into the bridge's configs: an op's attrs and scalar
//! inputs, and a checkpoint's values, each a [`NamedValue`] that C++ converted without
//! looking at its name. Which names exist, their types, which are required and what an
//! older checkpoint's absent key means are decided here, once.

use tfrecord_lirs::SeedRule;

use crate::{DatasetSeeds, FfiError, FfiResult, FilePath, IterationSeeds, NamedValue};

/// What to open: data files and their offset tables, and how to read them.
#[derive(Debug, Clone)]
pub struct ReaderConfig {
    pub files: Vec<FilePath>,
    /// Empty (→ the default table of every file), or one per file, where an empty
    /// path also means the default (see [`crate::rules::file_pairs`]).
    pub tables: Vec<FilePath>,
    /// The page size the files were padded to (checked as [`crate::rules::check_page_size`]).
    pub page_size: i64,
    pub verify_payload_crc: bool,
    /// "auto", "pread", "mmap" or "direct" (see [`crate::rules::parse_backend`]).
    pub backend: String,
    pub trust_table: bool,
    /// Build a missing offset table on open (the attr `index_missing`; a graph saved
    /// before it existed has none: the core's default).
    pub index_missing: bool,
    /// The local tier of URL reads: a directory (empty: not given, the core's rule
    /// [`tfrecord_lirs::options::cache`] then looks at the environment).
    pub cache_dir: Vec<u8>,
    /// The bound of `cache_dir` in bytes; -1: not given (see
    /// [`tfrecord_lirs::options::signed_cache_bytes`]).
    pub cache_bytes: i64,
    /// The reader is walked in a page-aware order (a LIRSDataset's `page_aware`; a
    /// LIRSRead op reads the ids it is given: false). See `ReaderOptions::page_aware`.
    pub page_aware: bool,
}

/// How a LIRSDataset walks every epoch, whatever its seeds and delivery order: the
/// order (`page_aware`, shard, `order_version`: 1 or 2), batching (`batch_size`, 0:
/// none; `drop_remainder`) and fetch threads (`num_parallel_reads`, -1: automatic), as
/// the op's inputs and attrs give them (Rust checks every field).
#[derive(Debug, Clone)]
pub struct WalkConfig {
    pub page_aware: bool,
    pub num_shards: i64,
    pub shard_index: i64,
    pub batch_size: i64,
    pub drop_remainder: bool,
    pub num_parallel_reads: i64,
    pub order_version: i64,
    /// "keep", "drop" or "pad" (docs/FORMAT.md §5.5: equal shards).
    pub shard_remainder: String,
}

/// One iteration of a LIRSDataset: the (`seed`, `seed2`) pair the iteration drew, the
/// (seed, epoch) it orders with and the rule that made them of it, `unordered`
/// delivery, and the dataset's walk.
#[derive(Debug, Clone)]
pub struct CursorConfig {
    pub seed: i64,
    pub seed2: i64,
    /// The order's seed and epoch ([`DatasetSeeds::order`]); a walk from a saved state
    /// (a checkpoint's `shard_state`, an epoch state) orders with the state's instead.
    pub order: (u64, u64),
    /// The run's seed rule, saved with the cursor's state.
    pub seed_rule: SeedRule,
    pub unordered: bool,
    /// Elastic resume: an epoch state (`combine_shard_states`) this iteration
    /// starts from, as shard `walk.shard_index` of `walk.num_shards`; empty: none.
    pub epoch_state: Vec<u8>,
    pub walk: WalkConfig,
}

/// A LIRSDataset as its op's inputs and attrs give it (Rust checks every field):
/// what to read, and how every iteration walks its epoch.
#[derive(Debug, Clone)]
pub struct DatasetConfig {
    pub reader: ReaderConfig,
    pub walk: WalkConfig,
    /// The op's seed pair, seed rule, `start_epoch` and `reshuffle_each_iteration`.
    pub seeds: DatasetSeeds,
    /// Elastic resume (`combine_shard_states`): the dataset's first iteration
    /// starts from this epoch state; empty: none.
    pub epoch_state: Vec<u8>,
    /// "true": deliver in order; "false": windows as their reads complete
    /// (unordered); "default": as the pipeline's options say (see `unordered`).
    pub deterministic: String,
}

/// A cursor's checkpoint values under TensorFlow's keys: `position`, and
/// `delivered_after` (positions past it already delivered), which is written only
/// when `has_delivered_after` (unordered delivery, or a state with such positions)
/// and may be absent from a checkpoint; `order_version`, the order algorithm the
/// state belongs to (0: the dataset's own, a fresh start; a checkpoint written
/// before order versions existed holds version 1).
#[derive(Debug, Clone)]
pub struct CursorCheckpoint {
    pub position: i64,
    pub has_delivered_after: bool,
    pub delivered_after: Vec<i64>,
    pub order_version: i64,
    /// The worker's state for elastic resume (`shard_state`) under the key
    /// `shard_state`: it also holds the epoch state the walk started from; empty
    /// in a checkpoint that predates it (the walk started at the epoch's start).
    pub shard_state: Vec<u8>,
}

/// The attrs and scalar inputs of `op`, by name.
pub(crate) struct OpArgs<'a> {
    op: &'static str,
    values: &'a [NamedValue],
}

impl<'a> OpArgs<'a> {
    /// `values`, each of which must be one of `known` (the op's registration and
    /// this list must agree: a name Rust does not read is a bug, not user input).
    pub(crate) fn new(
        op: &'static str,
        values: &'a [NamedValue],
        known: &[&str],
    ) -> FfiResult<Self> {
        if let Some(v) = values.iter().find(|v| !known.contains(&v.name.as_str())) {
            return Err(FfiError::internal(format!(
                "{op}: the op passed `{}`, which tfrecord-lirs does not read (the op \
                 library and its Rust core are from different builds?)",
                v.name
            )));
        }
        Ok(OpArgs { op, values })
    }

    pub(crate) fn get(&self, name: &str) -> FfiResult<&'a NamedValue> {
        self.values
            .iter()
            .find(|v| v.name == name)
            .ok_or_else(|| FfiError::internal(format!("{}: the op passed no `{name}`", self.op)))
    }

    pub(crate) fn int(&self, name: &str) -> FfiResult<i64> {
        match self.get(name)?.ints.as_slice() {
            [value] => Ok(*value),
            other => Err(FfiError::invalid(format!(
                "{}: `{name}` must be a scalar, got {} values",
                self.op,
                other.len()
            ))),
        }
    }

    pub(crate) fn bool(&self, name: &str) -> FfiResult<bool> {
        Ok(self.int(name)? != 0)
    }

    pub(crate) fn bytes(&self, name: &str) -> FfiResult<Vec<u8>> {
        let v = self.get(name)?;
        if !v.ints.is_empty() {
            return Err(FfiError::internal(format!(
                "{}: `{name}` must be a string",
                self.op
            )));
        }
        Ok(v.bytes.clone())
    }

    pub(crate) fn string(&self, name: &str) -> FfiResult<String> {
        Ok(String::from_utf8_lossy(&self.bytes(name)?).into_owned())
    }
}

/// The attrs every reading op takes (LIRSRead, LIRSDataset).
pub(crate) const READER_ATTRS: [&str; 6] = [
    "page_size",
    "backend",
    "trust_table",
    "index_missing",
    "cache_dir",
    "cache_bytes",
];

pub(crate) fn reader_config_of(
    args: &OpArgs,
    files: &[FilePath],
    tables: &[FilePath],
) -> FfiResult<ReaderConfig> {
    Ok(ReaderConfig {
        files: files.to_vec(),
        tables: tables.to_vec(),
        page_size: args.int("page_size")?,
        verify_payload_crc: true,
        backend: args.string("backend")?,
        trust_table: args.bool("trust_table")?,
        index_missing: match args.values.iter().any(|v| v.name == "index_missing") {
            true => args.bool("index_missing")?,
            false => tfrecord_lirs::options::defaults::INDEX_MISSING,
        },
        cache_dir: args.bytes("cache_dir")?,
        cache_bytes: args.int("cache_bytes")?,
        page_aware: false,
    })
}

/// The reader config of a LIRSRead op: its attrs `args`, `files` and their `tables`.
pub fn reader_config(
    args: &[NamedValue],
    files: &[FilePath],
    tables: &[FilePath],
) -> FfiResult<ReaderConfig> {
    reader_config_of(
        &OpArgs::new("LIRSRead", args, &READER_ATTRS)?,
        files,
        tables,
    )
}

/// The config of a LIRSDataset op: its attrs and scalar inputs `args` (all but the
/// seed generator, which the kernel's seed protocol takes), `files` and their
/// `tables`. A graph saved before `seed_rule` and `start_epoch` existed has neither:
/// rule 0 (what it did) and epoch 0.
pub fn dataset_config(
    args: &[NamedValue],
    files: &[FilePath],
    tables: &[FilePath],
) -> FfiResult<DatasetConfig> {
    const DATASET_ARGS: [&str; 15] = [
        "page_aware",
        "num_shards",
        "shard_index",
        "batch_size",
        "drop_remainder",
        "num_parallel_reads",
        "order_version",
        "shard_remainder",
        "epoch_state",
        "deterministic",
        "reshuffle_each_iteration",
        "seed",
        "seed2",
        "seed_rule",
        "start_epoch",
    ];
    let known: Vec<&str> = READER_ATTRS.iter().chain(&DATASET_ARGS).copied().collect();
    let args = OpArgs::new("LIRSDataset", args, &known)?;
    let absent_is_zero = |name: &str| {
        if args.values.iter().any(|v| v.name == name) {
            args.int(name)
        } else {
            Ok(0)
        }
    };
    let seeds = DatasetSeeds::new(
        (args.int("seed")?, args.int("seed2")?),
        absent_is_zero("seed_rule")?,
        absent_is_zero("start_epoch")?,
        args.bool("reshuffle_each_iteration")?,
    )?;
    let page_aware = args.bool("page_aware")?;
    Ok(DatasetConfig {
        seeds,
        reader: ReaderConfig {
            page_aware,
            ..reader_config_of(&args, files, tables)?
        },
        walk: WalkConfig {
            page_aware,
            num_shards: args.int("num_shards")?,
            shard_index: args.int("shard_index")?,
            batch_size: args.int("batch_size")?,
            drop_remainder: args.bool("drop_remainder")?,
            num_parallel_reads: args.int("num_parallel_reads")?,
            order_version: args.int("order_version")?,
            shard_remainder: args.string("shard_remainder")?,
        },
        epoch_state: args.bytes("epoch_state")?,
        deterministic: args.string("deterministic")?,
    })
}

/// The key of today's checkpoint state (besides the seed generator's
/// `num_random_samples`): one value, the worker's `shard_state`.
pub const SHARD_STATE_KEY: &str = "shard_state";

/// The keys a checkpoint may hold: [`SHARD_STATE_KEY`], or those of checkpoints
/// written before it existed.
pub const CHECKPOINT_KEYS: [&str; 6] = [
    SHARD_STATE_KEY,
    "seed",
    "seed2",
    "position",
    "order_version",
    "delivered_after",
];

/// The iteration seeds (`None`: in the `shard_state`) and the cursor checkpoint of the
/// values `saved` under [`CHECKPOINT_KEYS`] (the ones present). Today's checkpoints
/// hold only `shard_state`; older ones `seed`, `seed2` and `position`, then
/// `order_version` (absent: version 1, the only one then) and `delivered_after`
/// (absent: none).
pub fn checkpoint(
    saved: &[NamedValue],
    num_random_samples: i64,
) -> FfiResult<(Option<IterationSeeds>, CursorCheckpoint)> {
    let value = |key: &str| saved.iter().find(|v| v.name == key);
    let missing = |key: &str| {
        FfiError::new(
            crate::ErrorCode::DataLoss,
            format!(
                "the checkpoint holds neither `{SHARD_STATE_KEY}` nor `{key}`: it was not \
                 written by a LIRSDataset iterator"
            ),
        )
    };
    let scalar = |key: &str| -> FfiResult<Option<i64>> {
        match value(key).map(|v| v.ints.as_slice()) {
            None => Ok(None),
            Some([x]) => Ok(Some(*x)),
            Some(other) => Err(FfiError::new(
                crate::ErrorCode::DataLoss,
                format!(
                    "the checkpoint's `{key}` holds {} values, not one",
                    other.len()
                ),
            )),
        }
    };
    if let Some(state) = value(SHARD_STATE_KEY) {
        let checkpoint = CursorCheckpoint {
            position: 0,
            has_delivered_after: false,
            delivered_after: Vec::new(),
            order_version: 0,
            shard_state: state.bytes.clone(),
        };
        return Ok((None, checkpoint));
    }
    let seeds = IterationSeeds {
        seed: scalar("seed")?.ok_or_else(|| missing("seed"))?,
        seed2: scalar("seed2")?.ok_or_else(|| missing("seed2"))?,
        num_random_samples,
    };
    let delivered_after = value("delivered_after").map(|v| v.ints.clone());
    let checkpoint = CursorCheckpoint {
        position: scalar("position")?.ok_or_else(|| missing("position"))?,
        has_delivered_after: delivered_after.is_some(),
        delivered_after: delivered_after.unwrap_or_default(),
        order_version: scalar("order_version")?.unwrap_or(1),
        shard_state: Vec::new(),
    };
    Ok((Some(seeds), checkpoint))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    fn int(name: &str, value: i64) -> NamedValue {
        NamedValue {
            name: name.into(),
            ints: vec![value],
            bytes: Vec::new(),
        }
    }

    fn text(name: &str, value: &[u8]) -> NamedValue {
        NamedValue {
            name: name.into(),
            ints: Vec::new(),
            bytes: value.to_vec(),
        }
    }

    /// A LIRSDataset op's values as the kernel passes them (the registration's
    /// defaults, but for a few).
    fn dataset_args() -> Vec<NamedValue> {
        vec![
            int("reshuffle_each_iteration", 1),
            int("page_size", 8192),
            int("batch_size", 32),
            int("drop_remainder", 1),
            int("num_parallel_reads", -1),
            text("backend", b"pread"),
            int("trust_table", 0),
            text("deterministic", b"false"),
            int("order_version", 2),
            text("shard_remainder", b"pad"),
            text("epoch_state", b"\x00\x01"),
            int("page_aware", 1),
            int("num_shards", 4),
            int("shard_index", 3),
            text("cache_dir", b"/tmp/lirs-cache"),
            int("cache_bytes", 1 << 20),
            int("seed", 87_654_321),
            int("seed2", -3),
            int("seed_rule", 1),
            int("start_epoch", 4),
        ]
    }

    fn path(p: &str) -> FilePath {
        FilePath {
            bytes: p.as_bytes().to_vec(),
        }
    }

    #[test]
    fn every_dataset_value_lands_in_its_field() {
        let c = dataset_config(&dataset_args(), &[path("a"), path("b")], &[]).unwrap();
        assert_eq!(c.reader.files.len(), 2);
        assert!(c.reader.tables.is_empty());
        assert_eq!(c.reader.page_size, 8192);
        assert_eq!(c.reader.backend, "pread");
        assert!(!c.reader.trust_table && c.reader.verify_payload_crc);
        let w = &c.walk;
        assert!(w.page_aware && w.drop_remainder);
        // The reader knows its order, for the default backend's choice.
        assert!(c.reader.page_aware);
        assert_eq!((w.num_shards, w.shard_index), (4, 3));
        assert_eq!(
            (w.batch_size, w.num_parallel_reads, w.order_version),
            (32, -1, 2)
        );
        assert_eq!(c.epoch_state, b"\x00\x01");
        assert_eq!(c.deterministic, "false");
        assert_eq!(w.shard_remainder, "pad");
        assert_eq!(c.reader.cache_dir, b"/tmp/lirs-cache");
        assert_eq!(c.reader.cache_bytes, 1 << 20);
        assert_eq!(c.seeds.pair, (87_654_321, -3));
        assert_eq!(c.seeds.rule, SeedRule::OpSeed);
        assert!(c.seeds.reshuffle);
        assert_eq!(c.seeds.start_epoch, 4);
        // A graph saved before the seed rule and start_epoch: rule 0, epoch 0.
        let mut old = dataset_args();
        old.retain(|v| v.name != "seed_rule" && v.name != "start_epoch");
        let c = dataset_config(&old, &[path("a")], &[]).unwrap();
        assert_eq!((c.seeds.rule, c.seeds.start_epoch), (SeedRule::Fold, 0));
        let r = reader_config(
            &[
                int("page_size", 512),
                text("backend", b"auto"),
                int("trust_table", 1),
                text("cache_dir", b"/tmp/read-cache"),
                int("cache_bytes", 4096),
            ],
            &[path("a")],
            &[path("a.idx")],
        )
        .unwrap();
        assert_eq!(
            (r.page_size, r.backend.as_str(), r.trust_table),
            (512, "auto", true)
        );
        assert_eq!(r.tables[0].bytes, b"a.idx");
        assert_eq!(r.cache_dir, b"/tmp/read-cache");
        assert_eq!(r.cache_bytes, 4096);
    }

    #[test]
    fn values_the_op_and_rust_disagree_on_are_named() {
        let fails = |args: Vec<NamedValue>, code: ErrorCode, words: &str| {
            let err = dataset_config(&args, &[path("a")], &[]).unwrap_err();
            assert_eq!(err.code, code, "{}", err.message);
            assert!(err.message.contains(words), "{}", err.message);
        };
        let mut unknown = dataset_args();
        unknown.push(int("prefetch", 2));
        fails(unknown, ErrorCode::Internal, "`prefetch`");
        let mut missing = dataset_args();
        missing.retain(|v| v.name != "batch_size");
        fails(missing, ErrorCode::Internal, "no `batch_size`");
        let mut vector = dataset_args();
        vector.retain(|v| v.name != "num_shards");
        vector.push(NamedValue {
            ints: vec![1, 2],
            ..int("num_shards", 0)
        });
        fails(
            vector,
            ErrorCode::InvalidArgument,
            "`num_shards` must be a scalar, got 2",
        );
        let mut swapped = dataset_args();
        swapped.retain(|v| v.name != "backend");
        swapped.push(int("backend", 1));
        fails(swapped, ErrorCode::Internal, "`backend` must be a string");
        for (name, value, words) in [
            ("seed_rule", 3, "seed_rule must be 0 or 1, got 3"),
            (
                "start_epoch",
                -2,
                "start_epoch must be >= 0 and below 2**62, got -2",
            ),
        ] {
            let mut bad = dataset_args();
            bad.retain(|v| v.name != name);
            bad.push(int(name, value));
            fails(bad, ErrorCode::InvalidArgument, words);
        }
    }

    #[test]
    fn checkpoints_of_today_and_of_older_builds_are_told_apart() {
        let (seeds, c) = checkpoint(&[text("shard_state", b"state")], 9).unwrap();
        assert!(seeds.is_none());
        assert_eq!(c.shard_state, b"state");
        // Before order versions and unordered delivery existed.
        let oldest = [int("seed", 5), int("seed2", 7), int("position", 12)];
        let (seeds, c) = checkpoint(&oldest, 9).unwrap();
        let seeds = seeds.unwrap();
        assert_eq!(
            (seeds.seed, seeds.seed2, seeds.num_random_samples),
            (5, 7, 9)
        );
        assert_eq!((c.position, c.order_version), (12, 1));
        assert!(!c.has_delivered_after && c.shard_state.is_empty());
        let mut newer = oldest.to_vec();
        newer.push(int("order_version", 2));
        newer.push(NamedValue {
            ints: vec![14, 15],
            ..int("delivered_after", 0)
        });
        let (_, c) = checkpoint(&newer, 9).unwrap();
        assert_eq!(c.order_version, 2);
        assert!(c.has_delivered_after);
        assert_eq!(c.delivered_after, [14, 15]);
        for (values, words) in [(&[][..], "nor `seed`"), (&oldest[..2], "nor `position`")] {
            let err = checkpoint(values, 0).unwrap_err();
            assert_eq!(err.code, ErrorCode::DataLoss);
            assert!(err.message.contains(words), "{}", err.message);
        }
        let two = [
            int("seed", 1),
            int("seed2", 2),
            NamedValue {
                ints: vec![1, 2],
                ..int("position", 0)
            },
        ];
        let err = checkpoint(&two, 0).unwrap_err();
        assert_eq!(err.code, ErrorCode::DataLoss);
        assert!(
            err.message.contains("`position` holds 2 values"),
            "{}",
            err.message
        );
    }
}
