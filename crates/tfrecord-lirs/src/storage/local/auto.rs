//! The default backend: `pread(2)` plus a lease-guarded map.

use std::io;
use std::path::Path;
use std::sync::Arc;

use tfrecord_lirs_format::error::Result;

use super::leased::LeasedMap;
use super::{copy_out, MapView, PreadFile, ReadAt, View};

/// Records longer than this on average are not mapped by [`AutoFile`]: one `pread` per
/// record costs little next to copying it, and mapped pages would count in the
/// process's resident memory.
pub const AUTO_MAP_MAX_MEAN_RECORD: u64 = 16 * 1024;

/// The default backend: positioned reads with `pread(2)`, and, when the kernel grants
/// a read lease on the file, a memory map besides (see the `leased` module).
///
/// While the lease is held nobody can open the file for writing or truncate it: such a
/// process blocks until a watcher thread notices (within a few milliseconds), revokes
/// the map (waiting for readers inside it to finish their current batch), and releases
/// the lease. From then on every read goes through `pread`, which reports a truncated
/// file as an error. So mapped reads never see bytes change or disappear (no `SIGBUS`).
#[derive(Debug)]
pub struct AutoFile {
    pread: PreadFile,
    map: Option<Arc<LeasedMap>>,
}

impl AutoFile {
    /// Opens `path`; maps it (under a lease) only if it holds records of at most
    /// [`AUTO_MAP_MAX_MEAN_RECORD`] bytes on average (`records` of them) and a lease can
    /// be had.
    pub fn open(path: &Path, records: u64) -> Result<AutoFile> {
        Ok(AutoFile::from_pread(PreadFile::open(path)?, records))
    }

    /// [`AutoFile::open`] for a file already open with `pread`: the map (if any) is made
    /// of the same open file (a duplicated descriptor), not of the path again.
    pub fn from_pread(pread: PreadFile, records: u64) -> AutoFile {
        let small = records > 0 && pread.size() / records <= AUTO_MAP_MAX_MEAN_RECORD;
        let map = if small {
            pread.file().try_clone().ok().and_then(LeasedMap::from_file)
        } else {
            None
        };
        AutoFile { pread, map }
    }

    /// Whether reads can currently use the map (false once it was revoked).
    pub fn is_mapped(&self) -> bool {
        self.map.as_ref().is_some_and(|m| !m.is_revoked())
    }
}

impl ReadAt for AutoFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        // From the map while it holds (no syscall), else through pread.
        match self.map_view() {
            Some(map) => Ok(copy_out(&map, buf, offset)),
            None => self.pread.read_at(buf, offset),
        }
    }

    fn size(&self) -> u64 {
        self.pread.size()
    }

    fn map_view(&self) -> Option<MapView<'_>> {
        let entered = self.map.as_ref()?.enter()?;
        // The map was made under the lease, at least as long as the size seen at open
        // (the file cannot have shrunk since); only that prefix is served.
        let size = usize::try_from(self.pread.size()).ok()?;
        if entered.len() < size {
            return None;
        }
        Some(MapView(View::Leased(entered, size)))
    }
}
