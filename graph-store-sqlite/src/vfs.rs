//! Two SQLite VFSs that write a commit's write-ahead-log frames with one `pwrite` instead of two a
//! frame: [`NAME`] for `Sync` stores, [`NAME_ASYNC`] for `Async` ones.
//!
//! SQLite writes each WAL frame as two writes, its 24-byte header and its page, so a sequential
//! commit of seven frames is fourteen `pwrite64` calls before its `fdatasync`. On this project's
//! machines a small `pwrite64` costs about 6 µs of system time, so the calls, not the bytes, were
//! about a fifth of a durable commit (bench/analysis.md, "The WAL's writes in one call"). This VFS
//! wraps the default one (`unix`) and changes the files SQLite opens as write-ahead logs: their
//! writes at consecutive offsets collect in a buffer, which is written, in one call, before anything
//! that could look at the file: a sync, a read, a truncation, a size query, a file control, the
//! close, a write elsewhere in the file, or the buffer reaching [`LIMIT`]. (It also changes how a
//! database file maps its shared-memory index: "The shared-memory index" below.)
//!
//! It is correct for connections with `synchronous = FULL` only, which is how the store uses it:
//! SQLite then syncs the log after a commit's frames and before it publishes the commit in the WAL
//! index, so the frames are in the file before any reader (of this process or another) can look for
//! them, and (for [`Durability::Sync`](graph_store::Durability)) on the device before the commit is
//! acknowledged. Frames written without a sync (a transaction spilling pages before its commit) are
//! not part of any commit yet. With `synchronous = NORMAL` SQLite publishes a commit without a call
//! on the log after its last frame, so a buffered frame could be missing for a reader.
//!
//! # `Async`: the commit's sync as the point to write, not to sync
//!
//! A [`Durability::Async`](graph_store::Durability) store's writer opens through the second VFS,
//! [`NAME_ASYNC`], with `synchronous = FULL` and `checkpoint_fullfsync = ON`. SQLite then passes its
//! sync flags as two kinds (`walSyncFlags` in SQLite's pager): the sync after a commit's frames with
//! `SQLITE_SYNC_NORMAL`, and the syncs that order a checkpoint (the log before the database file is
//! written, the log's header when it starts again) with `SQLITE_SYNC_FULL`, which Linux's `unix` VFS
//! makes as the same `fdatasync` (macOS's as `F_FULLFSYNC`, stronger). A log of this VFS writes its
//! buffer at a commit's sync and syncs nothing; every other sync goes to the device. That is
//! `synchronous = NORMAL`'s syncs exactly (NORMAL makes no commit sync and the same checkpoint syncs),
//! with the point before the commit is published, where the buffered frames must reach the file,
//! still marked. The unit test `an_async_log_syncs_for_checkpoints_and_not_for_commits` holds the
//! bundled SQLite to this.
//!
//! A failed write (a full disk) is answered to the call that flushed the buffer (a sync, a read, a
//! later write) with the code the `unix` VFS gave; SQLite fails the transaction as it does for a
//! failed frame write, and the log's frames past its last commit are never read.
//!
//! # The shared-memory index
//!
//! Database files opened through these VFSs keep the `unix` VFS's handle and methods but one:
//! `xShmMap` ([`shm_map_populated`]) faults a region of the log's index in for writing as soon as
//! SQLite creates or grows it, so that a full disk is an error there, not a SIGBUS later (the
//! function's documentation says why).
#![allow(unsafe_code)]
// Every function below is called by SQLite through the C ABI with the pointers the VFS interface
// documents (https://sqlite.org/c3ref/io_methods.html); each `unsafe` block relies on those alone.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::OnceLock;

use rusqlite::ffi;

/// The name the VFS is registered under.
pub(super) const NAME: &CStr = c"graph-coalesced-wal";

/// The name the VFS for `Async` connections is registered under: a commit's sync writes the buffer and
/// does not sync (module docs, "`Async`").
pub(super) const NAME_ASYNC: &CStr = c"graph-coalesced-wal-async";

/// The most a log file buffers before it writes (1 MiB: the frames of a large group commit).
const LIMIT: usize = 1 << 20;

