//! The time a store measures TTLs against. Tests replace it with a [`FakeClock`] instead of
//! sleeping.

use std::sync::atomic::{AtomicU64, Ordering};

/// A source of "now" in milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + 'static {
    /// Now.
    fn now_ms(&self) -> u64;
}

/// The system's clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        crate::now_ms()
    }
}

/// A clock that moves only when told.
///
/// ```
/// # use stategraph_checkpoint::store::{Clock, FakeClock};
/// let clock = FakeClock::at(1_000);
/// clock.advance(500);
/// assert_eq!(clock.now_ms(), 1_500);
/// ```
#[derive(Debug, Default)]
pub struct FakeClock(AtomicU64);

impl FakeClock {
    /// A clock showing `ms`.
    pub fn at(ms: u64) -> Self {
        FakeClock(AtomicU64::new(ms))
    }

    /// Moves it forward.
    pub fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for FakeClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}
