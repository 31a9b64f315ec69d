//! The byte encodings of the elastic-resume states (docs/FORMAT.md §6): an
//! [`EpochState`] (`LIRSEPO\0`, versions 1 and 2) and a worker's [`ShardState`]
//! (`LIRSSHP\0`, versions 1 and 2). Damaged or forged bytes are `DataLoss`.

use crate::error::{Error, Result};
use tfrecord_lirs_format::dataset_identity::DatasetIdentity;
use tfrecord_lirs_format::order::OrderVersion;
use tfrecord_lirs_format::shard_remainder::ShardRemainder;

use crate::read::cursor::state::CursorState;

use super::{EpochState, ShardState};

/// The first bytes of an encoded [`EpochState`].
const EPOCH_STATE_MAGIC: &[u8; 8] = b"LIRSEPO\0";
/// The first bytes of an encoded [`ShardState`].
const SHARD_MAGIC: &[u8; 8] = b"LIRSSHP\0";
/// The encoding versions an epoch state is read in: 1 (no dataset identity) and 2
/// (the dataset's identity after the ranges), written when the state has one.
const EPOCH_STATE_VERSIONS: [u32; 2] = [1, 2];
/// The encoding versions a worker's state is read in: 1 (`Keep` shards) and 2 (the
/// shards' remainder rule in the word version 1 left zero), the one written.
const SHARD_STATE_VERSIONS: [u32; 2] = [1, 2];
/// Magic, encoding version, order version, seed, epoch, page-aware (u64), instances,
/// count of delivered ranges.
const EPOCH_STATE_HEADER_BYTES: usize = 8 + 4 + 4 + 8 + 8 + 8 + 8 + 8;
/// Magic, encoding version, padding, shards, shard index, bytes of the epoch state.
const SHARD_HEADER_BYTES: usize = 8 + 4 + 4 + 8 + 8 + 8;

impl EpochState {
    /// The state as bytes (little-endian): `LIRSEPO\0`, the encoding version (u32:
    /// 2 with a dataset, 1 without), the order version (u32), seed, epoch, page-aware
    /// (0 or 1), instances, the count of delivered ranges (u64 each), the ranges
    /// (start, end; u64 each), then (version 2) the dataset
    /// ([`DatasetIdentity::encode_into`]).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(EPOCH_STATE_HEADER_BYTES + 16 * self.delivered.len());
        out.extend_from_slice(EPOCH_STATE_MAGIC);
        let version = EPOCH_STATE_VERSIONS[usize::from(self.dataset.is_some())];
        out.extend_from_slice(&version.to_le_bytes());
        // 1 or 2: fits.
        out.extend_from_slice(&(self.order_version.number() as u32).to_le_bytes());
        for word in [
            self.seed,
            self.epoch,
            u64::from(self.page_aware),
            self.instances,
            self.delivered.len() as u64,
        ] {
            out.extend_from_slice(&word.to_le_bytes());
        }
        for r in &self.delivered {
            out.extend_from_slice(&r.start.to_le_bytes());
            out.extend_from_slice(&r.end.to_le_bytes());
        }
        if let Some(dataset) = &self.dataset {
            dataset.encode_into(&mut out);
        }
        out
    }

    /// Reads [`encode`](EpochState::encode)'s bytes;
    /// [`ErrorKind::DataLoss`](crate::ErrorKind::DataLoss) for bytes that are not a
    /// state (damaged or forged).
    pub fn decode(bytes: &[u8]) -> Result<EpochState> {
        let (mut input, encoding) = Words::new(
            bytes,
            EPOCH_STATE_MAGIC,
            "epoch state",
            &EPOCH_STATE_VERSIONS,
        )?;
        let order_version = OrderVersion::from_number(u64::from(input.u32()?))
            .map_err(|e| Error::data_loss(format!("epoch state: {e}")))?;
        let seed = input.u64()?;
        let epoch = input.u64()?;
        let page_aware = match input.u64()? {
            0 => false,
            1 => true,
            v => {
                return Err(Error::data_loss(format!(
                    "epoch state's page-aware flag is {v}, not 0 or 1"
                )))
            }
        };
        let instances = input.u64()?;
        let count = input.u64()?;
        let ranges_bytes = u128::from(count) * 16;
        let held = input.rest().len() as u128;
        // Version 1 ends with the ranges; version 2 has the dataset after them.
        if held < ranges_bytes || (encoding == 1 && held != ranges_bytes) {
            return Err(Error::data_loss(format!(
                "epoch state claims {count} delivered ranges but holds {} bytes of them",
                input.rest().len()
            )));
        }
        let mut delivered = Vec::new();
        let mut last_end = None;
        for _ in 0..count {
            let (start, end) = (input.u64()?, input.u64()?);
            if start >= end || end > instances || last_end.is_some_and(|e| start <= e) {
                return Err(Error::data_loss(format!(
                    "epoch state's delivered range {start}..{end} is empty, overlaps or \
                     touches the one before, or passes its {instances} instances"
                )));
            }
            last_end = Some(end);
            delivered.push(start..end);
        }
        let dataset = match encoding {
            1 => None,
            _ => {
                let (dataset, rest) = DatasetIdentity::decode_from(input.rest(), "epoch state")?;
                if !rest.is_empty() || dataset.instances() != instances {
                    return Err(Error::data_loss(format!(
                        "epoch state of {instances} instances names files of {} instances \
                         and has {} bytes after them",
                        dataset.instances(),
                        rest.len()
                    )));
                }
                Some(dataset)
            }
        };
        Ok(EpochState {
            order_version,
            seed,
            epoch,
            page_aware,
            instances,
            dataset,
            delivered,
        })
    }
}

