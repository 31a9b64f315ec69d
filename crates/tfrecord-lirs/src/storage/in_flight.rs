//! The adaptive limit of requests in flight on object storage: a pure rule, fed the
//! answers as they come in and the time on the caller's clock (so tests drive it with
//! a made-up sequence), never reading a clock itself.
//!
//! The rule, additive increase and multiplicative decrease in rounds (as TCP's
//! congestion control; AWS CRT instead sizes its connections from a throughput target
//! the user gives and rations retries with a token bucket, and gcsfuse keeps a fixed
//! number): a round ends when as many requests as the limit have been answered, about
//! one latency. A round whose throughput (answers per second) held up, no more than
//! [`FALL`] below the best round so far, raises the limit: doubled while starting
//! ("slow start"), by an eighth after. A round whose throughput fell further goes back
//! to the limit of the best round (the storage or the network is overloaded) and ends
//! the start (a fall at that limit itself makes that round the best: the storage is
//! slower now). The storage throttling (429, 503, `SlowDown`) halves the limit, at most
//! once a round (one burst of refusals is one signal), and ends the start. The limit
//! stays within `[min, max]`.
//!
//! Why "held up" and not "grew": a raise shows in the answers a latency later, one
//! round behind, and a round's throughput under a lognormal latency varies by more than
//! the gain of a raise; a rule that asked for growth (10% a round) stalled at 64-128 in
//! flight where 2,048 ran 3-6x faster (`make bench` row 15, Loader, whole epochs).

/// A round's throughput may fall this far below the best round's and still raise the
/// limit (the noise between rounds under a lognormal latency must not stop it).
pub const FALL: f64 = 0.3;

/// The adaptive limit: see the module's rule.
#[derive(Debug, Clone)]
pub struct AdaptiveLimit {
    limit: usize,
    min: usize,
    max: usize,
    starting: bool,
    /// Best throughput of a round so far, answers per second.
    best: f64,
    /// When the round began (the caller's clock, nanoseconds) and answers in it.
    round_began: u64,
    round_answers: usize,
    /// Whether this round has already been cut for throttling.
    cut_this_round: bool,
    /// The limit of the best round: where a round that fell goes back to.
    best_limit: usize,
}

impl AdaptiveLimit {
    /// A limit of `start` within `[min, max]` (at least 1), the first round beginning
    /// at `now` (nanoseconds of the caller's clock).
    pub fn new(start: usize, min: usize, max: usize, now: u64) -> AdaptiveLimit {
        let min = min.max(1);
        let max = max.max(min);
        AdaptiveLimit {
            limit: start.clamp(min, max),
            min,
            max,
            starting: true,
            best: 0.0,
            round_began: now,
            round_answers: 0,
            cut_this_round: false,
            best_limit: start.clamp(min, max),
        }
    }