/// The most one call to the `unix` VFS's write may carry: it writes at most 128 KiB less a byte a
/// system call (`seekAndWriteFd` masks the length to 17 bits) and answers `SQLITE_FULL` to a longer
/// write.
const CHUNK: usize = 1 << 16;

/// Registers both VFSs once per process; `false` when SQLite has no default VFS to wrap or refused
/// them (the store then uses the default VFS).
pub(super) fn register() -> bool {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    *REGISTERED.get_or_init(|| {
        // SAFETY: `sqlite3_vfs_find(NULL)` returns the default VFS or null; SQLite never frees it.
        let base = unsafe { ffi::sqlite3_vfs_find(std::ptr::null()) };
        if base.is_null() {
            return false;
        }
        // SAFETY: `base` is the default VFS, registered and never freed.
        unsafe { register_one(base, NAME, open::<true>) && register_one(base, NAME_ASYNC, open::<false>) }
    })
}

/// Registers a VFS `name` wrapping `base` whose `xOpen` is `open`.
///
/// # Safety
/// `base` is a registered VFS (valid for the life of the process).
unsafe fn register_one(
    base: *mut ffi::sqlite3_vfs,
    name: &'static CStr,
    open: unsafe extern "C" fn(
        *mut ffi::sqlite3_vfs,
        ffi::sqlite3_filename,
        *mut ffi::sqlite3_file,
        c_int,
        *mut c_int,
    ) -> c_int,
) -> bool {
    // SAFETY: `base` is a registered VFS, valid for the life of the process.
    let (version, size, pathname) = unsafe { ((*base).iVersion, (*base).szOsFile, (*base).mxPathname) };
    let vfs = Box::leak(Box::new(ffi::sqlite3_vfs {
        iVersion: version.min(2),
        szOsFile: c_int::try_from(inner_offset()).unwrap_or(c_int::MAX).saturating_add(size),
        mxPathname: pathname,
        pNext: std::ptr::null_mut(),
        zName: name.as_ptr(),
        pAppData: base.cast(),
        xOpen: Some(open),
        xDelete: Some(delete),
        xAccess: Some(access),
        xFullPathname: Some(full_pathname),
        xDlOpen: Some(dl_open),
        xDlError: Some(dl_error),
        xDlSym: Some(dl_sym),
        xDlClose: Some(dl_close),
        xRandomness: Some(randomness),
        xSleep: Some(sleep),
        xCurrentTime: Some(current_time),
        xGetLastError: Some(get_last_error),
        xCurrentTimeInt64: Some(current_time_int64),
        xSetSystemCall: None,
        xGetSystemCall: None,
        xNextSystemCall: None,
    }));
    // SAFETY: `vfs` is leaked, so it lives as long as SQLite may use it; not the default.
    let rc = unsafe { ffi::sqlite3_vfs_register(vfs, 0) };
    if rc != ffi::SQLITE_OK {
        tracing::warn!(code = rc, "SQLite refused the coalescing VFS; the log is written frame by frame");
    }
    rc == ffi::SQLITE_OK
}

/// A write-ahead log opened through this VFS: SQLite's handle (`base`, whose methods are
/// [`METHODS`]), the buffer, and the `unix` VFS's own handle, which lives in the same allocation at
/// [`inner_offset`].
#[repr(C)]
struct LogFile {
    base: ffi::sqlite3_file,
    /// The `unix` VFS's handle of the file.
    inner: *mut ffi::sqlite3_file,
    /// Bytes written by SQLite and not yet to the file, for the offsets from `start` on.
    pending: Vec<u8>,
    start: i64,
    /// Whether a commit's sync (`SQLITE_SYNC_NORMAL`) goes to the device: `false` for [`NAME_ASYNC`].
    commit_sync: bool,
    /// Syncs passed to the device, and commit syncs that only wrote the buffer ([`log_syncs`]).
    syncs: (u64, u64),
}

/// Where the wrapped VFS's handle starts in a file's allocation (after a [`LogFile`], aligned).
const fn inner_offset() -> usize {
    let align = 16;
    std::mem::size_of::<LogFile>().div_ceil(align) * align
}

