//! The pool: resources registered under keys, leased one unit at a time.
use crate::error::{check, timeout_ms, Result};
use crate::fleet::{Fleet, Id};
use orbit_sys as sys;
use std::fmt;
use std::marker::PhantomData;
use std::ptr;
use std::time::Duration;

/// The caller's 128-bit digest of "what a resource is usable for".
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Key {
    /// Low 64 bits.
    pub lo: u64,
    /// High 64 bits.
    pub hi: u64,
}

impl Key {
    /// A key from its two halves.
    pub const fn new(lo: u64, hi: u64) -> Key {
        Key { lo, hi }
    }
    pub(crate) fn raw(self) -> sys::orbit_key {
        sys::orbit_key { lo: self.lo, hi: self.hi }
    }
}

impl From<u128> for Key {
    fn from(v: u128) -> Key {
        Key { lo: v as u64, hi: (v >> 64) as u64 }
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "key:{:016x}{:016x}", self.hi, self.lo)
    }
}

/// A pool's geometry: every process opening a kind must give the same one.
#[derive(Clone, Debug)]
pub struct PoolSpec {
    raw: sys::orbit_pool_spec,
}

impl Default for PoolSpec {
    fn default() -> Self {
        PoolSpec::new()
    }
}

impl PoolSpec {
    /// `ORBIT_POOL_SPEC_DEFAULT`: kind 247, 256 keys, 256 resources per node.
    pub fn new() -> PoolSpec {
        PoolSpec {
            raw: sys::orbit_pool_spec {
                kind: sys::ORBIT_POOL_KIND as u8,
                key_capacity: 256,
                lane_capacity: 256,
                generation_limit: 0,
                resv: [0; 4],
            },
        }
    }
    /// The segment kind (several independent pools per fleet); 255 is refused.
    pub fn kind(mut self, kind: u8) -> Self {
        self.raw.kind = kind;
        self
    }
    /// Distinct keys at once (a power of two, at most 2^20).
    pub fn key_capacity(mut self, keys: u32) -> Self {
        self.raw.key_capacity = keys;
        self
    }
    /// Resources one node can register at once (a power of two, at most 65536).
    pub fn lane_capacity(mut self, resources: u32) -> Self {
        self.raw.lane_capacity = resources;
        self
    }
    /// Tenancies of a resource slot per epoch (0: the id's 24-bit field).
    pub fn generation_limit(mut self, limit: u32) -> Self {
        self.raw.generation_limit = limit;
        self
    }
}

/// Whether a resource takes new leases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResourceState {
    /// Leases are granted.
    Live,
    /// Refuses new leases; running work finishes.
    Draining,
}

/// One resource usable for a key, as the fleet sees it: a snapshot, not a reservation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// The resource.
    pub id: Id,
    /// Its owner's node and incarnation.
    pub owner: u16,
    /// The owner's incarnation.
    pub owner_incarnation: u64,
    /// Owned by this node.
    pub local: bool,
    /// Live or draining.
    pub state: ResourceState,
    /// Concurrent leases it allows.
    pub capacity: u32,
    /// Reserved and not yet accepted.
    pub reserved: u32,
    /// Accepted and running.
    pub active: u32,
    /// Coarse wall-clock ms of the last reserve.
    pub last_reserve_ms: u64,
}

/// One reserved unit of a resource: plain data, to be brought to the resource's
/// owner (any process of the fleet), who accepts it. Copy it, send it as
/// [`to_bytes`](Lease::to_bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    pub(crate) raw: sys::orbit_lease,
}