    /// The limit now.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// One request answered at `now` (nanoseconds, never before the last call's);
    /// `throttled`: the storage refused a request for load (429, 503, `SlowDown`) since
    /// the last call. Returns the limit after it.
    pub fn answered(&mut self, now: u64, throttled: bool) -> usize {
        if throttled && !self.cut_this_round {
            self.limit = (self.limit / 2).max(self.min);
            self.starting = false;
            self.cut_this_round = true;
        }
        self.round_answers += 1;
        if self.round_answers < self.limit {
            return self.limit;
        }
        let elapsed = now.saturating_sub(self.round_began).max(1) as f64 / 1e9;
        let throughput = self.round_answers as f64 / elapsed;
        if self.cut_this_round {
            // The round of a cut measures the new limit: the best from now on.
            (self.best, self.best_limit) = (throughput, self.limit);
        } else if throughput >= self.best * (1.0 - FALL) {
            if throughput > self.best {
                (self.best, self.best_limit) = (throughput, self.limit);
            }
            let step = if self.starting {
                self.limit
            } else {
                (self.limit / 8).max(1)
            };
            self.limit = self.limit.saturating_add(step).min(self.max);
        } else if self.limit == self.best_limit {
            // The best round's own limit fell: the storage is slower now, and this is
            // its best.
            self.starting = false;
            self.best = throughput;
        } else {
            self.starting = false;
            self.limit = self.best_limit;
        }
        self.round_began = now;
        self.round_answers = 0;
        self.cut_this_round = false;
        self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::AdaptiveLimit;

    const MS: u64 = 1_000_000;

    /// Answers at the throughput a storage of `latency_ms` serves with the limit in
    /// flight, capped at `capacity` answers per second: each answer arrives
    /// `1 / min(limit / latency, capacity)` after the last. Returns the limit after
    /// `answers` of them.
    fn drive(
        limit: &mut AdaptiveLimit,
        now: &mut u64,
        answers: usize,
        latency_ms: f64,
        capacity: f64,
        throttled: impl Fn(usize, usize) -> bool,
    ) -> Vec<usize> {
        let mut seen = Vec::new();
        for k in 0..answers {
            let rate = (limit.limit() as f64 / (latency_ms / 1e3)).min(capacity);
            *now += (1e9 / rate) as u64;
            let l = limit.limit();
            seen.push(limit.answered(*now, throttled(k, l)));
        }
        seen
    }

    #[test]
    fn grows_while_throughput_holds_up() {
        let mut now = 0;
        let mut limit = AdaptiveLimit::new(64, 8, 2048, now);
        // 50 ms a request, the storage serves at most 10,000 a second: the throughput
        // grows with the limit up to 500 in flight and holds beyond.
        let seen = drive(&mut limit, &mut now, 10_000, 50.0, 10_000.0, |_, _| false);
        // Doubled each round of answers: 64, 128, 256, ..., up to the most.
        assert_eq!(seen[63], 128);
        assert_eq!(seen[63 + 128], 256);
        assert_eq!(seen[63 + 128 + 256 + 512 + 1024], 2048);
        assert_eq!(*seen.last().unwrap(), 2048);
    }

    #[test]
    fn takes_back_a_raise_that_made_the_throughput_fall() {
        let mut now = 0;
        let mut limit = AdaptiveLimit::new(64, 8, 2048, now);
        // Past 300 in flight the storage thrashes: each answer takes longer the more
        // are in flight (throughput 300 / 50 ms * (300 / limit)^2).
        let mut seen = Vec::new();
        for _ in 0..40_000 {
            let l = limit.limit() as f64;
            let rate = if l <= 300.0 {
                l / 0.05
            } else {
                6000.0 * (300.0 / l).powi(2)
            };
            now += (1e9 / rate) as u64;
            seen.push(limit.answered(now, false));
        }
        // 64, 128, 256, 512 (the round at 256 held up), then the round at 512 fell:
        // back to 256, and from there by eighths, back to the best round's limit
        // whenever the throughput falls 30% below the best: near the knee, far below the
        // most.
        assert!(seen.contains(&512));
        let late = &seen[20_000..];
        let (low, high) = (late.iter().min().unwrap(), late.iter().max().unwrap());
        assert!(*low >= 256 && *high <= 512, "{low}..{high}");
    }

    #[test]
    fn stays_within_its_bounds() {
        let mut now = 0;
        let mut limit = AdaptiveLimit::new(64, 8, 300, now);
        let seen = drive(&mut limit, &mut now, 20_000, 50.0, f64::INFINITY, |_, _| {
            false
        });
        assert_eq!(*seen.last().unwrap(), 300);
        // Throttled on every answer: halved once a round, down to the minimum.
        let seen = drive(&mut limit, &mut now, 2_000, 50.0, f64::INFINITY, |_, _| {
            true
        });
        assert_eq!(seen[0], 150);
        assert_eq!(*seen.last().unwrap(), 8);
        assert!(seen.windows(2).all(|w| w[1] <= w[0]));
        // An answer at the same instant as the last: no division by zero.
        let mut limit = AdaptiveLimit::new(4, 1, 16, 0);
        for _ in 0..100 {
            limit.answered(0, false);
        }
        assert!(limit.limit() <= 16);
        assert_eq!(AdaptiveLimit::new(0, 0, 0, 0).limit(), 1);
    }

    #[test]
    fn backs_off_on_throttling_and_grows_again_by_steps() {
        let mut now = 0;
        let mut limit = AdaptiveLimit::new(512, 8, 2048, now);
        // Unbounded storage at first: 512 -> 1024 -> 2048.
        let seen = drive(
            &mut limit,
            &mut now,
            3 * 1024,
            50.0,
            f64::INFINITY,
            |_, _| false,
        );
        assert_eq!(*seen.last().unwrap(), 2048);
        // The limit halves, 2048 -> 1024 -> 512, then grows by an eighth a round and
        // halves again past 600.
        let seen = drive(&mut limit, &mut now, 30_000, 50.0, f64::INFINITY, |k, l| {
            l > 600 && k % 64 == 0
        });
        let low = seen.iter().copied().skip(5_000).min().unwrap();
        let high = seen.iter().copied().skip(5_000).max().unwrap();
        assert!(low >= 256 && high <= 600 + 600 / 8, "{low}..{high}");
        // It did come back up after a cut: additive steps of an eighth.
        assert!(seen.windows(2).any(|w| w[1] == w[0] + w[0] / 8));
    }

    #[test]
    fn a_burst_of_refusals_is_one_cut() {
        let mut limit = AdaptiveLimit::new(1000, 8, 2048, 0);
        // 50 refusals within one round: halved once.
        for k in 0..50 {
            limit.answered(k * MS, true);
        }
        assert_eq!(limit.limit(), 500);
    }
}
