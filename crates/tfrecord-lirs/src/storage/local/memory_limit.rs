//! The memory this process may use: the machine's (`/proc/meminfo`), and the limit of
//! its memory cgroup (v1 `memory.limit_in_bytes`, v2 `memory.max` and `memory.high`),
//! the smallest along the path from its cgroup up to the hierarchy's root. A container
//! (a Kubernetes pod, a Slurm job) often may use far less than the machine has, and
//! its page cache counts against that limit: the default backend judges whether files
//! fit in the page cache by this figure ([`memory_limit`]), not by the machine's.
//!
//! The readers take the root of the file system they look in, so that tests can lay
//! out a fake `/proc` and cgroup hierarchy in a temporary directory.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A limit at or above this many bytes means none: cgroup v1 writes "unlimited" as
/// `PAGE_COUNTER_MAX` pages (9223372036854771712 with 4 KiB pages), v2 as `max`.
const NO_LIMIT_FROM: u64 = 1 << 62;

/// The memory this process may use ([`memory_limit`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryLimit {
    /// The machine's memory (`MemTotal`), if it could be read.
    pub machine: Option<u64>,
    /// The smallest limit of the process's memory cgroup and its ancestors, if any.
    pub cgroup: Option<CgroupLimit>,
}

/// A memory cgroup's limit, and the file that sets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupLimit {
    /// The limit, in bytes.
    pub bytes: u64,
    /// The control file it was read from (`…/memory.limit_in_bytes`, `…/memory.max`
    /// or `…/memory.high`).
    pub file: PathBuf,
}

impl MemoryLimit {
    /// The memory this process may use: the smaller of the machine's and its cgroup's;
    /// `None` when neither is known.
    pub fn bytes(&self) -> Option<u64> {
        let cgroup = self.cgroup.as_ref().map(|c| c.bytes);
        match (self.machine, cgroup) {
            (Some(m), Some(c)) => Some(m.min(c)),
            (m, c) => m.or(c),
        }
    }

    /// One line saying where the figure comes from (for `info` and the default
    /// backend's debug line).
    pub fn describe(&self) -> String {
        let gib = |b: u64| format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64);
        let machine = self.machine.map_or_else(
            || "unknown".to_string(),
            |m| format!("{m} bytes ({})", gib(m)),
        );
        match &self.cgroup {
            Some(c) => format!(
                "{} bytes ({}) by the cgroup limit in {} (machine {machine})",
                c.bytes,
                gib(c.bytes),
                c.file.display()
            ),
            None => format!("the machine's, {machine} (no cgroup memory limit)"),
        }
    }
}

/// The memory this process may use, read once per process (see the module docs).
pub fn memory_limit() -> &'static MemoryLimit {
    static LIMIT: OnceLock<MemoryLimit> = OnceLock::new();
    LIMIT.get_or_init(|| read_memory_limit(Path::new("/")))
}

/// Reads the memory limit as seen under `root` (`/` for this process): `root`'s
/// `proc/meminfo`, `proc/self/cgroup` and `proc/self/mountinfo`, and the cgroup
/// control files under the mount points mountinfo names (taken relative to `root`).
/// What cannot be read is left out (`None`), never an error.
pub fn read_memory_limit(root: &Path) -> MemoryLimit {
    let read = |p: &str| std::fs::read_to_string(root.join(p)).ok();
    let machine = read("proc/meminfo").and_then(|s| mem_total(&s));
    let cgroup = match (read("proc/self/cgroup"), read("proc/self/mountinfo")) {
        (Some(cgroups), Some(mounts)) => cgroup_limit(root, &cgroups, &mounts),
        _ => None,
    };
    MemoryLimit { machine, cgroup }
}

/// `MemTotal` of a `/proc/meminfo`, in bytes.
fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut words = line["MemTotal:".len()..].split_whitespace();
    let n: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => n.checked_mul(1024),
        None => Some(n),
        Some(_) => None,
    }
}

/// Which cgroup hierarchy a limit is read from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

impl Version {
    fn files(self) -> &'static [&'static str] {
        match self {
            Version::V1 => &["memory.limit_in_bytes"],
            Version::V2 => &["memory.max", "memory.high"],
        }
    }
}

