//! The fail point the conformance suite arms to check that a failed commit leaves nothing behind.

/// Test hook shared by the backends (feature `test-hooks`): makes the next commit fail after its `n`-th
/// write, inside the transaction, so the conformance suite can check that nothing of it becomes visible.
#[cfg(feature = "test-hooks")]
#[derive(Debug, Clone, Default)]
pub struct FailPoint(std::sync::Arc<std::sync::atomic::AtomicUsize>);

#[cfg(feature = "test-hooks")]
impl FailPoint {
    /// Arms the fail point: the next commit fails after write `n` (1-based). 0 disarms.
    pub fn fail_after(&self, n: usize) {
        self.0.store(n, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether the fail point is armed (for a backend whose commit is one statement: it then commits
    /// in a transaction, so that the failure can come after the writes).
    pub fn armed(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst) != 0
    }

    /// The error a backend returns for the injected failure.
    pub fn error() -> crate::StoreError {
        crate::StoreError::backend("injected failure", "fail point")
    }

    /// Called by a backend after its `n`-th write of a commit; true (once) when armed for `n`.
    pub fn hit(&self, n: usize) -> bool {
        self.0
            .compare_exchange(n, 0, std::sync::atomic::Ordering::SeqCst, std::sync::atomic::Ordering::SeqCst)
            .is_ok()
    }
}

/// Without `test-hooks` the fail point compiles to nothing: it is never armed, `hit` is always false.
#[cfg(not(feature = "test-hooks"))]
#[derive(Debug, Clone, Default)]
pub struct FailPoint;

#[cfg(not(feature = "test-hooks"))]
impl FailPoint {
    /// Never: the fail point exists with the `test-hooks` feature only.
    #[inline(always)]
    pub fn hit(&self, _n: usize) -> bool {
        false
    }

    /// Never armed.
    #[inline(always)]
    pub fn armed(&self) -> bool {
        false
    }

    /// The injected failure's error (never made without `test-hooks`).
    pub fn error() -> crate::StoreError {
        crate::StoreError::backend("injected failure", "fail point")
    }
}
