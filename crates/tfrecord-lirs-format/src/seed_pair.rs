//! A pair of signed seeds (TensorFlow's `(seed, seed2)`, the pair a seed generator hands
//! out for one iteration) folded into the one `u64` seed the orders take. A contract:
//! the same pair gives the same order in every version (docs/FORMAT.md §5).

/// SplitMix64's increment (the golden ratio in 64 bits).
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// One SplitMix64 step from state `z`: every bit of `z` affects every bit of the result.
fn splitmix64(z: u64) -> u64 {
    let mut z = z.wrapping_add(GAMMA);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `splitmix64(splitmix64(seed) ⊕ seed2)`, the seeds as their two's-complement bits:
/// both seeds affect every bit, and nearby pairs give unrelated seeds.
pub fn seed_from_pair(seed: i64, seed2: i64) -> u64 {
    splitmix64(splitmix64(seed as u64) ^ (seed2 as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pair_folds_as_documented() {
        // Check values of docs/FORMAT.md §5 (a contract: TensorFlow iterators' orders
        // depend on them).
        assert_eq!(seed_from_pair(0, 0), 0xa706_dd2f_4d19_7e6f);
        assert_eq!(seed_from_pair(7, 9), 0x845c_0914_2154_9e4a);
        assert_eq!(seed_from_pair(-1, i64::MIN), 0xf7f1_454e_6a8a_1fa6);
    }

    #[test]
    fn nearby_pairs_differ() {
        assert_ne!(seed_from_pair(1, 2), seed_from_pair(2, 1));
        assert_ne!(seed_from_pair(0, 0), seed_from_pair(0, 1));
        assert_eq!(seed_from_pair(7, 9), seed_from_pair(7, 9));
    }
}
