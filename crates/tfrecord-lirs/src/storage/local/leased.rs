//! A memory map that is safe against truncation underneath, for [`AutoFile`](super::AutoFile):
//! part of the I/O module tree, the only place with `unsafe` (each use with a
//! `// SAFETY:` comment).
//!
//! Why a map: a random read of a hot small record through `pread(2)` costs a syscall
//! (~730 ns here), a load from a map ~100-300 ns. Why it is normally unsafe: if another
//! process truncates a mapped file, touching the lost pages raises `SIGBUS`, and if it
//! writes the file, a `&[u8]` changes underneath (undefined behaviour in Rust).
//!
//! The design: a **read lease** (`fcntl(F_SETLEASE, F_RDLCK)`) on the open file. While
//! it is held, the kernel makes every `open` of the file for writing and every
//! `truncate(2)` *block* (for up to `/proc/sys/fs/lease-break-time` seconds, 45 by
//! default) and marks the lease as being broken. The lease can only be taken while no
//! one has the file open for writing (or mapped writable). So while we hold it, the
//! mapped bytes cannot change and the file cannot shrink.
//!
//! A watcher thread (one per process, from the first lease on; asleep while there are
//! none) polls every lease with
//! `F_GETLEASE` every [`POLL`]; when one is being broken it *revokes* the map: new
//! readers are turned away (they fall back to `pread`), it waits for the readers inside
//! the map to leave (a read of a window of records takes microseconds), unmaps, and
//! releases the lease, which lets the blocked writer proceed. A writer waits at most
//! about one poll interval plus one window read. The lease is registered with no
//! signal owner (`F_SETOWN 0`), so breaking it sends no signal. Taking a lease makes
//! the taker the owner, so until `F_SETOWN 0` a break would signal us: the signal is
//! first set (`F_SETSIG`) to `SIGURG`, whose default action is to ignore it, instead of
//! `SIGIO`, whose default action would kill the process.
//!
//! What it does not cover (documented in README): `lease-break-time` set below 1 second
//! (then no lease is taken, and reads use `pread`); a watcher thread starved for longer
//! than `lease-break-time`; a child `fork`ed while a map is open (it has no watcher
//! thread until it takes a lease of its own: a writer would wait for
//! `lease-break-time`, then the kernel breaks the lease);
//! filesystems without leases (NFS, FUSE: `pread` is used); writes through a block
//! device underneath the filesystem. With many leased files the watcher polls each less
//! often (every 50 us times their number, at least every [`POLL`]).

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// The signal a lease break would send while we are still its owner (see
/// [`LeasedMap::open`]): one whose default action is to ignore it.
const LEASE_BREAK_SIGNAL: libc::c_int = libc::SIGURG;

/// `fcntl` commands that set and get the signal a file sends (Linux's `<fcntl.h>`,
/// the same on every architecture; the `libc` crate does not export them).
const F_SETSIG: libc::c_int = 10;
#[cfg(test)]
const F_GETSIG: libc::c_int = 11;

/// How often the watcher checks the leases.
pub const POLL: Duration = Duration::from_millis(5);

/// `state` bit: the map is revoked (or being revoked); readers must not enter.
const REVOKED: usize = 1 << (usize::BITS - 1);

/// Bytes mapped by this process's live leased maps (added when a map is made, taken
/// off when it is unmapped), so that opening a map compares against the bound in O(1)
/// and walks the maps only once they exceed it.
static MAPPED_BYTES: AtomicU64 = AtomicU64::new(0);

/// The mapped bytes beyond which maps are advised random: the page cache room of the
/// memory this process may use (see [`PAGE_CACHE_ROOM_DIVISOR`](super::PAGE_CACHE_ROOM_DIVISOR));
/// `u64::MAX` when that memory is unknown.
fn read_around_max_bytes() -> u64 {
    super::page_cache_room(super::memory_limit().bytes()).unwrap_or(u64::MAX)
}

/// A read-only shared map of a whole file, guarded by a read lease.
pub struct LeasedMap {
    file: File,
    addr: *const u8,
    len: usize,
    /// Readers inside the map, plus the [`REVOKED`] bit.
    state: AtomicUsize,
    /// Set once the map is unmapped and the lease released (under this lock).
    released: Mutex<bool>,
    /// Set once the map is advised `MADV_RANDOM` (see [`PAGE_CACHE_ROOM_DIVISOR`](super::PAGE_CACHE_ROOM_DIVISOR)).
    random: AtomicBool,
}

// SAFETY: the mapping is read-only and shared; access to it is guarded by `state`
// (enter/leave) and it is unmapped only when no reader is inside.
unsafe impl Send for LeasedMap {}
// SAFETY: as above; every method takes `&self` and synchronises through atomics/locks.
unsafe impl Sync for LeasedMap {}

