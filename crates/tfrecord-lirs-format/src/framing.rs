//! The TFRecord framing, filler records and the page-placement rule.
//!
//! Pure code: no I/O, no `unsafe`. Everything that touches files builds on it.
//!
//! A record is framed as
//!
//! ```text
//! +-------------------+------------------------+-----------------+-------------------------+
//! | length: u64 LE    | masked_crc32c(length)  | payload         | masked_crc32c(payload)  |
//! | 8 bytes           | u32 LE, 4 bytes        | `length` bytes  | u32 LE, 4 bytes         |
//! +-------------------+------------------------+-----------------+-------------------------+
//! ```
//!
//! exactly as TensorFlow's `tf.io.TFRecordWriter` writes it.

use byteorder::{ByteOrder, LittleEndian};

/// Bytes before the payload: the length and its CRC.
pub const HEADER_LEN: usize = 12;
/// Bytes after the payload: the payload CRC.
pub const FOOTER_LEN: usize = 4;
/// Framing bytes around every payload.
pub const FRAMING_LEN: u64 = (HEADER_LEN + FOOTER_LEN) as u64;

/// The first 8 payload bytes of every filler record.
///
/// A payload that begins with `0x00` is never a valid serialized protobuf message
/// (field number 0 is reserved), so a filler cannot be mistaken for a `tf.train.Example`.
pub const FILLER_MAGIC: &[u8; 8] = b"\x00LIRSPAD";
/// The smallest framed filler record: framing plus the magic.
pub const MIN_FILLER_LEN: u64 = FRAMING_LEN + FILLER_MAGIC.len() as u64;

/// Smallest allowed page size (a power of two).
pub const MIN_PAGE_SIZE: u64 = 512;
/// Largest allowed page size (a power of two).
pub const MAX_PAGE_SIZE: u64 = 16 << 20;
/// The page size used when none is given.
pub const DEFAULT_PAGE_SIZE: u64 = 4096;

const MASK_DELTA: u32 = 0xa282_ead8;

/// TensorFlow's CRC mask: `((c >> 15) | (c << 17)) + 0xa282ead8`.
///
/// ```
/// use tfrecord_lirs::format::{mask_crc, unmask_crc};
/// let c = tfrecord_lirs::format::crc32c(b"hello");
/// assert_eq!(unmask_crc(mask_crc(c)), c);
/// ```
pub fn mask_crc(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// Inverse of [`mask_crc`].
pub fn unmask_crc(masked: u32) -> u32 {
    masked.wrapping_sub(MASK_DELTA).rotate_left(15)
}

/// The CRC-32C (Castagnoli) of `bytes`, unmasked.
///
/// Through the `crc-fast` crate, which picks the CPU's fastest kernel at run time. Side
/// by side with the `crc32c` crate on the 2-core AVX-512 bench host (GB/s, buffer in
/// cache / streamed from memory, loaded machine; benchmarks/PROFILE_NOTES.md):
/// 362 B 6.5 / 2.4 vs 4.4 / 2.3; 4 KiB 39 / 3.6 vs 8.4 / 2.6; 100 KiB 43 / 3.6 vs
/// 9.8 / 3.5; 1 MiB 120 / 4.1 vs 14 / 4.4. (The `crc` crate, table-driven, ~0.2.)
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc_fast::crc32_iscsi(bytes)
}

/// The masked CRC32C of `bytes`, as stored in a record.
pub fn masked_crc32c(bytes: &[u8]) -> u32 {
    mask_crc(crc32c(bytes))
}

/// The framed size of a record with a payload of `payload_len` bytes.
pub fn framed_len(payload_len: u64) -> u64 {
    payload_len.saturating_add(FRAMING_LEN)
}

/// Whether `payload` is a filler record's payload.
pub fn is_filler(payload: &[u8]) -> bool {
    payload.starts_with(FILLER_MAGIC)
}

