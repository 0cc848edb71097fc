//! Admission: all-or-nothing claims of capacity across several domains.
use crate::error::{check, timeout_ms, Result};
use crate::fleet::Fleet;
use orbit_sys as sys;
use std::fmt;
use std::ptr;
use std::sync::Arc;
use std::time::Duration;

/// An admission ledger's geometry.
#[derive(Clone, Debug)]
pub struct AdmissionSpec {
    raw: sys::orbit_admission_spec,
}

impl Default for AdmissionSpec {
    fn default() -> Self {
        AdmissionSpec::new()
    }
}

impl AdmissionSpec {
    /// `ORBIT_ADMISSION_SPEC_DEFAULT`: kind 245, 16 domains, 4096 claims, no retention.
    pub fn new() -> AdmissionSpec {
        AdmissionSpec {
            raw: sys::orbit_admission_spec {
                kind: sys::ORBIT_ADMISSION_KIND as u8,
                max_domains: 16,
                max_claims: 4096,
                retained_max_bytes: 0,
                resv: [0; 4],
            },
        }
    }
    /// The segment kind.
    pub fn kind(mut self, kind: u8) -> Self {
        self.raw.kind = kind;
        self
    }
    /// Domains (1..=1024).
    pub fn max_domains(mut self, n: u32) -> Self {
        self.raw.max_domains = n;
        self
    }
    /// Live claims at once (1..=1048576).
    pub fn max_claims(mut self, n: u32) -> Self {
        self.raw.max_claims = n;
        self
    }
    /// Cap on the retained bytes of live retained claims (0: retention disabled).
    pub fn retained_max_bytes(mut self, bytes: u64) -> Self {
        self.raw.retained_max_bytes = bytes;
        self
    }
}

/// What to claim: units of several domains at once, all or nothing.
#[derive(Clone, Debug, Default)]
pub struct Demand {
    claim: Vec<sys::orbit_units>,
    fit: Vec<sys::orbit_units>,
    retained_bytes: u64,
}

impl Demand {
    /// An empty demand (add at least one [`claim`](Demand::claim)).
    pub fn new() -> Demand {
        Demand::default()
    }
    /// Claim `units` of `domain` now.
    pub fn claim(mut self, domain: u32, units: u64) -> Self {
        self.claim.push(sys::orbit_units { domain, units });
        self
    }
    /// `units` of `domain` must fit under its capacity (checked, not charged).
    pub fn fit(mut self, domain: u32, units: u64) -> Self {
        self.fit.push(sys::orbit_units { domain, units });
        self
    }
    /// An optional retained claim of this many bytes (the claim's sum).
    pub fn retained(mut self, bytes: u64) -> Self {
        self.retained_bytes = bytes;
        self
    }
    fn raw(&self) -> sys::orbit_demand {
        sys::orbit_demand {
            claim: self.claim.as_ptr(),
            n_claim: self.claim.len(),
            fit: if self.fit.is_empty() { ptr::null() } else { self.fit.as_ptr() },
            n_fit: self.fit.len(),
            retained_bytes: self.retained_bytes,
        }
    }
}

/// Why a retained claim was skipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// Retention is disabled on this ledger.
    Disabled,
    /// The retained cap would be exceeded.
    Capacity,
}

/// A live claim's plain data: it may be copied to another process of the
/// fleet, which releases it with [`Admission::release_record`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClaimRecord {
    raw: sys::orbit_claim,
}

impl ClaimRecord {
    /// Its serial (never reused by this ledger).
    pub fn serial(&self) -> u64 {
        self.raw.serial
    }
    /// The claimer's node.
    pub fn node(&self) -> u16 {
        self.raw.node
    }
    /// Released already.
    pub fn released(&self) -> bool {
        self.raw.released
    }
}

/// A live claim: its units are charged until it is dropped (or
/// [`release`](Claim::release)d).
#[must_use = "dropping a Claim releases it at once"]
pub struct Claim<'a> {
    raw: sys::orbit_claim,
    admission: &'a Admission,
}