impl std::fmt::Debug for LeasedMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeasedMap")
            .field("len", &self.len)
            .field("revoked", &self.is_revoked())
            .finish()
    }
}

/// A reader inside a [`LeasedMap`]: the mapped bytes stay valid and unchanged until it
/// is dropped.
pub struct Entered<'a> {
    map: &'a LeasedMap,
}

impl std::ops::Deref for Entered<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `addr` maps `len` readable bytes (len > 0, see `open`). This reader
        // was counted in `state` before the REVOKED bit was seen clear, so the watcher
        // will not unmap until `drop` below; the lease keeps every writer and truncation
        // blocked until then, so the bytes neither change nor disappear.
        unsafe { std::slice::from_raw_parts(self.map.addr, self.map.len) }
    }
}

impl Entered<'_> {
    /// Maps the pages of `range` into the page tables now, in one call, where the
    /// kernel supports it (Linux 5.14+; otherwise they fault in as touched): software
    /// prefetches of pages not yet mapped are dropped by the CPU.
    pub fn populate(&self, range: std::ops::Range<usize>) {
        const MADV_POPULATE_READ: libc::c_int = 22;
        let page = super::os_page_size();
        let start = range.start / page * page;
        let end = range.end.min(self.map.len);
        if start >= end {
            return;
        }
        // SAFETY: `[start, end)` lies inside the live mapping (this reader keeps it
        // mapped); MADV_POPULATE_READ only fills page tables, as reading would.
        unsafe {
            libc::madvise(
                self.map.addr.add(start) as *mut libc::c_void,
                end - start,
                MADV_POPULATE_READ,
            );
        }
    }
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        self.map.state.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Whether the kernel gives writers enough time for the watcher to react.
fn lease_break_time_ok() -> bool {
    std::fs::read_to_string("/proc/sys/fs/lease-break-time")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .is_some_and(|secs| secs >= 1)
}

impl LeasedMap {
    /// Opens `path` read-only, takes a read lease and maps it. `None` when a lease
    /// cannot be had (someone has the file open for writing, the filesystem has no
    /// leases, we neither own the file nor have `CAP_LEASE`, the file is empty, or
    /// `lease-break-time` is under a second): the caller then uses `pread`.
    pub fn open(path: &Path) -> Option<Arc<LeasedMap>> {
        LeasedMap::from_file(File::open(path).ok()?)
    }