/// The `unix` VFS this one wraps.
///
/// # Safety
/// `vfs` is this VFS (as SQLite passes it to every method).
unsafe fn base(vfs: *mut ffi::sqlite3_vfs) -> *mut ffi::sqlite3_vfs {
    // SAFETY: the caller's contract; `pAppData` was set to the wrapped VFS at registration.
    unsafe { (*vfs).pAppData.cast() }
}

/// `xOpen` of [`NAME`] (`COMMIT_SYNC`) and [`NAME_ASYNC`]: a log as a [`LogFile`] whose commit syncs go
/// to the device when `COMMIT_SYNC`, any other file as the wrapped VFS's own.
unsafe extern "C" fn open<const COMMIT_SYNC: bool>(
    vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    // SAFETY: SQLite gives `file` as `szOsFile` bytes, enough for a `LogFile` and the wrapped
    // handle after it; every other file is the wrapped VFS's own handle at the same address.
    unsafe {
        let base = base(vfs);
        let Some(base_open) = (*base).xOpen else { return ffi::SQLITE_ERROR };
        if flags & ffi::SQLITE_OPEN_MAIN_DB != 0 {
            let rc = base_open(base, name, file, flags, out_flags);
            if rc == ffi::SQLITE_OK {
                populate_shm_maps(file);
            }
            return rc;
        }
        if flags & ffi::SQLITE_OPEN_WAL == 0 {
            return base_open(base, name, file, flags, out_flags);
        }
        let inner = file.cast::<u8>().add(inner_offset()).cast::<ffi::sqlite3_file>();
        (*file).pMethods = std::ptr::null();
        let rc = base_open(base, name, inner, flags, out_flags);
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        file.cast::<LogFile>().write(LogFile {
            base: ffi::sqlite3_file { pMethods: &METHODS },
            inner,
            pending: Vec::new(),
            start: 0,
            commit_sync: COMMIT_SYNC,
            syncs: (0, 0),
        });
        ffi::SQLITE_OK
    }
}

/// `xShmMap` of the `unix` VFS's database files.
type ShmMap = unsafe extern "C" fn(*mut ffi::sqlite3_file, c_int, c_int, c_int, *mut *mut c_void) -> c_int;

/// The `unix` VFS's methods for database files (their address), a copy of them whose `xShmMap` is
/// [`shm_map_populated`], and the `xShmMap` it replaced. Set at the first database file opened through
/// these VFSs; `None` when those methods have no shared memory.
struct MainMethods {
    base: usize,
    patched: &'static ffi::sqlite3_io_methods,
    shm_map: ShmMap,
}

static MAIN_METHODS: OnceLock<Option<MainMethods>> = OnceLock::new();

/// Makes the database file `file` (just opened by the `unix` VFS) map its shared-memory index through
/// [`shm_map_populated`].
///
/// # Safety
/// `file` was opened successfully by the wrapped VFS, and SQLite has not used it yet.
unsafe fn populate_shm_maps(file: *mut ffi::sqlite3_file) {
    // SAFETY: an open file's methods are set and live as long as the VFS (the `unix` VFS's are
    // statics).
    let methods = unsafe { (*file).pMethods };
    if methods.is_null() {
        return;
    }
    let main = MAIN_METHODS.get_or_init(|| {
        // SAFETY: as above.
        let base = unsafe { *methods };
        let shm_map = base.xShmMap.filter(|_| base.iVersion >= 2)?;
        let patched =
            Box::leak(Box::new(ffi::sqlite3_io_methods { xShmMap: Some(shm_map_populated), ..base }));
        Some(MainMethods { base: methods as usize, patched, shm_map })
    });
    if let Some(main) = main
        && main.base == methods as usize
    {
        // SAFETY: the same methods but `xShmMap`, which calls the original; `file` is not in use yet.
        unsafe { (*file).pMethods = main.patched };
    }
}