impl Claim<'_> {
    /// Its plain data.
    pub fn record(&self) -> ClaimRecord {
        ClaimRecord { raw: self.raw }
    }
    /// Releases it now, reporting an error (a claim a death report released already).
    pub fn release(mut self) -> Result<()> {
        let r = self.admission.release_raw(&mut self.raw);
        self.raw.released = true;
        r
    }
    /// Keeps the claim charged past this guard (for another process to release).
    pub fn into_record(mut self) -> ClaimRecord {
        let record = self.record();
        self.raw.released = true;
        record
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if !self.raw.released {
            let _ = self.admission.release_raw(&mut self.raw);
        }
    }
}

impl fmt::Debug for Claim<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Claim").field("serial", &self.raw.serial).finish()
    }
}

/// The outcome of [`Admission::try_claim`].
#[derive(Debug)]
pub enum Admit<'a> {
    /// Charged.
    Claimed(Claim<'a>),
    /// Does not fit now: wait past `release_epoch` ([`Admission::wait`]) and try again.
    Deferred {
        /// The change epoch to wait past.
        release_epoch: u64,
        /// The first domain that did not fit.
        blocker_domain: u32,
        /// Its free units.
        blocker_free: u64,
    },
    /// An optional retained claim refused by retention policy: never wait for it.
    Skipped(Skip),
    /// Can never fit (a demand above a domain's capacity).
    Rejected {
        /// The first such domain.
        blocker_domain: u32,
        /// Its capacity.
        blocker_maximum: u64,
    },
}

/// One capacity domain of the ledger.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DomainInfo {
    /// Its id.
    pub domain: u32,
    /// Its capacity.
    pub capacity: u64,
    /// Units in use.
    pub used: u64,
}

pub(crate) struct AdmissionHandle {
    pub(crate) ptr: *mut sys::orbit_admission,
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fleet: Fleet,
}

// SAFETY: admission.h: every call may be made from any thread on a shared handle (close is Drop).
unsafe impl Send for AdmissionHandle {}
// SAFETY: as above.
unsafe impl Sync for AdmissionHandle {}

impl Drop for AdmissionHandle {
    fn drop(&mut self) {
        // SAFETY: claims borrow the Admission, so none is outstanding.
        unsafe { sys::orbit_admission_close(self.ptr) }
    }
}

/// A fleet's admission ledger. `Send + Sync`.
pub struct Admission {
    pub(crate) handle: Arc<AdmissionHandle>,
}

impl Admission {
    /// Opens (creating if needed) the default ledger.
    pub fn open(fleet: &Fleet) -> Result<Admission> {
        Admission::open_with(fleet, &AdmissionSpec::new())
    }

    /// Opens (creating if needed) the ledger `spec` names.
    pub fn open_with(fleet: &Fleet, spec: &AdmissionSpec) -> Result<Admission> {
        let mut ptr = ptr::null_mut();
        // SAFETY: a live fleet; spec and ptr valid.
        check(unsafe { sys::orbit_admission_open(fleet.ptr(), &spec.raw, &mut ptr) }, "orbit_admission_open")?;
        Ok(Admission { handle: Arc::new(AdmissionHandle { ptr, fleet: fleet.clone() }) })
    }

    pub(crate) fn ptr(&self) -> *mut sys::orbit_admission {
        self.handle.ptr
    }

    fn release_raw(&self, raw: &mut sys::orbit_claim) -> Result<()> {
        // SAFETY: a live ledger; raw is a claim's data.
        check(unsafe { sys::orbit_admission_release(self.ptr(), raw) }, "orbit_admission_release").map(|_| ())
    }

    /// Creates a domain with that capacity, or changes an existing one's.
    pub fn set_capacity(&self, domain: u32, capacity: u64) -> Result<()> {
        // SAFETY: a live ledger.
        check(unsafe { sys::orbit_admission_set_capacity(self.ptr(), domain, capacity) }, "orbit_admission_set_capacity")
            .map(|_| ())
    }