/// Why a record's bytes are not a valid record. Positions are added by the caller,
/// which knows the file and offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// The stored CRC of the length field does not match the length bytes.
    LengthCrc {
        /// CRC stored in the record.
        stored: u32,
        /// CRC of the bytes read.
        computed: u32,
    },
    /// The stored payload CRC does not match the payload.
    PayloadCrc {
        /// CRC stored in the record.
        stored: u32,
        /// CRC of the bytes read.
        computed: u32,
    },
    /// Fewer bytes are available than the record needs.
    Truncated {
        /// Bytes the record needs from its start.
        needed: u64,
        /// Bytes there are.
        available: u64,
    },
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::LengthCrc { stored, computed } => write!(
                f,
                "length CRC mismatch (stored {stored:#010x}, computed {computed:#010x}): not a record start, or a damaged length"
            ),
            FrameError::PayloadCrc { stored, computed } => write!(
                f,
                "payload CRC mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ),
            FrameError::Truncated { needed, available } => write!(
                f,
                "truncated record: needs {needed} bytes, only {available} available"
            ),
        }
    }
}

/// Encodes the 12-byte header (length and its masked CRC) for a payload of `payload_len` bytes.
pub fn encode_header(payload_len: u64) -> [u8; HEADER_LEN] {
    let mut header = [0u8; HEADER_LEN];
    LittleEndian::write_u64(&mut header[..8], payload_len);
    let crc = masked_crc32c(&header[..8]);
    LittleEndian::write_u32(&mut header[8..], crc);
    header
}

/// Encodes the 4-byte footer (masked payload CRC).
pub fn encode_footer(payload: &[u8]) -> [u8; FOOTER_LEN] {
    masked_crc32c(payload).to_le_bytes()
}

/// Appends one framed record holding `payload` to `out`.
///
/// ```
/// let mut out = Vec::new();
/// tfrecord_lirs::format::encode_record(b"abc", &mut out);
/// assert_eq!(out.len(), 3 + 16);
/// let (len, _) = (tfrecord_lirs::format::decode_header(out[..12].try_into().unwrap()).unwrap(), ());
/// assert_eq!(len, 3);
/// ```
pub fn encode_record(payload: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&encode_header(payload.len() as u64));
    out.extend_from_slice(payload);
    out.extend_from_slice(&encode_footer(payload));
}

/// A record's length field, copied to an 8-byte boundary: a CRC kernel then checks it
/// with one CRC instruction instead of byte by byte (measured with the `crc32c` crate:
/// 8% off the wall time of `scan_offsets`, which checks one length per ~380 bytes).
#[repr(align(8))]
struct AlignedLength([u8; 8]);

/// Checks a 12-byte header and returns the payload length it declares.
///
/// The length is *not* trusted for anything yet: callers bound it by the bytes
/// they know to be available before allocating.
pub fn decode_header(header: &[u8; HEADER_LEN]) -> Result<u64, FrameError> {
    let (len_bytes, stored) = header.split_at(8);
    let len_bytes = AlignedLength(len_bytes.try_into().expect("8 bytes"));
    let stored = LittleEndian::read_u32(stored);
    let computed = masked_crc32c(&len_bytes.0);
    if stored != computed {
        return Err(FrameError::LengthCrc { stored, computed });
    }
    Ok(u64::from_le_bytes(len_bytes.0))
}

/// Checks a payload against its 4-byte footer.
pub fn check_payload(payload: &[u8], footer: &[u8; FOOTER_LEN]) -> Result<(), FrameError> {
    // The CRC first, then the footer: the footer is the record's farthest cache line;
    // loading it first showed in perf as a stall on a cache miss (when another core
    // had just read the chunk), which the CRC's front-to-back walk gets prefetched.
    let computed = masked_crc32c(payload);
    let stored = LittleEndian::read_u32(footer);
    if stored != computed {
        return Err(FrameError::PayloadCrc { stored, computed });
    }
    Ok(())
}

/// Bytes copied per step of [`copy_check_payload`]: small enough that the CRC reads the
/// chunk just written from the L1 cache, long enough that each CRC call runs at speed.
const FUSED_CHUNK: usize = 16 * 1024;

/// Copies `payload` into `dst` and checks it against `footer` in the same pass: chunk
/// by chunk, the CRC reads what was just written while it is in the core's L1 cache,
/// so a payload streamed from memory is read from there once, not twice. The error is
/// [`check_payload`]'s; `dst` then holds the bytes copied. `None` if the lengths
/// differ (nothing copied).
pub fn copy_check_payload(
    payload: &[u8],
    footer: &[u8; FOOTER_LEN],
    dst: &mut [u8],
) -> Option<Result<(), FrameError>> {
    if dst.len() != payload.len() {
        return None;
    }
    let mut crc = PayloadCrc::new();
    for (from, to) in payload.chunks(FUSED_CHUNK).zip(dst.chunks_mut(FUSED_CHUNK)) {
        to.copy_from_slice(from);
        crc.update(to);
    }
    Some(crc.check(footer))
}

