//! Fleets: joining, nodes and incarnations, ids, deaths.
use crate::error::{check, timeout_ms, Error, Result};
use orbit_sys as sys;
use std::ffi::{CStr, CString};
use std::fmt;
use std::os::raw::c_char;
use std::ptr;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

/// A 64-bit address of a resource or stream: `kind:8 | node:16 | generation:24 | slot:16`.
///
/// Printed and parsed as the library does (`"247:3:65536"`, or `"0x..."` when parsing).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Id(pub sys::orbit_id);

impl Id {
    /// The table kind it belongs to.
    pub fn kind(self) -> u8 {
        sys::orbit_id_kind(self.0)
    }
    /// The node (lane) it lives in: its creator's.
    pub fn node(self) -> u16 {
        sys::orbit_id_node(self.0)
    }
    /// Its slot in that lane.
    pub fn slot(self) -> u32 {
        sys::orbit_id_slot(self.0)
    }
    /// The slot's tenancy it names (never 0 for a live one).
    pub fn generation(self) -> u32 {
        sys::orbit_id_generation(self.0)
    }
    /// The raw value.
    pub fn raw(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = [0 as c_char; sys::ORBIT_ID_TEXT_MAX as usize];
        // SAFETY: buf is writable for its length; the call writes a NUL-terminated string.
        let rc = unsafe { sys::orbit_id_format(self.0, buf.as_mut_ptr(), buf.len()) };
        if rc < 0 {
            return Err(fmt::Error);
        }
        // SAFETY: formatted above, NUL-terminated within buf.
        f.write_str(&unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy())
    }
}

impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Id({})", self)
    }
}

impl FromStr for Id {
    type Err = Error;
    fn from_str(s: &str) -> Result<Id> {
        let text = c_string(s, "orbit_id_parse")?;
        let mut id = 0;
        // SAFETY: text is NUL-terminated; id is writable.
        check(unsafe { sys::orbit_id_parse(text.as_ptr(), &mut id) }, "orbit_id_parse")?;
        Ok(Id(id))
    }
}

pub(crate) fn c_string(s: &str, call: &'static str) -> Result<CString> {
    CString::new(s).map_err(|_| {
        Error::new(crate::code::EMALFORMED, call, format!("{}: the text holds a NUL byte", call))
    })
}

/// Where a fleet's segments live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backing {
    /// hugetlbfs, else /dev/shm with transparent huge pages, else plain pages.
    Auto,
    /// Huge pages or an error.
    Hugetlb,
    /// /dev/shm.
    Shm,
    /// Anonymous memory: this process only (threads).
    Private,
}

impl Backing {
    fn raw(self) -> sys::orbit_backing {
        match self {
            Backing::Auto => sys::ORBIT_BACKING_AUTO,
            Backing::Hugetlb => sys::ORBIT_BACKING_HUGETLB,
            Backing::Shm => sys::ORBIT_BACKING_SHM,
            Backing::Private => sys::ORBIT_BACKING_PRIVATE,
        }
    }
    fn from_raw(raw: sys::orbit_backing) -> Backing {
        match raw {
            sys::ORBIT_BACKING_HUGETLB => Backing::Hugetlb,
            sys::ORBIT_BACKING_SHM => Backing::Shm,
            sys::ORBIT_BACKING_PRIVATE => Backing::Private,
            _ => Backing::Auto,
        }
    }
}

/// Options of [`Fleet::join_with`]; `FleetOptions::new()` is the library's default
/// (64 nodes, the first free node, a fresh incarnation, AUTO backing, mode 0600).
#[derive(Clone, Debug)]
pub struct FleetOptions {
    raw: sys::orbit_fleet_opts,
}

impl Default for FleetOptions {
    fn default() -> Self {
        FleetOptions::new()
    }
}

impl FleetOptions {
    /// The defaults (`ORBIT_FLEET_OPTS_DEFAULT`).
    pub fn new() -> FleetOptions {
        FleetOptions {
            raw: sys::orbit_fleet_opts {
                capacity: 64,
                node: -1,
                incarnation: 0,
                backing: sys::ORBIT_BACKING_AUTO,
                mode: 0,
                gid: -1,
                generation: 0,
                resv32: 0,
                resv: [0; 3],
            },
        }
    }
    /// The generation to join: 0 (`ORBIT_GENERATION_AUTO`, the default) the newest one of
    /// this library's layouts, `ORBIT_GENERATION_NEW` a new one, or exactly that one.
    pub fn generation(mut self, generation: u32) -> Self {
        self.raw.generation = generation;
        self
    }
    /// Nodes in the fleet, 1..=4096; must match an existing fleet.
    pub fn capacity(mut self, nodes: u16) -> Self {
        self.raw.capacity = nodes;
        self
    }
    /// Claim exactly this node (else the first free one).
    pub fn node(mut self, node: u16) -> Self {
        self.raw.node = i32::from(node);
        self
    }
    /// This life's incarnation (else a random one, unique per process life).
    pub fn incarnation(mut self, incarnation: u64) -> Self {
        self.raw.incarnation = incarnation;
        self
    }
    /// Where the segments live.
    pub fn backing(mut self, backing: Backing) -> Self {
        self.raw.backing = backing.raw();
        self
    }
    /// File mode of the segments (0: 0600; no world bits).
    pub fn mode(mut self, mode: u32) -> Self {
        self.raw.mode = mode;
        self
    }
    /// Share the segments with a group (chowned to it, 0660).
    pub fn gid(mut self, gid: u32) -> Self {
        self.raw.gid = i64::from(gid);
        self
    }
}

