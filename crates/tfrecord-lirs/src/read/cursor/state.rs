//! Where a [`DatasetCursor`](super::walk::DatasetCursor) is, as a small value, and its
//! encoding in checkpoints ([`CursorState`]).

use crate::error::{Error, Result};
use tfrecord_lirs_format::order::OrderVersion;

use crate::read::fetch::ORDER_VERSION_1;

/// The order versions this library can walk (docs/FORMAT.md §5).
const KNOWN_ORDER_VERSIONS: &[u32] = &[ORDER_VERSION_1, 2];

/// Where a [`DatasetCursor`](super::walk::DatasetCursor) is: every position below `position` and every one in
/// `delivered_after` has been delivered, nothing else. A small value (positions, never
/// payloads); the order itself is recomputed from the options on restore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CursorState {
    /// The version of the order algorithm the positions are positions of.
    pub order_version: u32,
    /// The first position not delivered.
    pub position: u64,
    /// Positions past `position` already delivered (unordered delivery), ascending.
    pub delivered_after: Vec<u64>,
}

/// The first bytes of an encoded [`CursorState`].
const STATE_MAGIC: &[u8; 8] = b"LIRSCUR\0";
/// The version of the encoding (not of the order).
const STATE_ENCODING_VERSION: u32 = 1;
/// Magic, encoding version, order version, position, count of delivered positions.
const STATE_HEADER_BYTES: usize = 8 + 4 + 4 + 8 + 8;

impl Default for CursorState {
    fn default() -> Self {
        CursorState::start()
    }
}

impl CursorState {
    /// The start of an epoch (order version 1).
    pub fn start() -> CursorState {
        CursorState::start_of(OrderVersion::V1)
    }

    /// The start of an epoch of order `version`.
    pub fn start_of(version: OrderVersion) -> CursorState {
        CursorState {
            // 1 or 2: fits.
            order_version: version.number() as u32,
            position: 0,
            delivered_after: Vec::new(),
        }
    }

    /// The state a TensorFlow checkpoint holds under its `position` and
    /// `delivered_after` keys (signed integers; checkpoints predate order versions, so
    /// version 1). [`ErrorKind::DataLoss`](crate::ErrorKind::DataLoss) for a negative
    /// position or a delivered position before it.
    pub fn from_signed(position: i64, delivered_after: &[i64]) -> Result<CursorState> {
        let position = u64::try_from(position)
            .map_err(|_| Error::data_loss(format!("negative position {position}")))?;
        let delivered_after = delivered_after
            .iter()
            .map(|&p| {
                u64::try_from(p)
                    .ok()
                    .filter(|&p| p >= position)
                    .ok_or_else(|| {
                        Error::data_loss(format!(
                            "delivered position {p} before the restore position {position}"
                        ))
                    })
            })
            .collect::<Result<Vec<u64>>>()?;
        Ok(CursorState {
            order_version: ORDER_VERSION_1,
            position,
            delivered_after,
        })
    }

    /// The state as signed integers (the TensorFlow checkpoint convention): the
    /// position and the delivered positions past it.
    pub fn to_signed(&self) -> Result<(i64, Vec<i64>)> {
        let signed = |p: u64| {
            i64::try_from(p).map_err(|_| Error::internal(format!("position {p} overflows i64")))
        };
        Ok((
            signed(self.position)?,
            self.delivered_after
                .iter()
                .map(|&p| signed(p))
                .collect::<Result<_>>()?,
        ))
    }