impl ShardState {
    /// The state as bytes (little-endian): `LIRSSHP\0`, the encoding version (u32,
    /// 2), the remainder rule (u32: 0 keep, 1 drop, 2 pad; version 1 has 0 there), the
    /// shard count, the shard index, the length of the encoded base (u64), the base
    /// ([`EpochState::encode`]) and the cursor state ([`CursorState::encode`]).
    pub fn encode(&self) -> Vec<u8> {
        let base = self.base.encode();
        let mut out = Vec::with_capacity(SHARD_HEADER_BYTES + base.len() + 64);
        out.extend_from_slice(SHARD_MAGIC);
        out.extend_from_slice(&SHARD_STATE_VERSIONS[1].to_le_bytes());
        let rule: u32 = match self.remainder {
            ShardRemainder::Keep => 0,
            ShardRemainder::Drop => 1,
            ShardRemainder::Pad => 2,
        };
        out.extend_from_slice(&rule.to_le_bytes());
        for word in [self.num_shards, self.shard_index, base.len() as u64] {
            out.extend_from_slice(&word.to_le_bytes());
        }
        out.extend_from_slice(&base);
        out.extend_from_slice(&self.state.encode());
        out
    }

    /// Reads [`encode`](ShardState::encode)'s bytes;
    /// [`ErrorKind::DataLoss`](crate::ErrorKind::DataLoss) for bytes that are not a
    /// shard's state.
    pub fn decode(bytes: &[u8]) -> Result<ShardState> {
        let (mut input, _) = Words::new(bytes, SHARD_MAGIC, "shard state", &SHARD_STATE_VERSIONS)?;
        // Version 1 has zeros here: `Keep`.
        let remainder = match input.u32()? {
            0 => ShardRemainder::Keep,
            1 => ShardRemainder::Drop,
            2 => ShardRemainder::Pad,
            v => {
                return Err(Error::data_loss(format!(
                    "shard state's remainder rule is {v}, not 0, 1 or 2"
                )))
            }
        };
        let num_shards = input.u64()?;
        let shard_index = input.u64()?;
        crate::options::shard(num_shards, shard_index)
            .map_err(|e| Error::data_loss(format!("shard state: {e}")))?;
        let base_len = input.u64()?;
        let rest = input.rest();
        let base_len = usize::try_from(base_len)
            .ok()
            .filter(|&n| n <= rest.len())
            .ok_or_else(|| {
                Error::data_loss(format!(
                    "shard state claims an epoch state of {base_len} bytes but holds {}",
                    rest.len()
                ))
            })?;
        let base = EpochState::decode(&rest[..base_len])?;
        let state = CursorState::decode(&rest[base_len..])?;
        if state.order_version != base.order_version.number() as u32 {
            return Err(Error::data_loss(format!(
                "shard state of order version {} over an epoch state of version {}",
                state.order_version,
                base.order_version.number()
            )));
        }
        Ok(ShardState {
            base,
            num_shards,
            shard_index,
            state,
            remainder,
        })
    }
}

/// Little-endian words after a magic and an encoding version.
struct Words<'a> {
    bytes: &'a [u8],
    what: &'static str,
}

impl<'a> Words<'a> {
    /// The words after `magic` and the encoding version, one of `versions`.
    fn new(
        bytes: &'a [u8],
        magic: &[u8; 8],
        what: &'static str,
        versions: &[u32],
    ) -> Result<(Words<'a>, u32)> {
        if bytes.get(..8) != Some(magic.as_slice()) {
            return Err(Error::data_loss(format!(
                "not a tfrecord-lirs {what} (its first bytes are not {})",
                String::from_utf8_lossy(&magic[..7])
            )));
        }
        let mut words = Words {
            bytes: &bytes[8..],
            what,
        };
        let version = words.u32()?;
        if !versions.contains(&version) {
            return Err(Error::data_loss(format!(
                "{what} encoding version {version} is unknown (this library reads versions \
                 {versions:?})"
            )));
        }
        Ok((words, version))
    }

    fn take<const W: usize>(&mut self) -> Result<[u8; W]> {
        let (head, rest) = self
            .bytes
            .split_at_checked(W)
            .ok_or_else(|| Error::data_loss(format!("{} ends early (truncated)", self.what)))?;
        self.bytes = rest;
        let mut out = [0u8; W];
        out.copy_from_slice(head);
        Ok(out)
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take()?))
    }

    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take()?))
    }

    fn rest(&self) -> &'a [u8] {
        self.bytes
    }
}