pub(crate) struct FleetHandle {
    pub(crate) ptr: *mut sys::orbit_fleet,
    #[cfg(feature = "tokio")]
    pub(crate) waits: crate::asyncio::FleetWaits,
}

impl FleetHandle {
    fn new(ptr: *mut sys::orbit_fleet) -> Arc<FleetHandle> {
        Arc::new(FleetHandle {
            ptr,
            #[cfg(feature = "tokio")]
            waits: Default::default(),
        })
    }
}

// SAFETY: fleet.h: "a fleet handle may be shared by the threads of its process".
unsafe impl Send for FleetHandle {}
// SAFETY: as above; every call on it is thread-safe.
unsafe impl Sync for FleetHandle {}

impl Drop for FleetHandle {
    fn drop(&mut self) {
        // SAFETY: the last reference: every table opened through it holds a clone and is gone.
        unsafe { sys::orbit_fleet_leave(self.ptr) }
    }
}

/// A member's (or an observer's) handle on a fleet: a named set of up to 4096
/// cooperating processes on one host.
///
/// Clones share the membership; the node is released when the last clone and
/// every table opened through it are dropped. A handle belongs to its process:
/// in a forked child every call on an inherited handle fails with
/// [`code::EFORKED`](crate::code::EFORKED) and changes nothing of the parent's
/// (join again in the child).
///
/// ```no_run
/// let fleet = orbit::Fleet::join("web")?;
/// println!("node {} incarnation {:#x}", fleet.node(), fleet.incarnation());
/// # Ok::<(), orbit::Error>(())
/// ```
#[derive(Clone)]
pub struct Fleet {
    pub(crate) handle: Arc<FleetHandle>,
}

/// One claimed node of a fleet, as [`Fleet::nodes`] lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeInfo {
    /// The node.
    pub node: u16,
    /// Its pid, in its own pid namespace (for display: liveness never depends on it).
    pub pid: i32,
    /// Its incarnation.
    pub incarnation: u64,
    /// It is a live member: its process holds its kernel lock.
    pub alive: bool,
}

impl Fleet {
    /// Joins (creating if needed) the fleet called `name` with the default options.
    pub fn join(name: &str) -> Result<Fleet> {
        Fleet::join_with(name, &FleetOptions::new())
    }

    /// Joins (creating if needed) the fleet called `name`.
    pub fn join_with(name: &str, opts: &FleetOptions) -> Result<Fleet> {
        let name = c_string(name, "orbit_fleet_join")?;
        Fleet::join_raw(name.as_ptr(), opts)
    }

    /// A fleet of this process only (anonymous memory; for threads and tests).
    pub fn private(opts: &FleetOptions) -> Result<Fleet> {
        Fleet::join_raw(ptr::null(), opts)
    }

    fn join_raw(name: *const c_char, opts: &FleetOptions) -> Result<Fleet> {
        let mut ptr = ptr::null_mut();
        // SAFETY: name is NULL or NUL-terminated; opts and ptr are valid for the call.
        check(unsafe { sys::orbit_fleet_join(name, &opts.raw, &mut ptr) }, "orbit_fleet_join")?;
        Ok(Fleet { handle: FleetHandle::new(ptr) })
    }

    /// Opens an existing fleet without claiming a node (tools, supervisors):
    /// its tables may be inspected and deaths reported, nothing created.
    pub fn observe(name: &str) -> Result<Fleet> {
        let name = c_string(name, "orbit_fleet_observe")?;
        let mut ptr = ptr::null_mut();
        // SAFETY: as in join.
        check(unsafe { sys::orbit_fleet_observe(name.as_ptr(), &mut ptr) }, "orbit_fleet_observe")?;
        Ok(Fleet { handle: FleetHandle::new(ptr) })
    }