/// The smallest limit over the memory hierarchies the process is in (v1's memory
/// controller, and v2's unified one), each walked from the process's cgroup up to the
/// hierarchy's mount point.
fn cgroup_limit(root: &Path, cgroups: &str, mounts: &str) -> Option<CgroupLimit> {
    let mut best: Option<CgroupLimit> = None;
    for line in cgroups.lines() {
        // "hierarchy-id:controllers:path"; v2 is "0::path".
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let version = if controllers.split(',').any(|c| c == "memory") {
            Version::V1
        } else if id == "0" && controllers.is_empty() {
            Version::V2
        } else {
            continue;
        };
        for (mount_root, mount_point) in mounts_of(mounts, version) {
            let dir = cgroup_dir(&mount_point, &mount_root, path);
            let found = walk_up(root, &mount_point, &dir, version);
            if let Some(found) = found {
                if best.as_ref().is_none_or(|b| found.bytes < b.bytes) {
                    best = Some(found);
                }
            }
        }
    }
    best
}

/// The (root in the hierarchy, mount point) of each mount of `version`'s memory
/// hierarchy in a `/proc/self/mountinfo`.
fn mounts_of(mountinfo: &str, version: Version) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for line in mountinfo.lines() {
        // "id parent major:minor root mount-point options [optional...] - fstype source super-options"
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let left: Vec<&str> = left.split(' ').collect();
        let right: Vec<&str> = right.split(' ').collect();
        if left.len() < 5 || right.len() < 3 {
            continue;
        }
        let ours = match version {
            Version::V1 => right[0] == "cgroup" && right[2].split(',').any(|o| o == "memory"),
            Version::V2 => right[0] == "cgroup2",
        };
        if ours {
            found.push((unescape(left[3]), unescape(left[4])));
        }
    }
    found
}

