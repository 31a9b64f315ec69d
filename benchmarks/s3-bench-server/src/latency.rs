//! Delays keyed on the request (the object and its byte range), never on arrival order.

use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// The delay of each GET: `median` constant (sigma 0), or a lognormal draw of that
/// median and log-space `sigma`, seeded by (seed, object, range).
#[derive(Debug, Clone, Copy)]
pub struct KeyedLatency {
    median_s: f64,
    sigma: f64,
    seed: u64,
}

impl KeyedLatency {
    pub fn new(median_ms: f64, sigma: f64, seed: u64) -> KeyedLatency {
        KeyedLatency {
            median_s: median_ms.max(0.0) / 1000.0,
            sigma: sigma.max(0.0),
            seed,
        }
    }

    /// How long the GET of `range` (the Range header, if any) of `object` waits.
    pub fn delay(&self, object: &str, range: Option<&str>) -> Duration {
        if self.median_s <= 0.0 {
            return Duration::ZERO;
        }
        if self.sigma == 0.0 {
            return Duration::from_secs_f64(self.median_s);
        }
        let mut rng = ChaCha8Rng::seed_from_u64(key_hash(self.seed, object, range));
        // Box-Muller: one standard normal from two uniforms in (0, 1].
        let uniform = |rng: &mut ChaCha8Rng| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let (u1, u2) = (1.0 - uniform(&mut rng), uniform(&mut rng));
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        Duration::from_secs_f64(self.median_s * (self.sigma * z).exp())
    }
}

/// FNV-1a (64 bits) of the seed, the object and the range: stable across runs and
/// builds, which is all a seed needs.
fn key_hash(seed: u64, object: &str, range: Option<&str>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let parts: [&[u8]; 5] = [
        &seed.to_le_bytes(),
        b"\0",
        object.as_bytes(),
        b"\0",
        range.unwrap_or("").as_bytes(),
    ];
    for byte in parts.iter().flat_map(|p| p.iter()) {
        h ^= u64::from(*byte);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_waits_the_same_every_time_and_requests_differ() {
        let l = KeyedLatency::new(50.0, 0.8, 11);
        let a = l.delay("b/x", Some("bytes=0-4095"));
        assert_eq!(a, l.delay("b/x", Some("bytes=0-4095")));
        assert_ne!(a, l.delay("b/x", Some("bytes=4096-8191")));
        assert_ne!(
            a,
            KeyedLatency::new(50.0, 0.8, 12).delay("b/x", Some("bytes=0-4095"))
        );
        let c = KeyedLatency::new(50.0, 0.0, 11);
        assert_eq!(c.delay("b/y", None), Duration::from_millis(50));
        // The median of many draws is near the median asked for.
        let mut d: Vec<f64> = (0..2001)
            .map(|i| l.delay("b/x", Some(&format!("bytes={i}-"))).as_secs_f64())
            .collect();
        d.sort_by(f64::total_cmp);
        assert!((0.040..0.060).contains(&d[1000]), "{}", d[1000]);
    }
}
