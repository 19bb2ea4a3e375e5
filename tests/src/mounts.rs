//! Mounts and full file systems for the fault tests (`faults_device`, `sqlite_faults`): a tmpfs or
//! device mount unmounted on drop, and a filler file that leaves a chosen number of bytes free. Root
//! only; the tests check their prerequisites first.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Why this machine cannot mount a tmpfs and fill it (not root, a tool missing, no right to mount), if
/// it cannot: the prerequisite every test of this module's helpers shares.
pub fn cannot_fill_a_tmpfs() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let uid = status.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|l| l.split_whitespace().next());
    if uid != Some("0") {
        return Some(format!("not root (uid {})", uid.unwrap_or("unknown")));
    }
    for tool in ["mount", "umount", "fallocate", "stat"] {
        if Command::new(tool).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_err() {
            return Some(format!("`{tool}` is not installed"));
        }
    }
    // Root in a container may still lack the right to mount.
    let probe = tempfile::tempdir().expect("tempdir");
    match Mounted::tmpfs(probe.path(), 1 << 20) {
        Ok(m) => m.unmount().err().map(|e| format!("cannot unmount a tmpfs: {e}")),
        Err(e) => Some(format!("cannot mount a tmpfs: {e}")),
    }
}

/// Runs a command, returning its stdout, or what went wrong with its stderr.
pub fn sh(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{program} {} failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A mount, unmounted on drop (retrying while a dropped store's last background writes hold it).
pub struct Mounted {
    path: PathBuf,
}

impl Mounted {
    /// Mounts a tmpfs of `bytes` at `path`.
    pub fn tmpfs(path: &Path, bytes: u64) -> Result<Self, String> {
        sh("mount", &["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs", &path.to_string_lossy()])?;
        Ok(Mounted { path: path.to_path_buf() })
    }

    /// Mounts the ext4 on `dev` at `path`.
    pub fn device(dev: &str, path: &Path) -> Result<Self, String> {
        sh("mount", &["-t", "ext4", dev, &path.to_string_lossy()])?;
        Ok(Mounted { path: path.to_path_buf() })
    }

    /// Mounts it again read-only (as the kernel leaves an ext4 after an error with `errors=remount-ro`).
    pub fn remount_read_only(&self) -> Result<(), String> {
        sh("mount", &["-o", "remount,ro", &self.path.to_string_lossy()]).map(drop)
    }

    /// Unmounts now; the guard then does nothing.
    pub fn unmount(mut self) -> Result<(), String> {
        let r = unmount(&self.path);
        self.path = PathBuf::new();
        r
    }
}

/// Unmounts `path`, trying again for up to 10 s while it is busy.
pub fn unmount(path: &Path) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match sh("umount", &[&path.to_string_lossy()]) {
            Ok(_) => return Ok(()),
            Err(e) if Instant::now() > deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if self.path.as_os_str().is_empty() {
            return;
        }
        if let Err(e) = unmount(&self.path) {
            eprintln!("{e}; detaching lazily");
            let _ = sh("umount", &["-l", &self.path.to_string_lossy()]);
        }
    }
}

/// Bytes available in the file system holding `path` (ext4 keeps back some clusters even from root).
pub fn free_bytes(path: &Path) -> u64 {
    let out = sh("stat", &["-f", "-c", "%a %S", &path.to_string_lossy()]).expect("stat -f");
    let mut it = out.split_whitespace().map(|n| n.parse::<u64>().expect("a number"));
    it.next().expect("free blocks") * it.next().expect("block size")
}

/// Fills the file system of `dir` with a file `filler` so that about `leave` bytes stay free.
pub fn fill(dir: &Path, leave: u64) -> PathBuf {
    let filler = dir.join("filler");
    let mut size = free_bytes(dir).saturating_sub(leave).max(4096);
    // ext4 needs a few blocks of its own for the filler's extent tree: shrink until it fits.
    loop {
        match sh("fallocate", &["-l", &size.to_string(), &filler.to_string_lossy()]) {
            Ok(_) => return filler,
            Err(e) if e.contains("No space left") && size > 1 << 20 => size -= 64 << 10,
            Err(e) => panic!("cannot make the filler: {e}"),
        }
    }
}
