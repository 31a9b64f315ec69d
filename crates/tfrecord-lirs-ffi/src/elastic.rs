//! Elastic resume for the TensorFlow op: the core's [`core::ShardState`] and
//! [`core::EpochState`] (docs/FORMAT.md §6) with what TensorFlow needs besides: the
//! iteration's seed pair, the seed rule that made the core's seed and epoch of them
//! (`format::seed_pair`), and the seed generator's `num_random_samples`, so that the
//! iterations after the resumed one draw the seeds, and order by the rule, a fresh run
//! does.

use tfrecord_lirs as core;
use tfrecord_lirs::SeedRule;

/// The first bytes of a TensorFlow worker's state.
const TF_SHARD_MAGIC: &[u8; 8] = b"LIRSTFS\0";
/// The first bytes of a TensorFlow epoch state.
const TF_EPOCH_MAGIC: &[u8; 8] = b"LIRSTFE\0";
/// The first bytes of a TensorFlow iterator's state while it reads parts (splits).
const TF_PART_MAGIC: &[u8; 8] = b"LIRSTFP\0";
/// The version of the three encodings.
const TF_ENCODING_VERSION: u32 = 1;
/// Magic, encoding version, seed rule, seed, seed2, num_random_samples.
const TF_HEADER_BYTES: usize = 8 + 4 + 4 + 8 + 8 + 8;

/// The seed generator's place for one iteration: its seed pair, how many samples
/// the generator had drawn after drawing it, and the run's seed rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TfSeeds {
    /// The iteration's first seed.
    pub seed: i64,
    /// The iteration's second seed.
    pub seed2: i64,
    /// The generator's `num_random_samples` after drawing the pair.
    pub num_random_samples: i64,
    /// The rule the run's iterations order by (states written before rules had
    /// numbers held 0 in its place: [`SeedRule::Fold`], what they did).
    pub seed_rule: SeedRule,
}

impl TfSeeds {
    /// `seeds` of a run ordering by `seed_rule`.
    pub fn new(seeds: &crate::IterationSeeds, seed_rule: SeedRule) -> TfSeeds {
        TfSeeds {
            seed: seeds.seed,
            seed2: seeds.seed2,
            num_random_samples: seeds.num_random_samples,
            seed_rule,
        }
    }

    fn encode(&self, magic: &[u8; 8], inner: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(TF_HEADER_BYTES + inner.len());
        out.extend_from_slice(magic);
        out.extend_from_slice(&TF_ENCODING_VERSION.to_le_bytes());
        out.extend_from_slice(&self.seed_rule.number().to_le_bytes());
        for word in [self.seed, self.seed2, self.num_random_samples] {
            out.extend_from_slice(&word.to_le_bytes());
        }
        out.extend_from_slice(inner);
        out
    }

    /// The seeds and the rest of `bytes`, which start with `magic`.
    fn decode<'a>(
        bytes: &'a [u8],
        magic: &[u8; 8],
        what: &str,
    ) -> core::Result<(TfSeeds, &'a [u8])> {
        let header = bytes.get(..TF_HEADER_BYTES).ok_or_else(|| {
            core::Error::data_loss(format!(
                "{what} of {} bytes, shorter than its {TF_HEADER_BYTES}-byte header",
                bytes.len()
            ))
        })?;
        if &header[..8] != magic {
            return Err(core::Error::data_loss(format!(
                "not a LIRSDataset {what} (its first bytes are not {})",
                String::from_utf8_lossy(&magic[..7])
            )));
        }
        let word = |at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&header[at..at + 8]);
            i64::from_le_bytes(w)
        };
        let mut version = [0u8; 4];
        version.copy_from_slice(&header[8..12]);
        let version = u32::from_le_bytes(version);
        if version != TF_ENCODING_VERSION {
            return Err(core::Error::data_loss(format!(
                "{what} encoding version {version} is unknown (this library reads version \
                 {TF_ENCODING_VERSION})"
            )));
        }
        let mut rule = [0u8; 4];
        rule.copy_from_slice(&header[12..16]);
        let rule = u32::from_le_bytes(rule);
        let seed_rule = SeedRule::from_number(rule.into()).ok_or_else(|| {
            core::Error::data_loss(format!(
                "{what} of seed rule {rule}, which this library does not know (it knows 0 \
                 and 1: a newer library wrote it?)"
            ))
        })?;
        let seeds = TfSeeds {
            seed: word(16),
            seed2: word(24),
            num_random_samples: word(32),
            seed_rule,
        };
        Ok((seeds, &bytes[TF_HEADER_BYTES..]))
    }
}

