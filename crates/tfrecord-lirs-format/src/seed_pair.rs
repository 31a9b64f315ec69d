//! A pair of signed seeds (TensorFlow's `(seed, seed2)`, the pair a seed generator hands
//! out for one iteration) folded into the one `u64` seed the orders take, and the seed
//! rules that say which seed and epoch a TensorFlow iteration orders with. Contracts:
//! the same pair gives the same order in every version, and so does the same rule
//! (docs/FORMAT.md §5.9).

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

/// The first seed TensorFlow's `get_seed` gives an op seed when no global seed is set
/// (`tf.random.set_seed`): its `DEFAULT_GRAPH_SEED`. A dataset pair starting with it
/// carries the user's seed alone.
pub const DEFAULT_GRAPH_SEED: i64 = 87_654_321;

/// Which seed and epoch a TensorFlow iteration orders with, given its dataset's seed
/// pair (the op's inputs) and the pair the iteration drew from its seed generator. The
/// rule is part of the order's inputs: a graph, and a saved state, name theirs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeedRule {
    /// Rule 0, of graphs and states made before rules had numbers: every iteration
    /// orders with its drawn pair folded ([`seed_from_pair`]), epoch 0.
    Fold = 0,
    /// Rule 1: a dataset pair `(DEFAULT_GRAPH_SEED, s)` (an op seed without a global
    /// seed) orders with seed `s` (its bits as a `u64`) and the iteration's epoch, as
    /// the TensorFlow-free front ends do for seed `s`; any other pair as [`Fold`](SeedRule::Fold).
    OpSeed = 1,
}

impl SeedRule {
    /// The rule new graphs are made with.
    pub const CURRENT: SeedRule = SeedRule::OpSeed;

    /// The rule numbered `number`, `None` for a number no rule has.
    pub fn from_number(number: i64) -> Option<SeedRule> {
        match number {
            0 => Some(SeedRule::Fold),
            1 => Some(SeedRule::OpSeed),
            _ => None,
        }
    }

    /// The rule's number (what graphs and states hold).
    pub fn number(self) -> u32 {
        self as u32
    }

    /// The seed the user gave, when this rule orders with it: `dataset`'s second seed
    /// under [`OpSeed`](SeedRule::OpSeed) when its first is [`DEFAULT_GRAPH_SEED`].
    pub fn op_seed(self, dataset: (i64, i64)) -> Option<u64> {
        match self {
            SeedRule::OpSeed if dataset.0 == DEFAULT_GRAPH_SEED => Some(dataset.1 as u64),
            _ => None,
        }
    }

    /// The `(seed, epoch)` an iteration orders with: the op seed and `epoch` (the
    /// iteration's epoch) where [`op_seed`](SeedRule::op_seed) gives one, else the fold
    /// of the iteration's `drawn` pair and epoch 0 (each iteration draws its own pair).
    pub fn order_seed(self, dataset: (i64, i64), drawn: (i64, i64), epoch: u64) -> (u64, u64) {
        match self.op_seed(dataset) {
            Some(seed) => (seed, epoch),
            None => (seed_from_pair(drawn.0, drawn.1), 0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_give_the_documented_seeds_and_epochs() {
        // Check values of docs/FORMAT.md §5.9.
        let op = SeedRule::OpSeed;
        assert_eq!(op.order_seed((DEFAULT_GRAPH_SEED, 42), (7, 9), 3), (42, 3));
        assert_eq!(
            op.order_seed((DEFAULT_GRAPH_SEED, -1), (7, 9), 0),
            (u64::MAX, 0)
        );
        // A global seed (123): the drawn pair, folded, as rule 0 does for every pair.
        assert_eq!(
            op.order_seed((123, 42), (7, 9), 3),
            (0x845c_0914_2154_9e4a, 0)
        );
        assert_eq!(
            SeedRule::Fold.order_seed((DEFAULT_GRAPH_SEED, 42), (7, 9), 3),
            (0x845c_0914_2154_9e4a, 0)
        );
        assert_eq!(op.op_seed((0, 0)), None);
        for rule in [SeedRule::Fold, SeedRule::OpSeed] {
            assert_eq!(SeedRule::from_number(rule.number().into()), Some(rule));
        }
        assert_eq!(SeedRule::from_number(2), None);
        assert_eq!(SeedRule::from_number(-1), None);
        assert_eq!(SeedRule::CURRENT.number(), 1);
    }

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