/// `xShmMap` of a database file opened through these VFSs: the `unix` VFS's, then, for a region it
/// created or grew (`extend`), every page of the region faulted in for writing at once
/// (`MADV_POPULATE_WRITE`).
///
/// Why: the `unix` VFS grows the index file by writing one byte at the end of each 4 KiB page. On a
/// file system whose blocks are smaller (a small ext4 has 1 KiB blocks) the rest of each page stays a
/// hole, which SQLite then fills through the mapping; on a full disk the kernel has no block to give
/// and kills the process with SIGBUS (measured: docs/stores.md, "How it is tested"). Faulted in here,
/// the blocks are allocated before SQLite touches the pages, and a full disk is an error
/// (`SQLITE_FULL`) instead of a signal. A kernel without the advice (before Linux 5.14) maps as before.
unsafe extern "C" fn shm_map_populated(
    file: *mut ffi::sqlite3_file,
    region: c_int,
    size: c_int,
    extend: c_int,
    out: *mut *mut c_void,
) -> c_int {
    let Some(Some(main)) = MAIN_METHODS.get() else { return ffi::SQLITE_IOERR_SHMMAP };
    // SAFETY: SQLite's own arguments, passed on to the method this one replaced.
    let rc = unsafe { (main.shm_map)(file, region, size, extend, out) };
    // SAFETY: `out` is SQLite's pointer to the mapped address, set by the call above.
    if rc != ffi::SQLITE_OK || extend == 0 || out.is_null() || unsafe { (*out).is_null() } {
        return rc;
    }
    #[cfg(target_os = "linux")]
    {
        let Ok(len) = usize::try_from(size) else { return rc };
        // SAFETY: `*out` is the start of a mapping of at least `size` bytes that the `unix` VFS made
        // for this region and keeps until the file's shared memory is unmapped; the advice only faults
        // its pages in, and changes no byte.
        match unsafe { rustix::mm::madvise(*out, len, rustix::mm::Advice::LinuxPopulateWrite) } {
            // EFAULT: a page could not be faulted in (no block for it: the disk is full).
            Err(e) if e == rustix::io::Errno::FAULT => return ffi::SQLITE_FULL,
            _ => {}
        }
    }
    rc
}

/// The methods of a [`LogFile`]. Version 1: SQLite uses the shared-memory and memory-map methods on
/// the database file only, never on its log.
static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 1,
    xClose: Some(close),
    xRead: Some(read),
    xWrite: Some(write),
    xTruncate: Some(truncate),
    xSync: Some(sync),
    xFileSize: Some(file_size),
    xLock: Some(lock),
    xUnlock: Some(unlock),
    xCheckReservedLock: Some(check_reserved_lock),
    xFileControl: Some(file_control),
    xSectorSize: Some(sector_size),
    xDeviceCharacteristics: Some(device_characteristics),
    xShmMap: None,
    xShmLock: None,
    xShmBarrier: None,
    xShmUnmap: None,
    xFetch: None,
    xUnfetch: None,
};

/// The log file of a handle SQLite passes to a [`METHODS`] function.
///
/// # Safety
/// `file` was opened by [`open`] as a log (its methods are [`METHODS`]) and is not closed.
unsafe fn log<'a>(file: *mut ffi::sqlite3_file) -> &'a mut LogFile {
    // SAFETY: the caller's contract; SQLite calls a file's methods one at a time.
    unsafe { &mut *file.cast::<LogFile>() }
}

/// The syncs of the write-ahead log `conn` has open through this VFS: those passed to the device, and
/// the commit syncs that only wrote the buffer (an `Async` log's). `None` when `conn` has no log open
/// through it.
pub(super) fn log_syncs(conn: &rusqlite::Connection) -> Option<(u64, u64)> {
    let mut file: *mut ffi::sqlite3_file = std::ptr::null_mut();
    // SAFETY: `conn` is open; `SQLITE_FCNTL_JOURNAL_POINTER` writes the main database's journal (in
    // WAL mode its log) handle, or null, to `file`, which SQLite keeps open while `conn` is.
    let rc = unsafe {
        ffi::sqlite3_file_control(
            conn.handle(),
            c"main".as_ptr(),
            ffi::SQLITE_FCNTL_JOURNAL_POINTER,
            (&raw mut file).cast(),
        )
    };
    // SAFETY: a non-null handle is open; its methods are `METHODS` only if this VFS opened it as a log.
    if rc != ffi::SQLITE_OK || file.is_null() || !std::ptr::eq(unsafe { (*file).pMethods }, &METHODS) {
        return None;
    }
    // SAFETY: opened by `open` as a log, and `conn` is not in a call on another thread (`&`
    // of a connection that is not `Sync`).
    Some(unsafe { log(file) }.syncs)
}