    /// Removes every segment of the fleet called `name` (members still mapping
    /// them keep their memory).
    pub fn unlink(name: &str) -> Result<()> {
        let name = c_string(name, "orbit_fleet_unlink")?;
        // SAFETY: name is NUL-terminated.
        check(unsafe { sys::orbit_fleet_unlink(name.as_ptr()) }, "orbit_fleet_unlink").map(|_| ())
    }

    pub(crate) fn ptr(&self) -> *mut sys::orbit_fleet {
        self.handle.ptr
    }

    /// This member's node (`ORBIT_NODE_NONE`, 65535, for an observer).
    pub fn node(&self) -> u16 {
        // SAFETY: a live handle.
        unsafe { sys::orbit_fleet_node(self.ptr()) }
    }

    /// This process life's incarnation.
    pub fn incarnation(&self) -> u64 {
        // SAFETY: a live handle.
        unsafe { sys::orbit_fleet_incarnation(self.ptr()) }
    }

    /// Nodes the fleet can hold.
    pub fn capacity(&self) -> u16 {
        // SAFETY: a live handle.
        unsafe { sys::orbit_fleet_capacity(self.ptr()) }
    }

    /// Where its segments live.
    pub fn backing(&self) -> Backing {
        // SAFETY: a live handle.
        Backing::from_raw(unsafe { sys::orbit_fleet_backing(self.ptr()) })
    }

    /// The fleet's name ("" for a private fleet).
    pub fn name(&self) -> String {
        // SAFETY: a NUL-terminated string owned by the handle.
        unsafe { CStr::from_ptr(sys::orbit_fleet_name(self.ptr())) }.to_string_lossy().into_owned()
    }

    /// One liveness sweep: every member whose process is gone is reported dead
    /// on every table (what it held is given back) and its node freed.
    /// Returns how many were reported.
    pub fn reap(&self) -> Result<usize> {
        // SAFETY: a live handle.
        check(unsafe { sys::orbit_fleet_reap(self.ptr()) }, "orbit_fleet_reap").map(|n| n as usize)
    }

    /// Waits until that incarnation of `node` is dead as the kernel reports it
    /// (its process is gone, in any pid namespace; or it left), with no reaper
    /// running. It reports nothing: call [`reap`](Fleet::reap) or
    /// [`node_dead`](Fleet::node_dead) next. `None` waits forever;
    /// [`code::ETIMEDOUT`](crate::code::ETIMEDOUT) when the time runs out.
    pub fn wait_node_death(&self, node: u16, incarnation: u64, timeout: Option<Duration>) -> Result<()> {
        // SAFETY: a live handle.
        let rc = unsafe { sys::orbit_fleet_wait_node_death(self.ptr(), node, incarnation, timeout_ms(timeout)) };
        check(rc, "orbit_fleet_wait_node_death").map(|_| ())
    }

    /// Reports one confirmed death: if `node` still carries `incarnation`, what it
    /// held in every table is given back and the node freed.
    pub fn node_dead(&self, node: u16, incarnation: u64) -> Result<()> {
        // SAFETY: a live handle.
        check(unsafe { sys::orbit_fleet_node_dead(self.ptr(), node, incarnation) }, "orbit_fleet_node_dead")
            .map(|_| ())
    }

    /// The claimed nodes and whether each one's process is alive.
    pub fn nodes(&self) -> Result<Vec<NodeInfo>> {
        let ptr = self.ptr();
        // SAFETY: a live handle; the buffer holds max records.
        let raw = crate::error::collect("orbit_fleet_nodes", |buf, max| unsafe { sys::orbit_fleet_nodes(ptr, buf, max) })?;
        Ok(raw
            .iter()
            .map(|r| NodeInfo { node: r.node, pid: r.pid, incarnation: r.incarnation, alive: r.alive })
            .collect())
    }
}

impl fmt::Debug for Fleet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fleet").field("name", &self.name()).field("node", &self.node()).finish()
    }
}

/// The version of the liborbit this process loaded (`"0.1.0"`).
pub fn library_version() -> String {
    // SAFETY: a static NUL-terminated string.
    unsafe { CStr::from_ptr(sys::orbit_version_string()) }.to_string_lossy().into_owned()
}

/// Sets the spin budget of every wait of this process, in nanoseconds: a wait
/// spins up to this long (adapting per waiter) before it parks; 0 disables it
/// (the default is 2000, or `ORBIT_SPIN_NS`).
pub fn set_spin_ns(ns: u32) {
    // SAFETY: a process-wide setting.
    unsafe { sys::orbit_set_spin_ns(ns) }
}

/// The spin budget of this process's waits, in nanoseconds.
pub fn spin_ns() -> u32 {
    // SAFETY: a plain getter.
    unsafe { sys::orbit_spin_ns() }
}
