//! An object written through object storage: kept in memory, uploaded whole on close.

use std::io;

use object_store::PutPayload;

use super::process::Located;
use crate::storage::remote::RemoteWrite;

/// An object being written: kept in memory and uploaded whole on close (object
/// stores make an object visible when its upload completes).
pub(super) struct ObjectWriter {
    pub(super) object: Located,
    pub(super) data: Vec<u8>,
    pub(super) closed: bool,
}

impl RemoteWrite for ObjectWriter {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.data.extend_from_slice(data);
        Ok(())
    }

    fn close(&mut self) -> io::Result<()> {
        if self.closed {
            return Ok(());
        }
        let (process, store) = self.object.here()?;
        let payload = PutPayload::from(std::mem::take(&mut self.data));
        process
            .runtime
            .block_on(store.put(&self.object.path, payload))
            .map_err(|e| self.object.error(e))?;
        self.closed = true;
        Ok(())
    }
}