/// The operating system's error of the last failed I/O call SQLite reported on `conn`
/// (`sqlite3_system_errno`), if there is one. SQLite's own text for an I/O failure is "disk I/O error"
/// whatever the cause. Only meaningful right after `conn` returned an I/O error: SQLite keeps the
/// value until the next one.
pub(super) fn os_error(conn: &rusqlite::Connection) -> Option<std::io::Error> {
    // SAFETY: `conn` is open, and the call only reads an integer of its handle.
    let errno = unsafe { ffi::sqlite3_system_errno(conn.handle()) };
    (errno != 0).then(|| std::io::Error::from_raw_os_error(errno))
}

/// The wrapped handle's methods.
///
/// # Safety
/// As [`log`].
unsafe fn inner_methods(log: &LogFile) -> &ffi::sqlite3_io_methods {
    // SAFETY: the wrapped VFS opened `inner` successfully, so its methods are set.
    unsafe { &*(*log.inner).pMethods }
}

impl LogFile {
    /// Writes the buffered bytes to the file, in one call; the buffer is empty afterwards, written
    /// or not (a failed write's frames are past the log's last commit: SQLite never reads them).
    ///
    /// # Safety
    /// `self` is an open [`LogFile`].
    unsafe fn flush(&mut self) -> c_int {
        if self.pending.is_empty() {
            return ffi::SQLITE_OK;
        }
        // SAFETY: the caller's contract.
        let methods = unsafe { inner_methods(self) };
        let Some(write) = methods.xWrite else { return ffi::SQLITE_IOERR_WRITE };
        let mut rc = ffi::SQLITE_OK;
        let mut offset = self.start;
        for chunk in self.pending.chunks(CHUNK) {
            // `CHUNK` fits in a `c_int`.
            let len = chunk.len() as c_int;
            // SAFETY: `inner` is open; the pointer and length are the chunk's.
            rc = unsafe { write(self.inner, chunk.as_ptr().cast(), len, offset) };
            if rc != ffi::SQLITE_OK {
                break;
            }
            offset += i64::from(len);
        }
        self.pending.clear();
        rc
    }
}

/// Calls the wrapped handle's method `$method` with `$args`; `$missing` when it has none.
macro_rules! passed {
    ($file:ident, $method:ident, $missing:expr $(, $arg:expr)*) => {{
        // SAFETY: SQLite calls this only on a log file this VFS opened.
        let log = unsafe { log($file) };
        // SAFETY: as above; the arguments are SQLite's own.
        unsafe {
            match inner_methods(log).$method {
                Some(method) => method(log.inner $(, $arg)*),
                None => $missing,
            }
        }
    }};
}

/// As [`passed!`] after writing the buffer, or answers the write's error.
macro_rules! flushed {
    ($file:ident, $method:ident $(, $arg:expr)*) => {{
        // SAFETY: SQLite calls this only on a log file this VFS opened.
        let rc = unsafe { log($file).flush() };
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        passed!($file, $method, ffi::SQLITE_IOERR $(, $arg)*)
    }};
}

unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite closes a file once, after its last other call.
    let flushed = unsafe { log(file).flush() };
    let closed = passed!(file, xClose, ffi::SQLITE_OK);
    // SAFETY: the `LogFile` was written by `open` and is not used after this.
    unsafe { std::ptr::drop_in_place(file.cast::<LogFile>()) };
    if flushed != ffi::SQLITE_OK { flushed } else { closed }
}

unsafe extern "C" fn read(
    file: *mut ffi::sqlite3_file,
    buf: *mut c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    flushed!(file, xRead, buf, amount, offset)
}