/// A mountinfo field with its octal escapes (`\040` for a space) undone.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|d| {
            std::str::from_utf8(d)
                .ok()
                .and_then(|d| u8::from_str_radix(d, 8).ok())
        });
        match (bytes[i], octal) {
            (b'\\', Some(b)) => {
                out.push(b);
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The directory of cgroup `path` under a mount of its hierarchy whose root is
/// `mount_root`: `path` below that root, or (a cgroup namespace, where `path` is
/// already relative to the mount) `path` itself.
fn cgroup_dir(mount_point: &str, mount_root: &str, path: &str) -> PathBuf {
    let below = match path.strip_prefix(mount_root) {
        Some(rest) if mount_root == "/" || rest.is_empty() || rest.starts_with('/') => rest,
        _ => path,
    };
    Path::new(mount_point).join(below.trim_start_matches('/'))
}

/// The smallest limit in `dir` and its parents up to `mount_point` (both absolute,
/// read under `root`).
fn walk_up(root: &Path, mount_point: &str, dir: &Path, version: Version) -> Option<CgroupLimit> {
    let top = Path::new(mount_point);
    let mut best: Option<CgroupLimit> = None;
    let mut at = Some(dir);
    while let Some(d) = at.filter(|d| d.starts_with(top)) {
        for name in version.files() {
            let shown = d.join(name);
            let file = root.join(shown.strip_prefix("/").unwrap_or(&shown));
            let Some(bytes) = std::fs::read_to_string(&file)
                .ok()
                .and_then(|s| limit_value(&s))
            else {
                continue;
            };
            if best.as_ref().is_none_or(|b| bytes < b.bytes) {
                best = Some(CgroupLimit { bytes, file: shown });
            }
        }
        at = d.parent();
    }
    best
}

/// A control file's limit; `None` for "max" or a value that means none.
fn limit_value(text: &str) -> Option<u64> {
    let n: u64 = text.trim().parse().ok()?;
    (n < NO_LIMIT_FROM).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MEMINFO: &str = "MemTotal:       24684084 kB\nMemFree:         1000 kB\n";

    /// Lays out a fake root: meminfo, the process's cgroups and mounts, and the given
    /// control files (path under the root, contents).
    fn fake(cgroups: &str, mounts: &str, files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let put = |p: &str, text: &str| {
            let path = dir.path().join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        put("proc/meminfo", MEMINFO);
        put("proc/self/cgroup", cgroups);
        put("proc/self/mountinfo", mounts);
        for (p, text) in files {
            put(p, text);
        }
        dir
    }

    const V1_MOUNTS: &str = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
        32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
        35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
        41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
    const V1_CGROUPS: &str = "5:cpu:/\n4:memory:/jobs/a/b\n0::/\n";
    const UNLIMITED_V1: &str = "9223372036854771712\n";

    #[test]
    fn v1_takes_the_smallest_limit_up_the_hierarchy() {
        let m = "sys/fs/cgroup/memory";
        let root = fake(
            V1_CGROUPS,
            V1_MOUNTS,
            &[
                (&format!("{m}/memory.limit_in_bytes"), UNLIMITED_V1),
                (&format!("{m}/jobs/memory.limit_in_bytes"), "900000000\n"),
                (&format!("{m}/jobs/a/memory.limit_in_bytes"), "300000000\n"),
                (&format!("{m}/jobs/a/b/memory.limit_in_bytes"), UNLIMITED_V1),
            ],
        );
        let limit = read_memory_limit(root.path());
        assert_eq!(limit.machine, Some(24684084 * 1024));
        let cgroup = limit.cgroup.clone().expect("a limit");
        assert_eq!(cgroup.bytes, 300_000_000);
        assert_eq!(
            cgroup.file,
            Path::new("/sys/fs/cgroup/memory/jobs/a/memory.limit_in_bytes")
        );
        assert_eq!(limit.bytes(), Some(300_000_000));
        assert!(limit.describe().contains("jobs/a/memory.limit_in_bytes"));
    }

    #[test]
    fn unlimited_everywhere_is_the_machines_memory() {
        let m = "sys/fs/cgroup/memory";
        let root = fake(
            V1_CGROUPS,
            V1_MOUNTS,
            &[
                (&format!("{m}/memory.limit_in_bytes"), UNLIMITED_V1),
                (&format!("{m}/jobs/a/b/memory.limit_in_bytes"), UNLIMITED_V1),
            ],
        );
        let limit = read_memory_limit(root.path());
        assert_eq!(limit.cgroup, None);
        assert_eq!(limit.bytes(), Some(24684084 * 1024));
        assert!(limit.describe().contains("no cgroup memory limit"));
    }

    #[test]
    fn a_limit_above_the_machines_memory_is_the_machines() {
        let root = fake(
            V1_CGROUPS,
            V1_MOUNTS,
            &[(
                "sys/fs/cgroup/memory/jobs/a/b/memory.limit_in_bytes",
                "1099511627776",
            )],
        );
        assert_eq!(
            read_memory_limit(root.path()).bytes(),
            Some(24684084 * 1024)
        );
    }

    const V2_MOUNTS: &str =
        "30 23 0:27 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";

    #[test]
    fn v2_reads_max_and_high_and_max_means_none() {
        let c = "sys/fs/cgroup";
        let root = fake(
            "0::/kubepods/pod1/ctr\n",
            V2_MOUNTS,
            &[
                (&format!("{c}/kubepods/memory.max"), "max\n"),
                (&format!("{c}/kubepods/pod1/memory.max"), "2000000000\n"),
                (&format!("{c}/kubepods/pod1/memory.high"), "max\n"),
                (&format!("{c}/kubepods/pod1/ctr/memory.max"), "max\n"),
                // memory.high below memory.max: the kernel reclaims above it.
                (&format!("{c}/kubepods/pod1/ctr/memory.high"), "500000000\n"),
            ],
        );
        let cgroup = read_memory_limit(root.path()).cgroup.expect("a limit");
        assert_eq!(cgroup.bytes, 500_000_000);
        assert_eq!(
            cgroup.file,
            Path::new("/sys/fs/cgroup/kubepods/pod1/ctr/memory.high")
        );

        let root = fake(
            "0::/kubepods/pod1/ctr\n",
            V2_MOUNTS,
            &[
                (&format!("{c}/kubepods/pod1/memory.max"), "2000000000\n"),
                (&format!("{c}/kubepods/pod1/ctr/memory.max"), "max\n"),
            ],
        );
        let cgroup = read_memory_limit(root.path()).cgroup.expect("a limit");
        assert_eq!(cgroup.bytes, 2_000_000_000);

        let root = fake(
            "0::/kubepods/pod1/ctr\n",
            V2_MOUNTS,
            &[(&format!("{c}/kubepods/pod1/ctr/memory.max"), "max\n")],
        );
        assert_eq!(read_memory_limit(root.path()).cgroup, None);
    }

    #[test]
    fn a_namespaced_cgroup_is_read_below_the_mount() {
        // Inside a cgroup namespace the process's path is "/" and the mount's root
        // names the container's cgroup on the host.
        let root = fake(
            "0::/\n",
            "30 23 0:27 /../../pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
            &[("sys/fs/cgroup/memory.max", "123456789\n")],
        );
        let cgroup = read_memory_limit(root.path()).cgroup.expect("a limit");
        assert_eq!(cgroup.bytes, 123_456_789);
    }

    #[test]
    fn nothing_readable_is_no_limit_not_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let limit = read_memory_limit(dir.path());
        assert_eq!(
            limit,
            MemoryLimit {
                machine: None,
                cgroup: None
            }
        );
        assert_eq!(limit.bytes(), None);
        assert!(limit.describe().contains("unknown"));
    }

    #[test]
    fn mount_points_with_spaces_are_unescaped() {
        assert_eq!(unescape(r"/mnt/my\040cgroups"), "/mnt/my cgroups");
        assert_eq!(unescape(r"/a\\b"), r"/a\\b");
    }
}