    /// The state as bytes (little-endian): `LIRSCUR\0`, the encoding version (u32, 1),
    /// the order version (u32), the position (u64), the count of delivered positions
    /// (u64) and those positions (u64 each).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(STATE_HEADER_BYTES + 8 * self.delivered_after.len());
        out.extend_from_slice(STATE_MAGIC);
        out.extend_from_slice(&STATE_ENCODING_VERSION.to_le_bytes());
        out.extend_from_slice(&self.order_version.to_le_bytes());
        out.extend_from_slice(&self.position.to_le_bytes());
        out.extend_from_slice(&(self.delivered_after.len() as u64).to_le_bytes());
        for p in &self.delivered_after {
            out.extend_from_slice(&p.to_le_bytes());
        }
        out
    }

    /// Reads [`encode`](CursorState::encode)'s bytes;
    /// [`ErrorKind::DataLoss`](crate::ErrorKind::DataLoss) for bytes that are not a
    /// state (damaged or forged): a short or long buffer, another magic, an unknown
    /// encoding or order version, delivered positions that do not ascend past the
    /// position. (Positions past the epoch's end are caught on restore, which knows
    /// its length.)
    pub fn decode(bytes: &[u8]) -> Result<CursorState> {
        let header = bytes.get(..STATE_HEADER_BYTES).ok_or_else(|| {
            Error::data_loss(format!(
                "cursor state of {} bytes, shorter than its {STATE_HEADER_BYTES}-byte header",
                bytes.len()
            ))
        })?;
        if &header[..8] != STATE_MAGIC {
            return Err(Error::data_loss(
                "not a tfrecord-lirs cursor state (its first bytes are not LIRSCUR\\0)",
            ));
        }
        let u32_at = |at: usize| {
            let mut b = [0u8; 4];
            b.copy_from_slice(&header[at..at + 4]);
            u32::from_le_bytes(b)
        };
        let u64_of = |b: &[u8]| {
            let mut w = [0u8; 8];
            w.copy_from_slice(b);
            u64::from_le_bytes(w)
        };
        let encoding = u32_at(8);
        if encoding != STATE_ENCODING_VERSION {
            return Err(Error::data_loss(format!(
                "cursor state encoding version {encoding} is unknown (this library reads \
                 version {STATE_ENCODING_VERSION})"
            )));
        }
        let order_version = u32_at(12);
        if !KNOWN_ORDER_VERSIONS.contains(&order_version) {
            return Err(Error::data_loss(format!(
                "cursor state of order version {order_version}, which this library does not \
                 know (it knows {KNOWN_ORDER_VERSIONS:?})"
            )));
        }
        let position = u64_of(&header[16..24]);
        let count = u64_of(&header[24..32]);
        let rest = &bytes[STATE_HEADER_BYTES..];
        if u64::try_from(rest.len() / 8).ok() != Some(count) || !rest.len().is_multiple_of(8) {
            return Err(Error::data_loss(format!(
                "cursor state claims {count} delivered positions but holds {} bytes of them",
                rest.len()
            )));
        }
        let delivered_after: Vec<u64> = rest.chunks_exact(8).map(u64_of).collect();
        let state = CursorState {
            order_version,
            position,
            delivered_after,
        };
        if let Some(w) = state.delivered_after.windows(2).find(|w| w[0] >= w[1]) {
            return Err(Error::data_loss(format!(
                "cursor state's delivered positions do not ascend ({} then {})",
                w[0], w[1]
            )));
        }
        if let Some(&p) = state.delivered_after.first().filter(|&&p| p < position) {
            return Err(Error::data_loss(format!(
                "delivered position {p} before the restore position {position}"
            )));
        }
        Ok(state)
    }

    /// Checks the state against an epoch of `len` positions of order `version`.
    pub(crate) fn check(&self, len: u64, version: u32) -> Result<()> {
        if self.order_version != version {
            return Err(Error::data_loss(format!(
                "state of order version {}, but this order is version {version}",
                self.order_version
            )));
        }
        if self.position > len {
            return Err(Error::data_loss(format!(
                "position {} is past the end of this epoch ({len} instances)",
                self.position
            )));
        }
        if let Some(&p) = self.delivered_after.iter().find(|&&p| p >= len) {
            return Err(Error::data_loss(format!(
                "delivered position {p} is past the end of this epoch ({len} instances)"
            )));
        }
        if let Some(&p) = self.delivered_after.iter().find(|&&p| p < self.position) {
            return Err(Error::data_loss(format!(
                "delivered position {p} before the restore position {}",
                self.position
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_encode_and_decode() {
        let state = CursorState {
            order_version: 1,
            position: 7,
            delivered_after: vec![9, 12],
        };
        let bytes = state.encode();
        assert_eq!(bytes.len(), STATE_HEADER_BYTES + 16);
        assert_eq!(CursorState::decode(&bytes).unwrap(), state);
        assert_eq!(
            CursorState::decode(&CursorState::start().encode()).unwrap(),
            CursorState::start()
        );
    }

    #[test]
    fn damaged_or_forged_states_are_data_loss() {
        let good = CursorState {
            order_version: 1,
            position: 7,
            delivered_after: vec![9, 12],
        }
        .encode();
        let with = |at: usize, bytes: &[u8]| {
            let mut b = good.clone();
            b[at..at + bytes.len()].copy_from_slice(bytes);
            b
        };
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (good[..20].to_vec(), "shorter than its 32-byte header"),
            (
                good[..good.len() - 3].to_vec(),
                "claims 2 delivered positions",
            ),
            (
                [good.clone(), vec![0; 8]].concat(),
                "claims 2 delivered positions",
            ),
            (with(0, b"X"), "not a tfrecord-lirs cursor state"),
            (
                with(8, &2u32.to_le_bytes()),
                "encoding version 2 is unknown",
            ),
            (with(12, &9u32.to_le_bytes()), "order version 9"),
            (
                with(16, &10u64.to_le_bytes()),
                "delivered position 9 before the restore position 10",
            ),
            (with(40, &9u64.to_le_bytes()), "do not ascend (9 then 9)"),
        ];
        for (bytes, want) in cases {
            let e = CursorState::decode(&bytes).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::DataLoss, "{e}");
            assert!(e.to_string().contains(want), "{e} / {want}");
        }
    }

    #[test]
    fn signed_checkpoint_values() {
        let s = CursorState::from_signed(5, &[6, 9]).unwrap();
        assert_eq!((s.position, s.delivered_after.clone()), (5, vec![6, 9]));
        assert_eq!(s.to_signed().unwrap(), (5, vec![6, 9]));
        let e = CursorState::from_signed(-1, &[]).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::DataLoss);
        assert!(e.to_string().contains("negative position -1"), "{e}");
        let e = CursorState::from_signed(5, &[4]).unwrap_err();
        assert!(
            e.to_string()
                .contains("delivered position 4 before the restore position 5"),
            "{e}"
        );
        let e = CursorState::from_signed(5, &[-4]).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::DataLoss);
    }

    #[test]
    fn states_are_checked_against_the_epoch() {
        let state = |position, after: &[u64]| CursorState {
            order_version: 1,
            position,
            delivered_after: after.to_vec(),
        };
        assert!(state(10, &[]).check(10, 1).is_ok());
        for (s, want) in [
            (state(11, &[]), "position 11 is past the end"),
            (state(3, &[10]), "delivered position 10 is past the end"),
            (state(3, &[2]), "before the restore position 3"),
        ] {
            let e = s.check(10, 1).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::DataLoss);
            assert!(e.to_string().contains(want), "{e}");
        }
        let e = state(0, &[]).check(10, 2).unwrap_err();
        assert!(e.to_string().contains("order is version 2"), "{e}");
    }
}
