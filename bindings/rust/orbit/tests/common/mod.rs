//! Helpers shared by the test files: fleet names unique per run, removed at the end.
#![allow(dead_code)]
use std::sync::atomic::{AtomicU32, Ordering};

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A fleet name no other run uses ("t-rs-<tag>-<pid>-<n>"), unlinked when dropped.
pub struct Name(pub String);

impl Name {
    pub fn new(tag: &str) -> Name {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let name = format!("t-rs-{}-{}-{}", tag, std::process::id(), n);
        let _ = orbit::Fleet::unlink(&name);
        Name(name)
    }
}

impl std::ops::Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl Drop for Name {
    fn drop(&mut self) {
        let _ = orbit::Fleet::unlink(&self.0);
    }
}