/// The CRC of a payload fed piece by piece, each piece while it is still in cache (as
/// it is copied, or right after it was read), then checked against the record's
/// footer: the same check and error as [`check_payload`].
#[derive(Clone)]
pub struct PayloadCrc(crc_fast::Digest);

impl PayloadCrc {
    /// The CRC of no bytes yet.
    pub fn new() -> PayloadCrc {
        PayloadCrc(crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi))
    }

    /// Adds the next bytes of the payload.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// Checks the payload fed so far against `footer`.
    pub fn check(&self, footer: &[u8; FOOTER_LEN]) -> Result<(), FrameError> {
        // CRC-32C is 32 bits wide: the u64 holds it exactly.
        let computed = mask_crc(self.0.finalize() as u32);
        let stored = LittleEndian::read_u32(footer);
        if stored == computed {
            Ok(())
        } else {
            Err(FrameError::PayloadCrc { stored, computed })
        }
    }
}

impl Default for PayloadCrc {
    fn default() -> Self {
        PayloadCrc::new()
    }
}

impl std::fmt::Debug for PayloadCrc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PayloadCrc")
    }
}

/// A record parsed from the front of a byte slice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The payload bytes.
    pub payload: &'a [u8],
    /// The framed size (payload + 16).
    pub framed_len: u64,
}

/// Parses the record at the front of `bytes`, checking the length CRC and (if
/// `check_payload_crc`) the payload CRC. Bytes after the record are ignored.
///
/// ```
/// use tfrecord_lirs::format::{encode_record, decode_record};
/// let mut buf = Vec::new();
/// encode_record(b"payload", &mut buf);
/// let frame = decode_record(&buf, true).unwrap();
/// assert_eq!(frame.payload, b"payload");
/// ```
pub fn decode_record(bytes: &[u8], check_payload_crc: bool) -> Result<Frame<'_>, FrameError> {
    let available = bytes.len() as u64;
    let header: &[u8; HEADER_LEN] = bytes
        .get(..HEADER_LEN)
        .and_then(|h| h.try_into().ok())
        .ok_or(FrameError::Truncated {
            needed: HEADER_LEN as u64,
            available,
        })?;
    let len = decode_header(header)?;
    let needed = framed_len(len);
    if needed > available {
        return Err(FrameError::Truncated { needed, available });
    }
    // `needed <= available <= usize::MAX`, so these casts are exact.
    let end = HEADER_LEN + len as usize;
    let payload = &bytes[HEADER_LEN..end];
    if check_payload_crc {
        let footer: &[u8; FOOTER_LEN] = bytes[end..end + FOOTER_LEN].try_into().expect("4 bytes");
        check_payload(payload, footer)?;
    }
    Ok(Frame {
        payload,
        framed_len: needed,
    })
}

/// Appends one filler record of exactly `framed_len` bytes (at least [`MIN_FILLER_LEN`]).
///
/// # Panics
/// Never for `framed_len >= MIN_FILLER_LEN`; callers check with [`filler_fits`].
pub fn encode_filler(framed_len: u64, out: &mut Vec<u8>) {
    debug_assert!(filler_fits(framed_len));
    let payload_len = (framed_len - FRAMING_LEN) as usize;
    let start = out.len();
    out.extend_from_slice(&encode_header(payload_len as u64));
    out.extend_from_slice(FILLER_MAGIC);
    out.resize(start + HEADER_LEN + payload_len, 0);
    let footer = encode_footer(&out[start + HEADER_LEN..]);
    out.extend_from_slice(&footer);
}

/// Bytes of a record that tell whether it is a filler: its header and the magic.
pub const FILLER_PROBE_LEN: usize = HEADER_LEN + FILLER_MAGIC.len();

/// Why bytes after an instance's record, inside its span, are not filler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TailError {
    /// A valid record header whose payload is not a filler's: an instance the table
    /// does not index.
    NotFiller {
        /// The record's framed size.
        framed_len: u64,
    },
    /// The bytes are not a valid record, or the record runs past the span's end.
    Frame(FrameError),
}