    /// One attempt to claim `demand`.
    pub fn try_claim(&self, demand: &Demand) -> Result<Admit<'_>> {
        let raw_demand = demand.raw();
        let mut r = sys::orbit_admit_result::default();
        // SAFETY: a live ledger; the demand's vectors outlive the call; r writable.
        check(unsafe { sys::orbit_admission_try_claim(self.ptr(), &raw_demand, &mut r) }, "orbit_admission_try_claim")?;
        Ok(self.admit(r))
    }

    pub(crate) fn admit(&self, r: sys::orbit_admit_result) -> Admit<'_> {
        match r.outcome {
            sys::ORBIT_ADMIT_CLAIMED => Admit::Claimed(Claim { raw: r.claim, admission: self }),
            sys::ORBIT_ADMIT_DEFERRED => Admit::Deferred {
                release_epoch: r.release_epoch,
                blocker_domain: r.blocker_domain,
                blocker_free: r.blocker_free,
            },
            sys::ORBIT_ADMIT_SKIPPED => {
                Admit::Skipped(if r.skip == sys::ORBIT_SKIP_CAPACITY { Skip::Capacity } else { Skip::Disabled })
            }
            _ => Admit::Rejected { blocker_domain: r.blocker_domain, blocker_maximum: r.blocker_maximum },
        }
    }

    /// Claims `demand`, waiting (blocking) through deferrals up to `timeout`;
    /// returns the final outcome (never `Deferred` unless the time ran out).
    pub fn claim_blocking(&self, demand: &Demand, timeout: Option<Duration>) -> Result<Admit<'_>> {
        let deadline = timeout.map(|t| std::time::Instant::now() + t);
        loop {
            match self.try_claim(demand)? {
                Admit::Deferred { release_epoch, .. } => {
                    let left = deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
                    self.wait(release_epoch, left)?;
                }
                other => return Ok(other),
            }
        }
    }

    /// Releases a claim record (one copied from another process, say).
    pub fn release_record(&self, record: &mut ClaimRecord) -> Result<()> {
        self.release_raw(&mut record.raw)
    }

    /// Waits until the ledger's change epoch passes `since` (a release, a death,
    /// a capacity growth); returns the epoch.
    pub fn wait(&self, since: u64, timeout: Option<Duration>) -> Result<u64> {
        let mut now = 0;
        // SAFETY: a live ledger; now writable.
        check(unsafe { sys::orbit_admission_wait(self.ptr(), since, timeout_ms(timeout), &mut now) }, "orbit_admission_wait")?;
        Ok(now)
    }

    /// No new claims; outstanding claims stay valid.
    pub fn shutdown(&self) -> Result<()> {
        // SAFETY: a live ledger.
        check(unsafe { sys::orbit_admission_shutdown(self.ptr()) }, "orbit_admission_shutdown").map(|_| ())
    }

    /// A confirmed death: every claim of that node and incarnation is released.
    pub fn node_dead(&self, node: u16, incarnation: u64) {
        // SAFETY: a live ledger.
        unsafe { sys::orbit_admission_node_dead(self.ptr(), node, incarnation) }
    }

    /// The current change epoch.
    pub fn epoch(&self) -> u64 {
        // SAFETY: a live ledger.
        unsafe { sys::orbit_admission_epoch(self.ptr()) }
    }

    /// The domains, in set-up order.
    pub fn domains(&self) -> Result<Vec<DomainInfo>> {
        let ptr = self.ptr();
        // SAFETY: a live ledger; the buffer holds max records.
        let raw = crate::error::collect("orbit_admission_domains", |buf, max| unsafe {
            sys::orbit_admission_domains(ptr, buf, max)
        })?;
        Ok(raw.iter().map(|d| DomainInfo { domain: d.domain, capacity: d.capacity, used: d.used }).collect())
    }
}

impl fmt::Debug for Admission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Admission").field("epoch", &self.epoch()).finish()
    }
}