unsafe extern "C" fn write(
    file: *mut ffi::sqlite3_file,
    buf: *const c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    // SAFETY: SQLite calls this only on a log file this VFS opened.
    let log = unsafe { log(file) };
    let Ok(len) = usize::try_from(amount) else { return ffi::SQLITE_IOERR_WRITE };
    let follows = i64::try_from(log.pending.len()).is_ok_and(|n| log.start + n == offset);
    if !follows || log.pending.len() + len > LIMIT {
        // SAFETY: as above.
        let rc = unsafe { log.flush() };
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        log.start = offset;
    }
    // SAFETY: SQLite passes `amount` readable bytes at `buf`.
    log.pending.extend_from_slice(unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) });
    ffi::SQLITE_OK
}

unsafe extern "C" fn truncate(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    flushed!(file, xTruncate, size)
}

unsafe extern "C" fn sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    // SAFETY: SQLite calls this only on a log file this VFS opened.
    let log = unsafe { log(file) };
    // The low four bits are the kind (`SQLITE_SYNC_DATAONLY`, 0x10, may be added).
    if !log.commit_sync && flags & 0x0f == ffi::SQLITE_SYNC_NORMAL {
        log.syncs.1 += 1;
        // SAFETY: as above.
        return unsafe { log.flush() };
    }
    log.syncs.0 += 1;
    flushed!(file, xSync, flags)
}

unsafe extern "C" fn file_size(file: *mut ffi::sqlite3_file, size: *mut i64) -> c_int {
    flushed!(file, xFileSize, size)
}

unsafe extern "C" fn lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    passed!(file, xLock, ffi::SQLITE_OK, level)
}

unsafe extern "C" fn unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    passed!(file, xUnlock, ffi::SQLITE_OK, level)
}

unsafe extern "C" fn check_reserved_lock(file: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    passed!(file, xCheckReservedLock, ffi::SQLITE_OK, out)
}

unsafe extern "C" fn file_control(file: *mut ffi::sqlite3_file, op: c_int, arg: *mut c_void) -> c_int {
    flushed!(file, xFileControl, op, arg)
}

unsafe extern "C" fn sector_size(file: *mut ffi::sqlite3_file) -> c_int {
    passed!(file, xSectorSize, 4096)
}

unsafe extern "C" fn device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    passed!(file, xDeviceCharacteristics, 0)
}

/// Forwards a VFS method to the wrapped VFS.
macro_rules! forward {
    ($(fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty = $method:ident, $missing:expr;)*) => {$(
        unsafe extern "C" fn $name(vfs: *mut ffi::sqlite3_vfs $(, $arg: $ty)*) -> $ret {
            // SAFETY: SQLite passes this VFS and the method's own arguments.
            unsafe {
                let base = base(vfs);
                match (*base).$method {
                    Some(method) => method(base $(, $arg)*),
                    None => $missing,
                }
            }
        }
    )*};
}

forward! {
    fn delete(name: *const c_char, sync_dir: c_int) -> c_int = xDelete, ffi::SQLITE_IOERR_DELETE;
    fn access(name: *const c_char, flags: c_int, out: *mut c_int) -> c_int = xAccess, ffi::SQLITE_IOERR_ACCESS;
    fn full_pathname(name: *const c_char, n: c_int, out: *mut c_char) -> c_int = xFullPathname, ffi::SQLITE_CANTOPEN;
    fn dl_open(name: *const c_char) -> *mut c_void = xDlOpen, std::ptr::null_mut();
    fn dl_error(n: c_int, out: *mut c_char) -> () = xDlError, ();
    fn dl_sym(handle: *mut c_void, symbol: *const c_char) -> Option<unsafe extern "C" fn(*mut ffi::sqlite3_vfs, *mut c_void, *const c_char)> = xDlSym, None;
    fn dl_close(handle: *mut c_void) -> () = xDlClose, ();
    fn randomness(n: c_int, out: *mut c_char) -> c_int = xRandomness, 0;
    fn sleep(micros: c_int) -> c_int = xSleep, 0;
    fn current_time(out: *mut f64) -> c_int = xCurrentTime, ffi::SQLITE_ERROR;
    fn get_last_error(n: c_int, out: *mut c_char) -> c_int = xGetLastError, 0;
    fn current_time_int64(out: *mut i64) -> c_int = xCurrentTimeInt64, ffi::SQLITE_ERROR;
}

