//! Buffer pools allocated from free lists, register-renaming style.
//!
//! A frame's operands are a [`Lease`] on a slot of a pool (a handle with a stable
//! slot id). Leases are reference counted: every in-flight instruction holds a clone,
//! so a slot goes back to the free list only when the frame is finished *and* the last
//! instruction touching it — even a late one from a removed device — has dropped its
//! clone. A slot can therefore never be handed to a new frame while an old one still
//! writes it.
//!
//! Exhaustion is explicit ([`Exhaustion`]): block for a bounded time, or grow up to a
//! hard cap; either way a caller that cannot get a slot gets [`PoolError`], counted in
//! [`PoolStats`], never a shared buffer.

use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// What `acquire` does when every slot is leased.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exhaustion {
    /// Wait up to `timeout` for a slot to come back.
    Block { timeout: Duration },
    /// Allocate a new slot, up to `max` slots in all; past that, fail at once.
    Grow { max: usize },
}

/// Why no slot was handed out.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum PoolError {
    #[error("buffer pool `{pool}` exhausted: all {slots} slots leased for {waited_ms} ms; raise the pool size or lower the offered load")]
    Exhausted {
        pool: String,
        slots: usize,
        waited_ms: u64,
    },
}

/// Counters of one pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PoolStats {
    /// Slots allocated so far (initial plus grown).
    pub slots: usize,
    /// Slots free now.
    pub free: usize,
    /// Successful acquisitions.
    pub acquired: u64,
    /// Acquisitions that had to wait.
    pub waited: u64,
    /// Slots allocated beyond the initial size.
    pub grown: u64,
    /// Acquisitions refused (exhausted).
    pub refused: u64,
}

struct FreeList<T> {
    free: Vec<(u32, T)>,
    slots: usize,
}

struct Shared<T> {
    name: String,
    list: Mutex<FreeList<T>>,
    returned: Condvar,
    make: Box<dyn Fn() -> T + Send + Sync>,
    exhaustion: Exhaustion,
    acquired: AtomicU64,
    waited: AtomicU64,
    grown: AtomicU64,
    refused: AtomicU64,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, FreeList<T>> {
        // A panic while holding this lock cannot leave the list inconsistent (each
        // operation is a single push or pop), so poisoning is ignored.
        self.list.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A pool of `T` buffers with a free list.
pub struct BufferPool<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Clone for BufferPool<T> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<T: Send + 'static> BufferPool<T> {
    /// A pool named `name` with `initial` slots made by `make`.
    pub fn new(
        name: impl Into<String>,
        initial: usize,
        exhaustion: Exhaustion,
        make: impl Fn() -> T + Send + Sync + 'static,
    ) -> Self {
        let free = (0..initial).map(|i| (i as u32, make())).rev().collect();
        Self {
            shared: Arc::new(Shared {
                name: name.into(),
                list: Mutex::new(FreeList {
                    free,
                    slots: initial,
                }),
                returned: Condvar::new(),
                make: Box::new(make),
                exhaustion,
                acquired: AtomicU64::new(0),
                waited: AtomicU64::new(0),
                grown: AtomicU64::new(0),
                refused: AtomicU64::new(0),
            }),
        }
    }

    /// Lease a slot, following the pool's [`Exhaustion`] rule.
    ///
    /// # Errors
    /// [`PoolError::Exhausted`] when no slot could be had.
    pub fn acquire(&self) -> Result<Lease<T>, PoolError> {
        let sh = &self.shared;
        let start = Instant::now();
        let mut list = sh.lock();
        let mut waited = false;
        loop {
            if let Some((id, value)) = list.free.pop() {
                drop(list);
                sh.acquired.fetch_add(1, Ordering::Relaxed);
                sh.waited.fetch_add(u64::from(waited), Ordering::Relaxed);
                return Ok(self.lease(id, value));
            }
            match sh.exhaustion {
                Exhaustion::Grow { max } if list.slots < max => {
                    let id = list.slots as u32;
                    list.slots += 1;
                    drop(list);
                    // Allocate outside the lock: other slots keep flowing meanwhile.
                    let value = (sh.make)();
                    sh.grown.fetch_add(1, Ordering::Relaxed);
                    sh.acquired.fetch_add(1, Ordering::Relaxed);
                    return Ok(self.lease(id, value));
                }
                Exhaustion::Block { timeout } => {
                    let left = timeout.saturating_sub(start.elapsed());
                    if left.is_zero() {
                        return Err(self.refuse(list.slots, start));
                    }
                    waited = true;
                    list = sh
                        .returned
                        .wait_timeout(list, left)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
                Exhaustion::Grow { .. } => return Err(self.refuse(list.slots, start)),
            }
        }
    }

    fn refuse(&self, slots: usize, start: Instant) -> PoolError {
        self.shared.refused.fetch_add(1, Ordering::Relaxed);
        PoolError::Exhausted {
            pool: self.shared.name.clone(),
            slots,
            waited_ms: start.elapsed().as_millis() as u64,
        }
    }

    fn lease(&self, id: u32, value: T) -> Lease<T> {
        Lease {
            inner: Arc::new(LeaseInner {
                id,
                value: Some(value),
                pool: self.shared.clone(),
            }),
        }
    }

    pub fn stats(&self) -> PoolStats {
        let sh = &self.shared;
        let list = sh.lock();
        PoolStats {
            slots: list.slots,
            free: list.free.len(),
            acquired: sh.acquired.load(Ordering::Relaxed),
            waited: sh.waited.load(Ordering::Relaxed),
            grown: sh.grown.load(Ordering::Relaxed),
            refused: sh.refused.load(Ordering::Relaxed),
        }
    }
}

struct LeaseInner<T> {
    id: u32,
    value: Option<T>,
    pool: Arc<Shared<T>>,
}

impl<T> Drop for LeaseInner<T> {
    fn drop(&mut self) {
        if let Some(v) = self.value.take() {
            self.pool.lock().free.push((self.id, v));
            self.pool.returned.notify_one();
        }
    }
}

/// A leased slot: a cheap, clonable handle; the slot returns to the free list when
/// the last clone is dropped.
pub struct Lease<T> {
    inner: Arc<LeaseInner<T>>,
}

impl<T> Clone for Lease<T> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<T> Lease<T> {
    /// The slot's stable id within its pool (the "physical register").
    pub fn slot_id(&self) -> u32 {
        self.inner.id
    }

    /// Live handles on this slot, this one included: 1 means no one else holds it
    /// (the frame it carried has ended everywhere else).
    pub fn holders(&self) -> usize {
        Arc::strong_count(&self.inner)
    }
}

impl<T> Deref for Lease<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // Only `LeaseInner::drop` takes the value, so it is present while a Lease lives.
        self.inner
            .value
            .as_ref()
            .unwrap_or_else(|| unreachable!("lease value taken before drop"))
    }
}