/// Checks the record starting with `probe` (its first [`FILLER_PROBE_LEN`] bytes, or
/// all the bytes left when fewer) as a filler inside a span with `available` bytes left
/// from its start, and returns its framed size. The filler's payload CRC is not checked:
/// no instance depends on a filler's bytes.
///
/// ```
/// use tfrecord_lirs::format::{encode_filler, encode_record, filler_framed_len, TailError};
/// let mut filler = Vec::new();
/// encode_filler(40, &mut filler);
/// assert_eq!(filler_framed_len(&filler, 40), Ok(40));
/// let mut record = Vec::new();
/// encode_record(b"an instance", &mut record);
/// let n = record.len() as u64;
/// assert_eq!(filler_framed_len(&record, n), Err(TailError::NotFiller { framed_len: n }));
/// ```
pub fn filler_framed_len(probe: &[u8], available: u64) -> Result<u64, TailError> {
    let framed = record_framed_len(probe, available)?;
    let len = framed - FRAMING_LEN;
    let magic = probe.get(HEADER_LEN..FILLER_PROBE_LEN);
    if len < FILLER_MAGIC.len() as u64 || magic != Some(FILLER_MAGIC.as_slice()) {
        return Err(TailError::NotFiller { framed_len: framed });
    }
    Ok(framed)
}

/// Walks `tail` (the bytes after an instance's record, to the end of its span) and
/// returns `Err((offset in tail, why))` at the first thing that is not a filler record.
pub fn check_filler_tail(tail: &[u8]) -> Result<(), (usize, TailError)> {
    check_padding_tail(tail, Padding::Fillers)
}

/// What the bytes between an instance's record and the next table entry (or the end of
/// the file) may be: how much a reader trusts the offset table.
///
/// ```
/// use tfrecord_lirs::format::{encode_record, Padding, TailError};
/// // The LIRS reference implementation pads with records of ASCII '0' bytes.
/// let mut pad = Vec::new();
/// encode_record(&[b'0'; 40], &mut pad);
/// assert_eq!(Padding::Opaque.framed_len(&pad, 56), Ok(56));
/// assert_eq!(Padding::Fillers.framed_len(&pad, 56), Err(TailError::NotFiller { framed_len: 56 }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Padding {
    /// Only LIRS filler records (the default). A record that is not a filler is an
    /// instance the table misses, and an error: this catches tables missing entries.
    #[default]
    Fillers,
    /// Any records (valid framing: length CRC, each inside the span), whatever their
    /// payload: padding written by another tool, in a file whose table is
    /// authoritative (instance `i` is the record at `offset[i]`, whatever lies between).
    Opaque,
}

impl Padding {
    /// The framed size of the padding record starting with `probe` (its first
    /// [`FILLER_PROBE_LEN`] bytes, or all the bytes left when fewer), `available` bytes
    /// being left in the span from its start. Payload CRCs are not checked here.
    pub fn framed_len(self, probe: &[u8], available: u64) -> Result<u64, TailError> {
        match self {
            Padding::Fillers => filler_framed_len(probe, available),
            Padding::Opaque => record_framed_len(probe, available),
        }
    }
}

/// [`check_filler_tail`] for padding of kind `padding`.
pub fn check_padding_tail(tail: &[u8], padding: Padding) -> Result<(), (usize, TailError)> {
    let mut pos = 0usize;
    while pos < tail.len() {
        let rest = &tail[pos..];
        let probe = &rest[..rest.len().min(FILLER_PROBE_LEN)];
        // `framed <= rest.len()`, so the cast is exact.
        let framed = padding
            .framed_len(probe, rest.len() as u64)
            .map_err(|e| (pos, e))?;
        pos += framed as usize;
    }
    Ok(())
}

/// The framed size of the record whose header starts `probe`, checking its length CRC
/// and that it ends within `available` bytes.
fn record_framed_len(probe: &[u8], available: u64) -> Result<u64, TailError> {
    let truncated = |needed: u64| TailError::Frame(FrameError::Truncated { needed, available });
    let header: &[u8; HEADER_LEN] = probe
        .get(..HEADER_LEN)
        .and_then(|h| h.try_into().ok())
        .ok_or_else(|| truncated(HEADER_LEN as u64))?;
    let framed = framed_len(decode_header(header).map_err(TailError::Frame)?);
    if framed > available {
        return Err(truncated(framed));
    }
    Ok(framed)
}

/// Whether a gap of `gap` bytes can be filled with filler records (0, or at least 24).
pub fn filler_fits(gap: u64) -> bool {
    gap == 0 || gap >= MIN_FILLER_LEN
}