    /// [`LeasedMap::open`] for a file already open read-only (e.g. a duplicate of the
    /// descriptor a reader already uses, so map and `pread` see the same file).
    pub fn from_file(file: File) -> Option<Arc<LeasedMap>> {
        if !lease_break_time_ok() {
            return None;
        }
        let fd = file.as_raw_fd();
        // SAFETY: plain fcntl calls on a descriptor we own.
        unsafe {
            // A break between F_SETLEASE (which makes us the signal owner) and
            // F_SETOWN 0 below signals us: let that be SIGURG (ignored by default),
            // not SIGIO (which kills by default).
            if libc::fcntl(fd, F_SETSIG, LEASE_BREAK_SIGNAL) != 0 {
                return None;
            }
            if libc::fcntl(fd, libc::F_SETLEASE, libc::F_RDLCK) != 0 {
                return None;
            }
            // No signal on a lease break: the watcher polls instead.
            if libc::fcntl(fd, libc::F_SETOWN, 0) != 0 {
                libc::fcntl(fd, libc::F_SETLEASE, libc::F_UNLCK);
                return None;
            }
        }
        // The size is read after the lease: from here on it cannot shrink.
        let len = file.metadata().ok()?.len();
        let len = usize::try_from(len).ok().filter(|&l| l > 0);
        let Some(len) = len else {
            // SAFETY: releasing the lease we took above.
            unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_UNLCK) };
            return None;
        };
        // A shared mapping of a file we hold open under a read lease; it is only read
        // through `Entered` and unmapped once.
        let Ok(addr) = super::map_shared(&file, len) else {
            // SAFETY: releasing the lease we took above.
            unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_UNLCK) };
            return None;
        };
        let map = Arc::new(LeasedMap {
            file,
            addr: addr as *const u8,
            len,
            state: AtomicUsize::new(0),
            released: Mutex::new(false),
            random: AtomicBool::new(false),
        });
        MAPPED_BYTES.fetch_add(len as u64, Ordering::AcqRel);
        watcher::register(&map);
        Some(map)
    }

    /// The open file the map was made of (still open once the map is revoked: read it
    /// with `pread` then).
    pub(crate) fn file(&self) -> &File {
        &self.file
    }

    /// Enters the map, or `None` once it is revoked (read with `pread` then).
    pub fn enter(&self) -> Option<Entered<'_>> {
        let before = self.state.fetch_add(1, Ordering::AcqRel);
        if before & REVOKED != 0 {
            self.state.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(Entered { map: self })
    }

    /// Advises the kernel not to read around faults in this map (`MADV_RANDOM`), once;
    /// nothing if it is revoked.
    fn advise_random(&self) {
        let Some(inside) = self.enter() else { return };
        if self.random.swap(true, Ordering::AcqRel) {
            return;
        }
        // SAFETY: `inside` keeps the whole mapping alive for the call; MADV_RANDOM only
        // changes how the kernel reads pages in on a fault, not what they hold.
        unsafe {
            libc::madvise(
                inside.map.addr as *mut libc::c_void,
                inside.map.len,
                libc::MADV_RANDOM,
            );
        }
    }

    /// Whether the map was revoked (a writer or a truncation came, or it was dropped).
    pub fn is_revoked(&self) -> bool {
        self.state.load(Ordering::Acquire) & REVOKED != 0
    }

    /// Whether the kernel reports our lease as being broken (or gone).
    fn lease_broken(&self) -> bool {
        // SAFETY: a plain fcntl on a descriptor we own.
        let kind = unsafe { libc::fcntl(self.file.as_raw_fd(), libc::F_GETLEASE) };
        kind != libc::F_RDLCK
    }

    /// Turns new readers away, waits for those inside to leave, unmaps and releases
    /// the lease. Idempotent.
    pub fn revoke(&self) {
        self.state.fetch_or(REVOKED, Ordering::AcqRel);
        let mut spins = 0u32;
        while self.state.load(Ordering::Acquire) & !REVOKED != 0 {
            spins += 1;
            if spins < 100 {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(Duration::from_micros(20));
            }
        }
        let Ok(mut released) = self.released.lock() else {
            return;
        };
        if !*released {
            // SAFETY: no reader is inside (checked above, and REVOKED keeps new ones
            // out for good), so nothing refers to the mapping; it is unmapped once
            // (guarded by `released`), then the lease is released.
            unsafe {
                libc::munmap(self.addr as *mut libc::c_void, self.len);
                libc::fcntl(self.file.as_raw_fd(), libc::F_SETLEASE, libc::F_UNLCK);
            }
            MAPPED_BYTES.fetch_sub(self.len as u64, Ordering::AcqRel);
            *released = true;
        }
    }
}

impl Drop for LeasedMap {
    fn drop(&mut self) {
        self.revoke();
    }
}

/// The process's one lease watcher thread.
///
/// Started with the first lease and kept for the life of the process, asleep on a
/// condition variable while there are no leases (no polling then). Started and stopped
/// with the leases, as it once was, every reader opened alone paid a thread start, and a
/// process ending while the watcher was starting or stopping showed that thread's
/// bookkeeping as leaked under LeakSanitizer. Its handle is held in the registry, so
/// what the thread owns stays reachable until the process exits.
mod watcher {
    use super::*;
    use std::sync::Condvar;
    use std::thread::JoinHandle;

    struct Registry {
        maps: Vec<Weak<LeasedMap>>,
        /// The running watcher, and the process it was started in: a child `fork`ed
        /// after it started has no such thread, and starts its own.
        watcher: Option<(u32, JoinHandle<()>)>,
    }

