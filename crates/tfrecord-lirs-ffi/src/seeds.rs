//! TensorFlow's seeds in the core's terms: the (seed, seed2) pair an iteration draws
//! from its seed generator as the TensorFlow states of elastic resume hold it (the core
//! folds the pair into its one seed: `format::seed_pair`).

use crate::elastic::TfSeeds;
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

impl From<&IterationSeeds> for TfSeeds {
    fn from(seeds: &IterationSeeds) -> Self {
        TfSeeds {
            seed: seeds.seed,
            seed2: seeds.seed2,
            num_random_samples: seeds.num_random_samples,
        }
    }
}