/// One LIRSDataset iterator's state for elastic resume: its seeds and the core's
/// shard state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TfShardState {
    /// The iteration's seeds.
    pub seeds: TfSeeds,
    /// What the shard delivered.
    pub shard: core::ShardState,
}

impl TfShardState {
    /// `LIRSTFS\0`, the encoding version (u32, 1), the seed rule (u32; 0 in states
    /// written before rules had numbers, when these bytes were zero), seed, seed2,
    /// num_random_samples (i64 each), then [`core::ShardState::encode`].
    pub fn encode(&self) -> Vec<u8> {
        self.seeds.encode(TF_SHARD_MAGIC, &self.shard.encode())
    }

    /// Reads [`encode`](TfShardState::encode)'s bytes (`DataLoss` if damaged).
    pub fn decode(bytes: &[u8]) -> core::Result<TfShardState> {
        let (seeds, rest) = TfSeeds::decode(bytes, TF_SHARD_MAGIC, "shard state")?;
        Ok(TfShardState {
            seeds,
            shard: core::ShardState::decode(rest)?,
        })
    }
}

/// The state of an epoch for elastic resume of LIRSDatasets: the seeds of the
/// iteration every worker was in, and the core's epoch state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TfEpochState {
    /// The iteration's seeds.
    pub seeds: TfSeeds,
    /// What every shard delivered.
    pub state: core::EpochState,
}

impl TfEpochState {
    /// `LIRSTFE\0`, the encoding version (u32, 1), the seed rule (u32, as in
    /// [`TfShardState::encode`]), seed, seed2, num_random_samples (i64 each), then
    /// [`core::EpochState::encode`].
    pub fn encode(&self) -> Vec<u8> {
        self.seeds.encode(TF_EPOCH_MAGIC, &self.state.encode())
    }

    /// Reads [`encode`](TfEpochState::encode)'s bytes (`DataLoss` if damaged).
    pub fn decode(bytes: &[u8]) -> core::Result<TfEpochState> {
        let (seeds, rest) = TfSeeds::decode(bytes, TF_EPOCH_MAGIC, "epoch state")?;
        Ok(TfEpochState {
            seeds,
            state: core::EpochState::decode(rest)?,
        })
    }

    /// The epoch state after every worker's `shards` (all of one run and one
    /// iteration: the same seeds; see [`core::EpochState::combine`]).
    pub fn combine(shards: &[TfShardState]) -> core::Result<TfEpochState> {
        let seeds = shards
            .first()
            .map(|s| s.seeds)
            .ok_or_else(|| core::Error::invalid_argument("no shard states to combine"))?;
        if let Some(other) = shards.iter().find(|s| s.seeds != seeds) {
            return Err(core::Error::invalid_argument(format!(
                "shard {} was in another iteration (seeds {:?}) than shard {} ({:?}): \
                 the states of one iteration of every worker are needed",
                other.shard.shard_index, other.seeds, shards[0].shard.shard_index, seeds
            )));
        }
        let shards_states: Vec<core::ShardState> = shards.iter().map(|s| s.shard.clone()).collect();
        Ok(TfEpochState {
            seeds,
            state: core::EpochState::combine(&shards_states)?,
        })
    }
}

/// A LIRSDataset iterator's state while it reads parts of the epoch that a
/// coordinator hands out (tf.data service splits): its seeds, and the part it is in
/// with what it delivered of it (none before the first split).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TfPartState {
    /// The iteration's seeds.
    pub seeds: TfSeeds,
    /// The part being read and what was delivered of it (positions counted in the
    /// part).
    pub part: Option<(u64, core::CursorState)>,
}

