//! The identity of a store of partially augmented samples (`docs/FORMAT.md` §7.1):
//! what its entries were made from, the namespace directory it names, and the bytes of
//! an entry.

use std::fs;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"LIRSPAR1";
/// Magic, namespace, id, generation, payload length.
pub(crate) const HEADER: usize = 8 + 4 * 8;
pub(crate) const TRAILER: usize = 4;

/// The bytes an entry of `payload_len` payload bytes takes.
pub(crate) fn size(payload_len: usize) -> u64 {
    (HEADER + payload_len + TRAILER) as u64
}

/// What a store's entries were made from: entries of another identity are never
/// served (they live in another namespace).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreIdentity {
    /// The dataset (e.g. [`store_dataset_id`] of its files, or a name the user chose).
    pub dataset: String,
    /// The partial augmentation: its name and version.
    pub partial: String,
    /// The run's seed (the partial augmentation's seeds derive from it).
    pub seed: u64,
}

impl StoreIdentity {
    pub(crate) fn text(&self) -> String {
        format!(
            "tfrecord-lirs partial store 1\ndataset={:?}\npartial={:?}\nseed={}\n",
            self.dataset, self.partial, self.seed
        )
    }

    pub(crate) fn namespace(&self) -> u64 {
        crc_fast::checksum(crc_fast::CrcAlgorithm::Crc64Nvme, self.text().as_bytes())
    }
}

/// The dataset part of a store identity for data files: each file's canonical path (an
/// object-store URL as given) and, for a local file, its size, then the instance count.
/// Files rewritten to another size or count are another dataset (their old entries are
/// never served); a file that cannot be read has no size here (its reads fail anyway).
pub fn store_dataset_id(files: &[String], instances: u64) -> String {
    let mut text = String::from("files=[");
    for (i, file) in files.iter().enumerate() {
        if i > 0 {
            text.push_str(", ");
        }
        if super::remote::is_url(Path::new(file)) {
            text.push_str(&format!("{file:?}"));
        } else {
            // A file's canonical path (`..` and links resolved), or its absolute one.
            match fs::canonicalize(file).and_then(|p| Ok((fs::metadata(&p)?.len(), p))) {
                Ok((len, path)) => text.push_str(&format!("({:?}, {len})", path.display())),
                Err(_) => {
                    let path = std::path::absolute(file).unwrap_or_else(|_| PathBuf::from(file));
                    text.push_str(&format!("{:?}", path.display()));
                }
            }
        }
    }
    text.push_str(&format!("] instances={instances}"));
    text
}

pub(crate) fn encode(namespace: u64, id: u64, generation: u64, payload: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(HEADER + payload.len() + TRAILER);
    bytes.extend_from_slice(MAGIC);
    for word in [namespace, id, generation, payload.len() as u64] {
        bytes.extend_from_slice(&word.to_le_bytes());
    }
    bytes.extend_from_slice(payload);
    let crc = crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, &bytes) as u32;
    bytes.extend_from_slice(&crc.to_le_bytes());
    bytes
}

/// The payload of `bytes` if they are a whole entry `(id, generation)` of this
/// store's namespace with a matching CRC.
pub(crate) fn decode(
    namespace: u64,
    id: u64,
    generation: u64,
    mut bytes: Vec<u8>,
) -> Option<Vec<u8>> {
    if bytes.len() < HEADER + TRAILER || &bytes[..8] != MAGIC {
        return None;
    }
    let word = |i: usize| u64::from_le_bytes(bytes[8 + 8 * i..16 + 8 * i].try_into().unwrap());
    let len = bytes.len() - HEADER - TRAILER;
    if [word(0), word(1), word(2), word(3)] != [namespace, id, generation, len as u64] {
        return None;
    }
    let body = bytes.len() - TRAILER;
    let crc = u32::from_le_bytes(bytes[body..].try_into().unwrap());
    if crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, &bytes[..body]) as u32 != crc {
        return None;
    }
    bytes.truncate(body);
    bytes.drain(..HEADER);
    Some(bytes)
}
