//! ConfigMaps holding moved values, kept in memory by name. They are
//! immutable and named by their content's digest, so a name read once is
//! never stale; the cache only saves requests, and forgetting everything
//! is always safe.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Most bytes of pieces kept; past it the cache starts over.
const CACHE_BYTES: usize = 64 << 20;

/// Pieces of moved values by ConfigMap name.
#[derive(Default)]
pub struct Cache {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    pieces: HashMap<String, Arc<str>>,
    bytes: usize,
}

impl Cache {
    /// The piece the ConfigMap `name` holds, when known.
    pub fn get(&self, name: &str) -> Option<Arc<str>> {
        self.lock().pieces.get(name).cloned()
    }

    /// Remembers that `name` exists and holds `piece`.
    pub fn put(&self, name: &str, piece: Arc<str>) {
        let mut inner = self.lock();
        if inner.bytes + piece.len() > CACHE_BYTES {
            inner.pieces.clear();
            inner.bytes = 0;
        }
        inner.bytes += piece.len();
        if let Some(old) = inner.pieces.insert(name.to_string(), piece) {
            inner.bytes -= old.len();
        }
    }

    /// Forgets `name` (it was deleted).
    pub fn forget(&self, name: &str) {
        let mut inner = self.lock();
        if let Some(old) = inner.pieces.remove(name) {
            inner.bytes -= old.len();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves a map that is still whole.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_forgets_and_starts_over_when_full() {
        let cache = Cache::default();
        cache.put("a", Arc::from("one"));
        assert_eq!(cache.get("a").as_deref(), Some("one"));
        cache.forget("a");
        assert_eq!(cache.get("a"), None);
        cache.put("b", Arc::from("x".repeat(CACHE_BYTES - 1)));
        cache.put("c", Arc::from("yy"));
        assert_eq!(cache.get("b"), None, "over its size the cache starts over");
        assert_eq!(cache.get("c").as_deref(), Some("yy"));
    }
}