/// Names the compression of a file whose first bytes are `head` (up to
/// [`HEADER_LEN`] of them): only when they are not a valid record header, so a
/// TFRecord whose first length happens to look like a ZLIB header is never misreported.
///
/// ```
/// use tfrecord_lirs::format::{compressed_head, encode_header};
/// assert_eq!(compressed_head(&[0x1f, 0x8b, 8, 0]), Some("GZIP"));
/// assert_eq!(compressed_head(&encode_header(7)), None);
/// ```
pub fn compressed_head(head: &[u8]) -> Option<&'static str> {
    let parses = head
        .first_chunk::<HEADER_LEN>()
        .is_some_and(|h| decode_header(h).is_ok());
    compression_magic(head).filter(|_| !parses)
}

/// Names the compression if `head` (a file's first bytes) starts like a GZIP or ZLIB
/// stream; [`compressed_head`] consults it only when the first header does not parse.
fn compression_magic(head: &[u8]) -> Option<&'static str> {
    match head {
        [0x1f, 0x8b, ..] => Some("GZIP"),
        [a, b, ..] if a & 0x0f == 8 && (u16::from(*a) << 8 | u16::from(*b)) % 31 == 0 => {
            Some("ZLIB")
        }
        _ => None,
    }
}

/// A validated page size: a power of two from 512 bytes to 16 MiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PageSize(u64);

impl PageSize {
    /// Validates `bytes` as a page size.
    pub fn new(bytes: u64) -> Option<PageSize> {
        (bytes.is_power_of_two() && (MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&bytes))
            .then_some(PageSize(bytes))
    }

    /// Validates `bytes` as a page size, with an error that says what is allowed.
    pub fn checked(bytes: u64) -> crate::error::Result<PageSize> {
        PageSize::new(bytes).ok_or_else(|| PageSize::refused(bytes))
    }

    /// The one error for a page size outside the rule, however the caller typed it
    /// (signed in Python and TensorFlow, unsigned in Rust and the CLI).
    pub fn refused(value: impl std::fmt::Display) -> crate::error::Error {
        crate::error::Error::invalid_argument(format!(
            "page_size must be a power of two from {MIN_PAGE_SIZE} to {MAX_PAGE_SIZE} bytes, got {value}"
        ))
    }

    /// The page size in bytes.
    pub fn get(self) -> u64 {
        self.0
    }

    /// The page that byte `offset` lies in.
    pub fn page_of(self, offset: u64) -> u64 {
        offset >> self.0.trailing_zeros()
    }

    /// Whether a record of `framed_len` bytes is *small*: it must lie inside one page
    /// with its whole span (invariant b). Larger records start on a page boundary (invariant c).
    pub fn is_small(self, framed_len: u64) -> bool {
        framed_len <= self.0 - MIN_FILLER_LEN
    }

    /// How many pages the byte range `[start, start + len)` touches (0 for an empty range).
    pub fn pages_touched(self, start: u64, len: u64) -> u64 {
        if len == 0 {
            return 0;
        }
        self.page_of(start + len - 1) - self.page_of(start) + 1
    }
}

impl Default for PageSize {
    fn default() -> Self {
        PageSize(DEFAULT_PAGE_SIZE)
    }
}