impl TfPartState {
    /// `LIRSTFP\0`, the encoding version (u32, 1), the seed rule (u32), seed, seed2,
    /// num_random_samples (i64 each), then nothing (no part yet), or the part (u64)
    /// and [`core::CursorState::encode`].
    pub fn encode(&self) -> Vec<u8> {
        let mut inner = Vec::new();
        if let Some((part, state)) = &self.part {
            inner.extend_from_slice(&part.to_le_bytes());
            inner.extend_from_slice(&state.encode());
        }
        self.seeds.encode(TF_PART_MAGIC, &inner)
    }

    /// Reads [`encode`](TfPartState::encode)'s bytes (`DataLoss` if damaged).
    pub fn decode(bytes: &[u8]) -> core::Result<TfPartState> {
        let (seeds, rest) = TfSeeds::decode(bytes, TF_PART_MAGIC, "part state")?;
        if rest.is_empty() {
            return Ok(TfPartState { seeds, part: None });
        }
        let (part, state) = rest
            .split_first_chunk::<8>()
            .ok_or_else(|| core::Error::data_loss("part state: its part number is cut short"))?;
        Ok(TfPartState {
            seeds,
            part: Some((u64::from_le_bytes(*part), core::CursorState::decode(state)?)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(k: u64, seed: i64) -> TfShardState {
        let base = core::EpochState::fresh(
            100,
            &core::OrderParams {
                seed: 3,
                ..Default::default()
            },
            core::OrderVersion::V1,
        );
        TfShardState {
            seeds: TfSeeds {
                seed,
                seed2: 2,
                num_random_samples: 4,
                seed_rule: SeedRule::OpSeed,
            },
            shard: core::ShardState {
                base,
                num_shards: 2,
                shard_index: k,
                state: core::CursorState {
                    order_version: 1,
                    position: 10,
                    delivered_after: vec![],
                },
                remainder: Default::default(),
            },
        }
    }

    #[test]
    fn states_encode_decode_and_combine() {
        let (a, b) = (shard(0, 1), shard(1, 1));
        assert_eq!(TfShardState::decode(&a.encode()).unwrap(), a);
        let epoch = TfEpochState::combine(&[a, b]).unwrap();
        assert_eq!(epoch.state.delivered(), &[0..10, 50..60]);
        assert_eq!(TfEpochState::decode(&epoch.encode()).unwrap(), epoch);
        let e = TfEpochState::combine(&[shard(0, 1), shard(1, 9)]).unwrap_err();
        assert_eq!(e.kind(), core::ErrorKind::InvalidArgument);
        assert!(e.to_string().contains("another iteration"), "{e}");
        let e = TfEpochState::decode(&shard(0, 1).encode()).unwrap_err();
        assert_eq!(e.kind(), core::ErrorKind::DataLoss);
        assert!(
            e.to_string().contains("not a LIRSDataset epoch state"),
            "{e}"
        );
        let part = TfPartState {
            seeds: shard(0, 1).seeds,
            part: Some((17, shard(0, 1).shard.state)),
        };
        assert_eq!(TfPartState::decode(&part.encode()).unwrap(), part);
        let before = TfPartState {
            part: None,
            ..part.clone()
        };
        assert_eq!(TfPartState::decode(&before.encode()).unwrap(), before);
        let e = TfPartState::decode(&shard(0, 1).encode()).unwrap_err();
        assert!(
            e.to_string().contains("not a LIRSDataset part state"),
            "{e}"
        );
        let e = TfPartState::decode(&part.encode()[..44]).unwrap_err();
        assert!(e.to_string().contains("cut short"), "{e}");
        // The seed rule sits where states before it held 4 zero bytes: those read as
        // rule 0; a rule this library does not know is refused.
        let mut old = shard(0, 1).encode();
        assert_eq!(&old[12..16], &[1, 0, 0, 0]);
        old[12] = 0;
        let decoded = TfShardState::decode(&old).unwrap();
        assert_eq!(decoded.seeds.seed_rule, SeedRule::Fold);
        old[12] = 7;
        let e = TfShardState::decode(&old).unwrap_err();
        assert_eq!(e.kind(), core::ErrorKind::DataLoss);
        assert!(e.to_string().contains("seed rule 7"), "{e}");
        let e = TfShardState::decode(&shard(0, 1).encode()[..20]).unwrap_err();
        assert!(
            e.to_string().contains("shorter than its 40-byte header"),
            "{e}"
        );
    }
}