#[cfg(test)]
mod tests {
    use rusqlite::{Connection, OpenFlags};

    use super::*;

    /// Which VFS a test connection opens through.
    #[derive(Clone, Copy, Debug)]
    enum Vfs {
        /// SQLite's default.
        Default,
        /// [`NAME`].
        Sync,
        /// [`NAME_ASYNC`], with `checkpoint_fullfsync` on.
        Async,
    }

    /// A connection as the store's writer opens one: WAL, `synchronous = FULL`; through `vfs`.
    /// Automatic checkpoints off, so that committed pages stay in the log.
    fn open(path: &std::path::Path, vfs: Vfs) -> Connection {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        assert!(register(), "the VFSs register");
        let conn = match vfs {
            Vfs::Default => Connection::open_with_flags(path, flags),
            Vfs::Sync => Connection::open_with_flags_and_vfs(path, flags, NAME),
            Vfs::Async => Connection::open_with_flags_and_vfs(path, flags, NAME_ASYNC),
        }
        .unwrap();
        let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)).unwrap();
        assert_eq!(mode, "wal");
        conn.execute_batch("PRAGMA synchronous = FULL; PRAGMA wal_autocheckpoint = 0").unwrap();
        if let Vfs::Async = vfs {
            conn.execute_batch("PRAGMA checkpoint_fullfsync = ON").unwrap();
        }
        conn
    }

    /// A copy of the database `db.sqlite` in `dir` and its log, taken while its connection is open (what
    /// a crash of the process leaves), opened through SQLite's default VFS; and the copy's folder.
    fn crash_image(dir: &std::path::Path) -> (tempfile::TempDir, Connection) {
        let copy = tempfile::tempdir().unwrap();
        for name in ["db.sqlite", "db.sqlite-wal"] {
            std::fs::copy(dir.join(name), copy.path().join(name)).unwrap();
        }
        let recovered = Connection::open(copy.path().join("db.sqlite")).unwrap();
        (copy, recovered)
    }

    /// Write system calls made by this thread so far (Linux's per-thread I/O accounting).
    #[cfg(target_os = "linux")]
    fn writes_of_this_thread() -> u64 {
        let io = std::fs::read_to_string("/proc/thread-self/io").unwrap();
        io.lines().find_map(|l| l.strip_prefix("syscw: ")).unwrap().trim().parse().unwrap()
    }

    /// The write calls of one transaction of twenty 3,000-byte rows (about 16 frames), the log and
    /// the table already created.
    #[cfg(target_os = "linux")]
    fn writes_of_a_commit(vfs: Vfs) -> u64 {
        let dir = tempfile::tempdir().unwrap();
        let conn = open(&dir.path().join("db.sqlite"), vfs);
        conn.execute_batch("CREATE TABLE t (b BLOB)").unwrap();
        let before = writes_of_this_thread();
        conn.execute_batch(
            "BEGIN; INSERT INTO t WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n \
             WHERE i < 20) SELECT randomblob(3000) FROM n; COMMIT",
        )
        .unwrap();
        writes_of_this_thread() - before
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_commit_writes_its_frames_in_one_call() {
        let plain = writes_of_a_commit(Vfs::Default);
        // SQLite's own VFS: a header and a page a frame.
        assert!(plain >= 30, "the default VFS made {plain} write calls");
        for vfs in [Vfs::Sync, Vfs::Async] {
            // These: the frames in 64 KiB chunks (about 66 KiB here).
            let coalesced = writes_of_a_commit(vfs);
            assert!(coalesced <= 2, "{vfs:?} made {coalesced} write calls (the default VFS {plain})");
        }
    }

    /// A transaction larger than the buffer and than the page cache: SQLite spills frames before the
    /// commit, reads spilled pages back, overwrites frames it wrote earlier in the transaction and
    /// then rewrites their checksums. A copy of the database and its log taken while the connection
    /// is open (what a crash leaves) recovers every committed row, through SQLite's default VFS.
    #[test]
    fn what_a_coalesced_log_holds_is_what_sqlite_wrote() {
        for vfs in [Vfs::Sync, Vfs::Async] {
            what_a_log_holds_is_what_sqlite_wrote(vfs);
        }
    }

    fn what_a_log_holds_is_what_sqlite_wrote(vfs: Vfs) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let conn = open(&path, vfs);
        conn.execute_batch("PRAGMA cache_size = 10; CREATE TABLE t (id INTEGER PRIMARY KEY, b BLOB)")
            .unwrap();
        conn.execute_batch("BEGIN").unwrap();
        for id in 0..400_i64 {
            conn.execute("INSERT INTO t VALUES (?1, zeroblob(10000))", [id]).unwrap();
        }
        // Pages spilled earlier, changed again: frames overwritten in place.
        conn.execute("UPDATE t SET b = randomblob(10000) WHERE id % 50 = 0", []).unwrap();
        let expected: Vec<(i64, Vec<u8>)> = {
            let mut rows = conn.prepare("SELECT id, b FROM t WHERE id % 50 = 0 ORDER BY id").unwrap();
            rows.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect()
        };
        conn.execute_batch("COMMIT").unwrap();
        let log_bytes = std::fs::metadata(dir.path().join("db.sqlite-wal")).unwrap().len();
        assert!(log_bytes > 3 * LIMIT as u64, "the log holds {log_bytes} bytes");

        let (_copy, recovered) = crash_image(dir.path());
        let check: String = recovered.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
        assert_eq!(check, "ok");
        let count: i64 = recovered.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(count, 400);
        let mut rows = recovered.prepare("SELECT id, b FROM t WHERE id % 50 = 0 ORDER BY id").unwrap();
        let got: Vec<(i64, Vec<u8>)> =
            rows.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect();
        assert_eq!(got.len(), expected.len());
        assert!(got == expected, "{vfs:?}: the recovered rows differ from the committed ones");
        drop(conn);
    }

    /// Through the `Async` VFS a commit's sync writes its frames and goes no further, and every
    /// commit is in the file when it returns: a connection through SQLite's default VFS reads each
    /// one at once, and a copy of the files (what a process crash leaves) holds them all. A
    /// checkpoint's syncs reach the device; through the `Sync` VFS every commit's does.
    #[test]
    fn an_async_log_syncs_for_checkpoints_and_not_for_commits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let conn = open(&path, Vfs::Async);
        conn.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, b BLOB)").unwrap();
        let reader = Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        let (device, _) = log_syncs(&conn).expect("the log is open through the VFS");
        // The log's header, synced before its first frame (as under `synchronous = NORMAL`).
        assert!(device <= 1, "{device} syncs before the commits");
        for id in 0..20_i64 {
            conn.execute("INSERT INTO t VALUES (?1, randomblob(3000))", [id]).unwrap();
            let seen: i64 = reader.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap();
            assert_eq!(seen, id + 1, "a reader on the default VFS sees every commit at once");
        }
        let (after, written) = log_syncs(&conn).unwrap();
        assert_eq!(after, device, "no commit synced the log");
        assert!(written >= 20, "{written} commit syncs written for 20 commits");
        let (_copy, recovered) = crash_image(dir.path());
        let count: i64 = recovered.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(count, 20, "a copy taken while the connection is open holds every commit");
        drop(reader);
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).unwrap();
        let (checkpointed, _) = log_syncs(&conn).unwrap();
        assert!(checkpointed > after, "the checkpoint synced the log: {checkpointed} syncs against {after}");

        let sync_dir = tempfile::tempdir().unwrap();
        let conn = open(&sync_dir.path().join("db.sqlite"), Vfs::Sync);
        conn.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, b BLOB)").unwrap();
        let (before, _) = log_syncs(&conn).unwrap();
        for id in 0..20_i64 {
            conn.execute("INSERT INTO t VALUES (?1, randomblob(3000))", [id]).unwrap();
        }
        let (device, written) = log_syncs(&conn).unwrap();
        assert!(device >= before + 20, "Sync: {device} device syncs (from {before}) for 20 commits");
        assert_eq!(written, 0);
    }
}