/// The padding placement rule: how many filler bytes must go at file position `pos`
/// before an instance of `framed_len` bytes so that the padded-file invariants hold.
///
/// The result is 0 or at least [`MIN_FILLER_LEN`] (a filler record can be written).
///
/// * A small instance (framed ≤ P − 24) is placed at `pos` when it exactly fills the
///   rest of the page or leaves room for at least a minimal filler; otherwise the
///   padding runs to the next page boundary. So the instance and the filler that may
///   follow it (its span) stay inside one page.
/// * A large instance starts on a page boundary.
/// * Only after a large instance can the rest of a page be 1..23 bytes (too small for a
///   filler); then the smallest legal filler is chosen.
///
/// ```
/// use tfrecord_lirs::format::{padding_before, PageSize};
/// let p = PageSize::new(4096).unwrap();
/// assert_eq!(padding_before(0, 100, p), 0);
/// assert_eq!(padding_before(4000, 100, p), 96); // 96 left: pad to the boundary
/// assert_eq!(padding_before(3900, 100, p), 0);  // fits, leaves 96 bytes
/// assert_eq!(padding_before(4096 + 10, 5000, p), 4086); // large: to the boundary
/// ```
pub fn padding_before(pos: u64, framed_len: u64, page: PageSize) -> u64 {
    let p = page.get();
    let rest = p - pos % p; // 1..=p bytes left in the current page
    if !page.is_small(framed_len) {
        return match rest {
            r if r == p => 0,
            r if r >= MIN_FILLER_LEN => r,
            r => r + p,
        };
    }
    if framed_len == rest || framed_len + MIN_FILLER_LEN <= rest {
        return 0;
    }
    if rest >= MIN_FILLER_LEN {
        return rest;
    }
    // 1..23 bytes left (after a large instance). A minimal filler crosses into the next
    // page by `MIN_FILLER_LEN - rest` bytes; if the instance does not fit behind it,
    // grow the filler so the instance ends exactly on the following boundary.
    let into_next = MIN_FILLER_LEN - rest;
    if framed_len + MIN_FILLER_LEN <= p - into_next {
        MIN_FILLER_LEN
    } else {
        rest + p - framed_len
    }
}

/// Whether a filler from `start` to `end` is one the padded writer could have written
/// for `page`: it ends on a page boundary (it pads to the next page), or it starts
/// fewer than 24 bytes before one (the rest of a page after a large instance is too
/// small for a filler, so the filler runs into the next page).
pub fn filler_fits_page(page: PageSize, start: u64, end: u64) -> bool {
    let p = page.get();
    end.is_multiple_of(p) || (!start.is_multiple_of(p) && p - start % p < MIN_FILLER_LEN)
}