impl Lease {
    /// Bytes in [`to_bytes`](Lease::to_bytes).
    pub const BYTES: usize = 34;
    /// The resource.
    pub fn id(&self) -> Id {
        Id(self.raw.id)
    }
    /// Strictly increasing per resource slot.
    pub fn fence(&self) -> u64 {
        self.raw.fence
    }
    /// The reserver's node.
    pub fn holder(&self) -> u16 {
        self.raw.holder
    }
    /// The reserver's incarnation.
    pub fn holder_incarnation(&self) -> u64 {
        self.raw.holder_incarnation
    }
    /// The pool epoch it was taken in.
    pub fn epoch(&self) -> u64 {
        self.raw.epoch
    }
    /// Little-endian: id, fence, holder (u16), holder incarnation, epoch.
    pub fn to_bytes(&self) -> [u8; Lease::BYTES] {
        let mut b = [0u8; Lease::BYTES];
        b[0..8].copy_from_slice(&self.raw.id.to_le_bytes());
        b[8..16].copy_from_slice(&self.raw.fence.to_le_bytes());
        b[16..18].copy_from_slice(&self.raw.holder.to_le_bytes());
        b[18..26].copy_from_slice(&self.raw.holder_incarnation.to_le_bytes());
        b[26..34].copy_from_slice(&self.raw.epoch.to_le_bytes());
        b
    }
    /// The lease [`to_bytes`](Lease::to_bytes) wrote. Any bytes make a lease;
    /// the pool checks it when it is accepted.
    pub fn from_bytes(b: &[u8; Lease::BYTES]) -> Lease {
        let u64_at = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(w)
        };
        Lease {
            raw: sys::orbit_lease {
                id: u64_at(0),
                fence: u64_at(8),
                holder: u16::from_le_bytes([b[16], b[17]]),
                holder_incarnation: u64_at(18),
                epoch: u64_at(26),
            },
        }
    }
}

/// A pool table of a fleet. Shared by the threads of a process (`Send + Sync`).
pub struct Pool {
    ptr: *mut sys::orbit_pool,
    fleet: Fleet,
    #[cfg(feature = "tokio")]
    pub(crate) readiness: crate::asyncio::Lazy,
}

// SAFETY: pool.h: every call is safe on a shared handle from several threads
// (close is Drop, which has the handle alone).
unsafe impl Send for Pool {}
// SAFETY: as above.
unsafe impl Sync for Pool {}

impl Drop for Pool {
    fn drop(&mut self) {
        #[cfg(feature = "tokio")]
        self.readiness.close();
        // SAFETY: no Execution or Permit borrows the pool any more (lifetimes).
        unsafe { sys::orbit_pool_close(self.ptr) }
    }
}

/// The owner's guard over one accepted lease: dropping it (or
/// [`complete`](Execution::complete)) gives the unit back and wakes the key.
#[must_use = "dropping an Execution completes it at once"]
pub struct Execution<'p> {
    raw: sys::orbit_execution,
    _pool: PhantomData<&'p Pool>,
}

// SAFETY: an execution is plain data over a thread-safe pool; completing it needs &mut.
unsafe impl Send for Execution<'_> {}
// SAFETY: &Execution only reads its lease.
unsafe impl Sync for Execution<'_> {}

impl Execution<'_> {
    /// The lease it accepted.
    pub fn lease(&self) -> Lease {
        Lease { raw: self.raw.lease }
    }
    /// Gives the unit back now.
    pub fn complete(mut self) {
        self.finish();
    }
    fn finish(&mut self) {
        // SAFETY: idempotent on a valid execution; the pool outlives 'p.
        unsafe { sys::orbit_execution_complete(&mut self.raw) }
    }
}

impl Drop for Execution<'_> {
    fn drop(&mut self) {
        self.finish();
    }
}

impl fmt::Debug for Execution<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Execution").field("lease", &self.lease()).field("done", &self.raw.done).finish()
    }
}

/// One unit of a key's creation budget: dropping it (or
/// [`finish`](Permit::finish)) gives it back. Register the resource you
/// created before that, so the key's live count takes over.
#[must_use = "dropping a Permit gives the creation budget back at once"]
pub struct Permit<'p> {
    raw: sys::orbit_permit,
    _pool: PhantomData<&'p Pool>,
}

// SAFETY: as Execution.
unsafe impl Send for Permit<'_> {}
// SAFETY: &Permit exposes nothing.
unsafe impl Sync for Permit<'_> {}

impl Permit<'_> {
    /// Gives the budget unit back now.
    pub fn finish(mut self) {
        self.end();
    }
    fn end(&mut self) {
        // SAFETY: idempotent on a valid permit; the pool outlives 'p.
        unsafe { sys::orbit_permit_finish(&mut self.raw) }
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.end();
    }
}