impl<T> std::fmt::Debug for Lease<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Lease({}#{})", self.inner.pool.name, self.inner.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn slots_are_reused_after_the_last_clone_drops() {
        let pool = BufferPool::new("t", 2, Exhaustion::Grow { max: 2 }, || vec![0u8; 4]);
        let a = pool.acquire().unwrap();
        let a2 = a.clone();
        assert_eq!(a.holders(), 2);
        let b = pool.acquire().unwrap();
        assert_ne!(a.slot_id(), b.slot_id());
        assert!(matches!(
            pool.acquire(),
            Err(PoolError::Exhausted { slots: 2, .. })
        ));
        drop(a);
        // a2 still holds the slot.
        assert!(pool.acquire().is_err());
        assert_eq!(a2.holders(), 1);
        let id = a2.slot_id();
        drop(a2);
        let c = pool.acquire().unwrap();
        assert_eq!(c.slot_id(), id);
        let s = pool.stats();
        assert_eq!((s.slots, s.free, s.acquired, s.refused), (2, 0, 3, 2));
        drop((b, c));
        assert_eq!(pool.stats().free, 2);
    }

    #[test]
    fn grow_allocates_up_to_the_cap() {
        let pool = BufferPool::new("g", 1, Exhaustion::Grow { max: 3 }, || 0u32);
        let held: Vec<_> = (0..3).map(|_| pool.acquire().unwrap()).collect();
        let mut ids: Vec<u32> = held.iter().map(Lease::slot_id).collect();
        ids.sort_unstable();
        assert_eq!(ids, vec![0, 1, 2]);
        assert!(pool.acquire().is_err());
        assert_eq!(pool.stats().grown, 2);
    }

    #[test]
    fn block_waits_for_a_return_or_times_out() {
        let pool = BufferPool::new(
            "b",
            1,
            Exhaustion::Block {
                timeout: Duration::from_millis(20),
            },
            || 0u32,
        );
        let held = pool.acquire().unwrap();
        let err = pool.acquire().unwrap_err();
        assert!(err.to_string().contains("exhausted"));
        let p2 = pool.clone();
        let t = std::thread::spawn(move || p2.acquire().map(|l| l.slot_id()));
        std::thread::sleep(Duration::from_millis(5));
        drop(held);
        // The waiter either got the returned slot or (on a very slow machine) timed
        // out; it never gets a slot that is still leased.
        if let Ok(id) = t.join().unwrap() {
            assert_eq!(id, 0);
        }
    }

    #[test]
    fn concurrent_leases_never_share_a_slot() {
        struct Buf {
            busy: AtomicBool,
        }
        let pool = BufferPool::new(
            "c",
            3,
            Exhaustion::Block {
                timeout: Duration::from_secs(10),
            },
            || Buf {
                busy: AtomicBool::new(false),
            },
        );
        let threads: Vec<_> = (0..6)
            .map(|_| {
                let p = pool.clone();
                std::thread::spawn(move || {
                    for _ in 0..300 {
                        let l = p.acquire().unwrap();
                        assert!(
                            !l.busy.swap(true, Ordering::SeqCst),
                            "slot {} shared",
                            l.slot_id()
                        );
                        std::thread::yield_now();
                        l.busy.store(false, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let s = pool.stats();
        assert_eq!((s.slots, s.free, s.acquired), (3, 3, 1800));
    }
}