    static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
        maps: Vec::new(),
        watcher: None,
    });
    /// Wakes the watcher when a lease is registered.
    static LEASES_ADDED: Condvar = Condvar::new();

    pub(super) fn register(map: &Arc<LeasedMap>) {
        let Ok(mut reg) = REGISTRY.lock() else {
            // Nobody would watch this lease: never use the map.
            map.revoke();
            return;
        };
        reg.maps.push(Arc::downgrade(map));
        if MAPPED_BYTES.load(Ordering::Acquire) > read_around_max_bytes() {
            advise_random_beyond(&reg.maps, read_around_max_bytes());
        }
        let pid = std::process::id();
        if reg
            .watcher
            .as_ref()
            .is_some_and(|(started_in, _)| *started_in == pid)
        {
            LEASES_ADDED.notify_one();
            return;
        }
        match crate::pool::spawn("lirs-lease", watch) {
            Ok(thread) => reg.watcher = Some((pid, thread)),
            Err(_) => {
                reg.maps.pop();
                drop(reg);
                map.revoke();
            }
        }
    }

    /// Advises every live map of `maps` random (see [`PAGE_CACHE_ROOM_DIVISOR`](super::PAGE_CACHE_ROOM_DIVISOR)) once
    /// they map more than `max_bytes` together.
    pub(super) fn advise_random_beyond(maps: &[Weak<LeasedMap>], max_bytes: u64) {
        let live: Vec<Arc<LeasedMap>> = maps
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|m| !m.is_revoked())
            .collect();
        let mapped: u64 = live.iter().map(|m| m.len as u64).sum();
        if mapped > max_bytes {
            for map in &live {
                map.advise_random();
            }
        }
    }

    fn watch() {
        loop {
            let live: Vec<Arc<LeasedMap>> = {
                let Ok(mut reg) = REGISTRY.lock() else { return };
                loop {
                    reg.maps
                        .retain(|w| w.upgrade().is_some_and(|m| !m.is_revoked()));
                    if !reg.maps.is_empty() {
                        break;
                    }
                    let Ok(woken) = LEASES_ADDED.wait(reg) else {
                        return;
                    };
                    reg = woken;
                }
                reg.maps.iter().filter_map(Weak::upgrade).collect()
            };
            for map in &live {
                if map.lease_broken() {
                    map.revoke();
                }
            }
            // One fcntl per lease per round: with many files the rounds space out
            // (~50 us of interval per lease), so watching stays cheap. The maps are let
            // go before the sleep, so a reader dropped meanwhile is unmapped at once.
            let per_lease =
                Duration::from_micros(50) * u32::try_from(live.len()).unwrap_or(u32::MAX);
            drop(live);
            std::thread::sleep(POLL.max(per_lease));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lease break must never deliver SIGIO (default action: kill the process): the
    /// lease is held with no signal owner, and the signal a break could send while we
    /// still were the owner (between F_SETLEASE and F_SETOWN 0) is one ignored by default.
    #[test]
    fn a_lease_break_can_send_no_killing_signal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 10_000]).unwrap();
        let Some(map) = LeasedMap::open(&path) else {
            panic!("no read lease on a file of our own in a tempdir (lease-break-time < 1 s?)");
        };
        let fd = map.file.as_raw_fd();
        // SAFETY: plain fcntl queries on a descriptor the map owns.
        let (lease, owner, signal) = unsafe {
            (
                libc::fcntl(fd, libc::F_GETLEASE),
                libc::fcntl(fd, libc::F_GETOWN),
                libc::fcntl(fd, F_GETSIG),
            )
        };
        assert_eq!(lease, libc::F_RDLCK);
        assert_eq!(owner, 0, "a lease break would signal pid {owner}");
        assert_eq!(signal, LEASE_BREAK_SIGNAL);
        // SAFETY: sigaction with a null new action only reads the current one.
        let disposition = unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            libc::sigaction(LEASE_BREAK_SIGNAL, std::ptr::null(), &mut old);
            old.sa_sigaction
        };
        assert_eq!(
            disposition,
            libc::SIG_DFL,
            "SIGURG's default action is to ignore it"
        );
        assert_eq!(map.enter().map(|m| m[9_999]), Some(7));
    }

    /// Whether the kernel has `map` advised random: "rr" in the VmFlags of its mapping
    /// in /proc/self/smaps.
    fn advised_random(map: &LeasedMap) -> bool {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let start = format!("{:x}-", map.addr as usize);
        let mut lines = smaps.lines().skip_while(|l| !l.starts_with(&start));
        assert!(lines.next().is_some(), "the map is not in smaps");
        let flags = lines.find(|l| l.starts_with("VmFlags:")).unwrap();
        flags.split_whitespace().any(|f| f == "rr")
    }

    /// Maps keep the kernel's read-around while they map no more than the bound
    /// together, and are all advised random once they map more (a map opened after
    /// that too); a revoked map is left alone.
    #[test]
    fn maps_beyond_the_bound_are_advised_random() {
        let dir = tempfile::tempdir().unwrap();
        let open = |name: &str, len: usize| {
            let path = dir.path().join(name);
            std::fs::write(&path, vec![1u8; len]).unwrap();
            LeasedMap::open(&path).expect("a read lease on a file of our own")
        };
        let (a, b) = (open("a", 3 * 4096), open("b", 5 * 4096));
        let weak =
            |maps: &[&Arc<LeasedMap>]| maps.iter().map(|m| Arc::downgrade(m)).collect::<Vec<_>>();
        watcher::advise_random_beyond(&weak(&[&a, &b]), 8 * 4096);
        assert!(!advised_random(&a) && !advised_random(&b));
        let c = open("c", 4096);
        let revoked = open("d", 4096);
        revoked.revoke();
        watcher::advise_random_beyond(&weak(&[&a, &b, &c, &revoked]), 8 * 4096);
        assert!(advised_random(&a) && advised_random(&b) && advised_random(&c));
        assert!(!revoked.random.load(Ordering::Acquire));
        // Still readable, and the same bytes.
        assert_eq!(a.enter().map(|m| m[3 * 4096 - 1]), Some(1));
    }
}