impl fmt::Debug for Permit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit").field("done", &self.raw.done).finish()
    }
}

/// Counters of one pool handle since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Futex sleeps and io_uring waits filled.
    pub parks: u64,
    /// Wakes issued.
    pub wakes: u64,
    /// Doorbells rung.
    pub doorbells: u64,
}

impl Pool {
    /// Opens (creating if needed) the default pool table of the fleet.
    pub fn open(fleet: &Fleet) -> Result<Pool> {
        Pool::open_with(fleet, &PoolSpec::new())
    }

    /// Opens (creating if needed) the pool table `spec` names.
    pub fn open_with(fleet: &Fleet, spec: &PoolSpec) -> Result<Pool> {
        let mut ptr = ptr::null_mut();
        // SAFETY: a live fleet; spec and ptr valid for the call.
        check(unsafe { sys::orbit_pool_open(fleet.ptr(), &spec.raw, &mut ptr) }, "orbit_pool_open")?;
        Ok(Pool {
            ptr,
            fleet: fleet.clone(),
            #[cfg(feature = "tokio")]
            readiness: crate::asyncio::Lazy::default(),
        })
    }

    pub(crate) fn ptr(&self) -> *mut sys::orbit_pool {
        self.ptr
    }

    /// The fleet it was opened through.
    pub fn fleet(&self) -> &Fleet {
        &self.fleet
    }

    /// Makes a resource this node owns visible under `key`, allowing `capacity`
    /// concurrent leases (1: exclusive).
    pub fn register(&self, key: Key, capacity: u32) -> Result<Id> {
        let mut id = 0;
        // SAFETY: a live pool; id writable.
        check(unsafe { sys::orbit_pool_register(self.ptr, key.raw(), capacity, &mut id) }, "orbit_pool_register")?;
        Ok(Id(id))
    }

    /// Ends a resource this node owns: its outstanding leases become stale.
    pub fn unregister(&self, id: Id) -> Result<()> {
        // SAFETY: a live pool.
        check(unsafe { sys::orbit_pool_unregister(self.ptr, id.0) }, "orbit_pool_unregister").map(|_| ())
    }

    /// Refuses new leases on a resource this node owns; running work finishes.
    pub fn drain(&self, id: Id) -> Result<()> {
        // SAFETY: a live pool.
        check(unsafe { sys::orbit_pool_drain(self.ptr, id.0) }, "orbit_pool_drain").map(|_| ())
    }

    /// The owner's truth: `active` units run now, and every reservation older
    /// than `grace` that nobody brought to the owner is aged out.
    pub fn reconcile(&self, id: Id, active: u32, grace: Duration) -> Result<()> {
        let grace_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
        // SAFETY: a live pool.
        check(unsafe { sys::orbit_pool_reconcile(self.ptr, id.0, active, grace_ms) }, "orbit_pool_reconcile")
            .map(|_| ())
    }

    /// Every resource registered under `key`, in table order.
    pub fn candidates(&self, key: Key) -> Result<Vec<Candidate>> {
        let ptr = self.ptr;
        // SAFETY: a live pool; the buffer holds max records.
        let raw = crate::error::collect("orbit_pool_candidates", |buf, max| unsafe {
            sys::orbit_pool_candidates(ptr, key.raw(), buf, max)
        })?;
        Ok(raw
                .iter()
                .map(|c| Candidate {
                    id: Id(c.id),
                    owner: c.owner,
                    owner_incarnation: c.owner_incarnation,
                    local: c.local,
                    state: if c.state == sys::ORBIT_DRAINING { ResourceState::Draining } else { ResourceState::Live },
                    capacity: c.capacity,
                    reserved: c.reserved,
                    active: c.active,
                    last_reserve_ms: c.last_reserve_ms,
                })
                .collect())
    }

    /// Reserves one unit of the resource's capacity (one CAS):
    /// [`code::EBUSY`](crate::code::EBUSY) when none is free.
    pub fn reserve(&self, id: Id) -> Result<Lease> {
        let mut raw = sys::orbit_lease::default();
        // SAFETY: a live pool; raw writable.
        check(unsafe { sys::orbit_pool_reserve(self.ptr, id.0, &mut raw) }, "orbit_pool_reserve")?;
        Ok(Lease { raw })
    }

