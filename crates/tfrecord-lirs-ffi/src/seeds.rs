//! TensorFlow's seeds in the core's terms: the (seed, seed2) pair an iteration draws
//! from its seed generator as the TensorFlow states of elastic resume hold it, and
//! which seed and epoch an iteration orders with (the rule is `format::seed_pair`'s;
//! here, which epoch an iteration is, from the generator's count).

use tfrecord_lirs::SeedRule;

use crate::elastic::TfSeeds;
use crate::status::{FfiError, FfiResult};
use crate::IterationSeeds;

impl From<TfSeeds> for IterationSeeds {
    fn from(seeds: TfSeeds) -> Self {
        IterationSeeds {
            seed: seeds.seed,
            seed2: seeds.seed2,
            num_random_samples: seeds.num_random_samples,
        }
    }
}

/// Samples TensorFlow's reshuffling seed generator (`RandomSeedGenerator`, that of
/// ShuffleDatasetV3) draws for one iteration's pair.
const SAMPLES_PER_ITERATION: i64 = 2;

/// How a LIRSDataset's iterations take their seeds: its seed pair (the op's inputs),
/// the rule, the epoch its first iteration walks, and whether each iteration draws a
/// new pair (`reshuffle_each_iteration`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatasetSeeds {
    pub pair: (i64, i64),
    pub rule: SeedRule,
    pub start_epoch: u64,
    pub reshuffle: bool,
}

impl DatasetSeeds {
    /// The seeds of an op's values: `rule` a rule's number, `start_epoch` >= 0 (and
    /// small enough that its generator samples count in an i64).
    pub fn new(
        pair: (i64, i64),
        rule: i64,
        start_epoch: i64,
        reshuffle: bool,
    ) -> FfiResult<DatasetSeeds> {
        let rule = SeedRule::from_number(rule).ok_or_else(|| {
            FfiError::invalid(format!(
                "LIRSDataset: seed_rule must be 0 or 1, got {rule} (the op library is \
                 older than the graph?)"
            ))
        })?;
        let start_epoch = u64::try_from(start_epoch)
            .ok()
            .filter(|e| *e <= (i64::MAX / SAMPLES_PER_ITERATION) as u64)
            .ok_or_else(|| {
                FfiError::invalid(format!(
                    "LIRSDataset: start_epoch must be >= 0 and below 2**62, got {start_epoch}"
                ))
            })?;
        Ok(DatasetSeeds {
            pair,
            rule,
            start_epoch,
            reshuffle,
        })
    }

    /// The samples a newly made seed generator skips before the first iteration
    /// draws: the iterations before `start_epoch`, so that iteration `e` draws what
    /// iteration `start_epoch + e` of a dataset without it draws (nothing when every
    /// iteration takes the same pair).
    pub fn skipped_samples(&self) -> i64 {
        if self.reshuffle {
            self.start_epoch as i64 * SAMPLES_PER_ITERATION
        } else {
            0
        }
    }

    /// The epoch of the iteration that drew `drawn` (with the generator's count after
    /// the draw): the iterations drawn before it (counting those `skipped_samples`
    /// stood for), or `start_epoch` when every iteration takes the same pair.
    pub fn epoch(&self, drawn: &IterationSeeds) -> u64 {
        if !self.reshuffle {
            return self.start_epoch;
        }
        u64::try_from(drawn.num_random_samples / SAMPLES_PER_ITERATION - 1).unwrap_or(0)
    }

    /// The (seed, epoch) an iteration that drew `drawn` orders with under `rule` (the
    /// dataset's, or the one a restored checkpoint holds).
    pub fn order(&self, rule: SeedRule, drawn: &IterationSeeds) -> (u64, u64) {
        rule.order_seed(self.pair, (drawn.seed, drawn.seed2), self.epoch(drawn))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tfrecord_lirs::DEFAULT_GRAPH_SEED;

    fn drawn(num_random_samples: i64) -> IterationSeeds {
        IterationSeeds {
            seed: 7,
            seed2: 9,
            num_random_samples,
        }
    }

    #[test]
    fn iterations_are_epochs_of_the_op_seed() {
        let seeds = DatasetSeeds::new((DEFAULT_GRAPH_SEED, 42), 1, 0, true).unwrap();
        assert_eq!(seeds.skipped_samples(), 0);
        // The generator counts 2 samples per iteration: iteration e's count is 2(e+1).
        for e in 0..3u64 {
            let count = 2 * (e as i64 + 1);
            assert_eq!(seeds.order(SeedRule::OpSeed, &drawn(count)), (42, e));
            // A restored rule-0 run folds its pairs whatever the dataset's rule.
            assert_eq!(
                seeds.order(SeedRule::Fold, &drawn(count)),
                (tfrecord_lirs::seed_from_pair(7, 9), 0)
            );
        }
        let later = DatasetSeeds::new((DEFAULT_GRAPH_SEED, 42), 1, 5, true).unwrap();
        assert_eq!(later.skipped_samples(), 10);
        assert_eq!(later.order(SeedRule::OpSeed, &drawn(12)), (42, 5));
        let fixed = DatasetSeeds::new((DEFAULT_GRAPH_SEED, 42), 1, 5, false).unwrap();
        assert_eq!(fixed.skipped_samples(), 0);
        assert_eq!(fixed.order(SeedRule::OpSeed, &drawn(1)), (42, 5));
        assert_eq!(fixed.order(SeedRule::OpSeed, &drawn(9)), (42, 5));
    }

    #[test]
    fn bad_rules_and_start_epochs_are_named() {
        for (rule, start, words) in [
            (2, 0, "seed_rule must be 0 or 1, got 2"),
            (1, -1, "start_epoch must be >= 0 and below 2**62, got -1"),
            (1, i64::MAX, "start_epoch must be >= 0"),
        ] {
            let e = DatasetSeeds::new((0, 0), rule, start, true).unwrap_err();
            assert_eq!(e.code, crate::ErrorCode::InvalidArgument);
            assert!(e.message.contains(words), "{}", e.message);
        }
    }
}
