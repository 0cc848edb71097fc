//! orbit for Rust: process fleets on one Linux host.
//!
//! The worker processes of one server share, in hugepage-backed shared
//! memory, a [`Pool`] of leasable resources, [`Streams`] (bounded duplex byte
//! rings between two processes), [`Exchanges`] (events over a zero-copy payload
//! arena) and an [`Admission`] ledger. A `kill -9` leaks nothing: a dead
//! member's leases, stream sides, chunks and claims are given back when its
//! death is reported ([`Fleet::reap`], [`Fleet::wait_node_death`], or the
//! `orbit-reaper` daemon).
//!
//! This crate is a safe layer over liborbit's C API (the `orbit-sys` crate):
//!
//! * every failure is one [`Error`] carrying the `ORBIT_E*` [`code`] and the
//!   library's sentence;
//! * handles close when dropped, and cannot outlive what they were opened
//!   through; guards ([`Execution`], [`Permit`], [`Claim`], [`Chunk`],
//!   [`Reservation`]) give back what they hold when dropped;
//! * `Send` and `Sync` follow the C contract: table handles are shared by the
//!   threads of a process, an endpoint or exchange is used by one thread at a
//!   time;
//! * a handle belongs to its process: in a forked child, calls on an inherited
//!   handle fail with [`code::EFORKED`] and change nothing of the parent's.
//!
//! With the `tokio` feature, [`Endpoint`] is also `AsyncRead` + `AsyncWrite`
//! and the waits have async forms, driven by orbit's readiness descriptors
//! (see the `asyncio` notes in docs/rust.md).
//!
//! ```no_run
//! use orbit::{Fleet, Key, Pool};
//! let fleet = Fleet::join("web")?;
//! let pool = Pool::open(&fleet)?;
//! let key = Key::new(1, 0);
//! let id = pool.register(key, 4)?;          // the owner: 4 concurrent leases
//! let lease = pool.reserve(id)?;            // anyone in the fleet
//! let execution = pool.accept(&lease)?;     // the owner again
//! drop(execution);                          // completes: the unit is free
//! # Ok::<(), orbit::Error>(())
//! ```
#![deny(missing_docs)]
#![warn(rust_2018_idioms)]

mod admission;
#[cfg(feature = "tokio")]
mod asyncio;
mod error;
mod exchange;
mod fleet;
mod pool;
mod stream;

pub use admission::{Admission, AdmissionSpec, Admit, Claim, ClaimRecord, Demand, DomainInfo, Skip};
pub use error::{code, Error, Result};
pub use exchange::{
    ArenaSpec, Chunk, Event, Exchange, ExchangeSpec, ExchangeStats, Exchanges, FlowState, Reservation, Session,
};
pub use fleet::{library_version, set_spin_ns, spin_ns, Backing, Fleet, FleetOptions, Id, NodeInfo};
pub use pool::{Candidate, Execution, Key, Lease, Permit, Pool, PoolSpec, PoolStats, ResourceState};
pub use stream::{Endpoint, ReadHalf, Side, StreamSpec, StreamStats, Streams, Ticket, WriteHalf};