/// Whether instance `(offset, framed, span)` keeps invariants (b)/(c) for `page`.
pub fn instance_is_placed(page: PageSize, offset: u64, framed: u64, span: u64) -> bool {
    if page.is_small(framed) {
        page.pages_touched(offset, span) == 1
    } else {
        offset.is_multiple_of(page.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fused_copy_checks_like_check_payload() {
        let payload: Vec<u8> = (0..50_000u32).map(|i| ((i * 7) >> 2) as u8).collect();
        let footer = encode_footer(&payload);
        let mut dst = vec![0u8; payload.len()];
        assert_eq!(
            copy_check_payload(&payload, &footer, &mut dst),
            Some(Ok(()))
        );
        assert_eq!(dst, payload);
        let mut bad = payload.clone();
        bad[40_000] ^= 1;
        let want = check_payload(&bad, &footer).unwrap_err();
        assert_eq!(copy_check_payload(&bad, &footer, &mut dst), Some(Err(want)));
        assert_eq!(copy_check_payload(&bad, &footer, &mut dst[1..]), None);
    }

    #[test]
    fn payload_crc_fed_in_pieces_checks_like_check_payload() {
        let payload: Vec<u8> = (0..300_000u32).map(|i| ((i * 13) >> 3) as u8).collect();
        let footer = encode_footer(&payload);
        let mut bad = payload.clone();
        bad[299_999] ^= 0x80;
        for piece in [1, 4095, 128 * 1024, payload.len()] {
            for (bytes, want) in [(&payload, Ok(())), (&bad, check_payload(&bad, &footer))] {
                let mut crc = PayloadCrc::new();
                bytes.chunks(piece).for_each(|c| crc.update(c));
                assert_eq!(crc.check(&footer), want, "pieces of {piece}");
            }
        }
        assert!(check_payload(&bad, &footer).is_err());
    }

    #[test]
    #[allow(clippy::manual_rotate)] // spells out the spec's formula on purpose
    fn mask_matches_tensorflow_reference_values() {
        // From TensorFlow's crc32c_test.cc: crc32c("a") == 0xc1d04330, and the
        // header TF writes for an empty record.
        assert_eq!(crc32c(b"a"), 0xc1d0_4330);
        // And the same as the `crc32c` crate (another implementation) everywhere.
        let bytes: Vec<u8> = (0..70_000u32).map(|i| ((i * 131) >> 3) as u8).collect();
        for len in [0, 1, 7, 8, 9, 63, 64, 255, 4096, 4097, 65_536, 70_000] {
            assert_eq!(
                crc32c(&bytes[..len]),
                ::crc32c::crc32c(&bytes[..len]),
                "{len}"
            );
        }
        let header = encode_header(0);
        assert_eq!(&header[..8], &[0u8; 8]);
        assert_eq!(
            LittleEndian::read_u32(&header[8..]),
            mask_crc(crc32c(&[0u8; 8]))
        );
        for c in [0u32, 1, 0xdead_beef, u32::MAX] {
            assert_eq!(unmask_crc(mask_crc(c)), c);
            assert_eq!(
                mask_crc(c),
                ((c >> 15) | (c << 17)).wrapping_add(0xa282_ead8)
            );
        }
    }

    #[test]
    fn record_round_trip_and_each_field_breaks() {
        let mut buf = Vec::new();
        encode_record(b"hello world", &mut buf);
        assert_eq!(decode_record(&buf, true).unwrap().payload, b"hello world");
        for i in 0..buf.len() {
            let mut bad = buf.clone();
            bad[i] ^= 0x10;
            let err = decode_record(&bad, true).unwrap_err();
            match i {
                0..=11 => assert!(
                    matches!(err, FrameError::LengthCrc { .. }),
                    "byte {i}: {err:?}"
                ),
                _ => assert!(matches!(err, FrameError::PayloadCrc { .. }), "byte {i}"),
            }
            if i >= 12 {
                assert!(decode_record(&bad, false).is_ok());
            }
        }
        for cut in 0..buf.len() {
            assert!(matches!(
                decode_record(&buf[..cut], true),
                Err(FrameError::Truncated { .. })
            ));
        }
    }

    #[test]
    fn huge_length_is_truncation_not_allocation() {
        let header = encode_header(1 << 62);
        assert_eq!(
            decode_record(&header, true),
            Err(FrameError::Truncated {
                needed: (1 << 62) + 16,
                available: 12
            })
        );
        let header = encode_header(u64::MAX);
        assert!(matches!(
            decode_record(&header, true),
            Err(FrameError::Truncated { .. })
        ));
    }

    #[test]
    fn fillers_are_valid_records_of_exact_size() {
        for n in [24u64, 25, 100, 4095, 70000] {
            let mut out = vec![1, 2, 3];
            encode_filler(n, &mut out);
            assert_eq!(out.len() as u64, n + 3);
            let frame = decode_record(&out[3..], true).unwrap();
            assert!(is_filler(frame.payload));
            assert_eq!(frame.framed_len, n);
        }
        assert!(!filler_fits(23) && filler_fits(0) && filler_fits(24));
    }

    #[test]
    fn page_size_bounds() {
        assert!(PageSize::new(256).is_none());
        assert!(PageSize::new(4095).is_none());
        assert!(PageSize::new(32 << 20).is_none());
        assert_eq!(PageSize::new(512).unwrap().get(), 512);
        assert_eq!(PageSize::new(16 << 20).unwrap().get(), 16 << 20);
        let p = PageSize::new(4096).unwrap();
        assert_eq!(p.pages_touched(4095, 2), 2);
        assert_eq!(p.pages_touched(4096, 4096), 1);
        assert_eq!(p.pages_touched(7, 0), 0);
    }

    /// Walks the placement rule over every position in a page and many sizes and checks
    /// the invariants it exists for.
    #[test]
    fn placement_rule_keeps_invariants() {
        for p in [512u64, 4096] {
            let page = PageSize::new(p).unwrap();
            for base in [0u64, 7 * p] {
                for off in 0..p {
                    let pos = base + off;
                    let mut sizes: Vec<u64> = (16..80).collect();
                    sizes.extend([p - 48, p - 25, p - 24, p - 23, p - 1, p, p + 1, 3 * p - 5]);
                    for framed in sizes {
                        let pad = padding_before(pos, framed, page);
                        assert!(filler_fits(pad), "pos {pos} framed {framed} pad {pad}");
                        let start = pos + pad;
                        if page.is_small(framed) {
                            assert_eq!(
                                page.pages_touched(start, framed),
                                1,
                                "pos {pos} framed {framed}"
                            );
                            let left = p - (start + framed) % p;
                            assert!(left == p || left >= MIN_FILLER_LEN);
                        } else {
                            assert_eq!(start % p, 0);
                        }
                        // A minimal choice: no smaller legal padding would do.
                        if pad > 0 && (pos % p == 0 || p - pos % p >= MIN_FILLER_LEN) {
                            assert!(pad <= p);
                        }
                    }
                }
            }
        }
    }
}
