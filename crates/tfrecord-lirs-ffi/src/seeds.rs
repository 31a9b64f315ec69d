//! TensorFlow's seeds in the core's terms: the (seed, seed2) pair an iteration draws
//! from its seed generator, folded into the core's one u64 seed, and the pair as the
//! TensorFlow states of elastic resume hold it.

use crate::elastic::TfSeeds;
use crate::IterationSeeds;

/// Mapping from TensorFlow seeds onto the core's single u64 seed: the two int64 seeds
/// (TF's (seed, seed2) pair, or the pair a seed generator hands out for one
/// iteration) are folded with SplitMix64 so that every bit of both affects the result
/// and nearby pairs give unrelated seeds. The core's `epoch` stays 0: the seed
/// generator already gives every iteration its own pair (see
/// tf_op/lirs_dataset_op.cc).
pub(crate) fn mix_seeds(seed: i64, seed2: i64) -> u64 {
    fn splitmix(mut z: u64) -> u64 {
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    splitmix(splitmix(seed as u64) ^ (seed2 as u64))
}

impl From<TfSeeds> for IterationSeeds {
    fn from(seeds: TfSeeds) -> Self {
        IterationSeeds {
            seed: seeds.seed,
            seed2: seeds.seed2,
            num_random_samples: seeds.num_random_samples,
        }
    }
}

impl From<&IterationSeeds> for TfSeeds {
    fn from(seeds: &IterationSeeds) -> Self {
        TfSeeds {
            seed: seeds.seed,
            seed2: seeds.seed2,
            num_random_samples: seeds.num_random_samples,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix_seeds_spreads() {
        assert_ne!(mix_seeds(1, 2), mix_seeds(2, 1));
        assert_ne!(mix_seeds(0, 0), mix_seeds(0, 1));
        assert_eq!(mix_seeds(7, 9), mix_seeds(7, 9));
    }
}