    /// The owner takes a lease a caller brought it (exactly once per lease).
    pub fn accept(&self, lease: &Lease) -> Result<Execution<'_>> {
        let mut raw = sys::orbit_execution::default();
        // SAFETY: a live pool; on failure raw is a finished execution (dropped harmlessly).
        check(unsafe { sys::orbit_pool_accept(self.ptr, &lease.raw, &mut raw) }, "orbit_pool_accept")?;
        Ok(Execution { raw, _pool: PhantomData })
    }

    /// The resource is still live in the lease's generation and epoch.
    pub fn is_current(&self, lease: &Lease) -> bool {
        // SAFETY: a live pool.
        unsafe { sys::orbit_pool_is_current(self.ptr, &lease.raw) }
    }

    /// One unit of the key's creation budget (live plus being created stay
    /// under `max_live` fleet-wide): [`code::EBUDGET`](crate::code::EBUDGET) when spent.
    pub fn claim_create(&self, key: Key, max_live: u32) -> Result<Permit<'_>> {
        let mut raw = sys::orbit_permit::default();
        // SAFETY: a live pool; on failure raw is a finished permit.
        check(unsafe { sys::orbit_pool_claim_create(self.ptr, key.raw(), max_live, &mut raw) }, "orbit_pool_claim_create")?;
        Ok(Permit { raw, _pool: PhantomData })
    }

    /// The key's live and being-created counts.
    pub fn budget(&self, key: Key) -> (u32, u32) {
        let (mut live, mut creating) = (0, 0);
        // SAFETY: a live pool; both outputs writable.
        unsafe { sys::orbit_pool_budget(self.ptr, key.raw(), &mut live, &mut creating) };
        (live, creating)
    }

    /// The key's change count, what [`wait_capacity`](Pool::wait_capacity) waits past.
    pub fn version(&self, key: Key) -> Result<u32> {
        let mut v = 0;
        // SAFETY: a live pool.
        check(unsafe { sys::orbit_pool_version(self.ptr, key.raw(), &mut v) }, "orbit_pool_version")?;
        Ok(v)
    }

    /// Parks until the key's change count differs from `since` (a release, an
    /// unregister, a finished claim); returns the count. A change may be
    /// spurious: re-check.
    pub fn wait_capacity(&self, key: Key, since: u32, timeout: Option<Duration>) -> Result<u32> {
        let mut now = 0;
        // SAFETY: a live pool.
        let rc = unsafe { sys::orbit_pool_wait_capacity(self.ptr, key.raw(), since, timeout_ms(timeout), &mut now) };
        check(rc, "orbit_pool_wait_capacity")?;
        Ok(now)
    }

    /// Reserves a unit of `id`, waiting (blocking) while it is busy.
    pub fn reserve_blocking(&self, key: Key, id: Id, timeout: Option<Duration>) -> Result<Lease> {
        let deadline = timeout.map(|t| std::time::Instant::now() + t);
        loop {
            let since = self.version(key)?;
            match self.reserve(id) {
                Err(e) if e.is(crate::code::EBUSY) => {}
                r => return r,
            }
            let left = deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
            self.wait_capacity(key, since, left)?;
        }
    }

    /// A confirmed death: that incarnation's resources close, its unaccepted
    /// reservations and creation claims are given back.
    pub fn node_dead(&self, node: u16, incarnation: u64) {
        // SAFETY: a live pool.
        unsafe { sys::orbit_pool_node_dead(self.ptr, node, incarnation) }
    }

    /// The table's epoch (leases of another epoch are stale).
    pub fn epoch(&self) -> u64 {
        // SAFETY: a live pool.
        unsafe { sys::orbit_pool_epoch(self.ptr) }
    }

    /// This handle's counters.
    pub fn stats(&self) -> PoolStats {
        let mut raw = sys::orbit_pool_stats::default();
        // SAFETY: a live pool; raw writable.
        unsafe { sys::orbit_pool_stats(self.ptr, &mut raw) };
        PoolStats { parks: raw.parks, wakes: raw.wakes, doorbells: raw.doorbells }
    }
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool").field("epoch", &self.epoch()).finish()
    }
}
