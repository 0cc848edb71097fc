//! Exchanges: a control stream of events over a zero-copy payload arena.
use crate::error::{check, timeout_ms, Result};
use crate::fleet::{Fleet, Id};
use crate::pool::{Lease, Pool};
use std::mem::ManuallyDrop;
use crate::stream::{Side, StreamSpec, Ticket};
use orbit_sys as sys;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::ptr;
use std::sync::Arc;
use std::time::Duration;

/// A payload arena's geometry.
#[derive(Clone, Copy, Debug)]
pub struct ArenaSpec {
    raw: sys::orbit_arena_spec,
}

impl Default for ArenaSpec {
    fn default() -> Self {
        ArenaSpec::new()
    }
}

impl ArenaSpec {
    /// `ORBIT_ARENA_SPEC_DEFAULT`: kind 244, 1024 slots of 4 KiB per node.
    pub fn new() -> ArenaSpec {
        ArenaSpec {
            raw: sys::orbit_arena_spec {
                kind: sys::ORBIT_ARENA_KIND as u8,
                slot_bytes: 4096,
                slots_per_lane: 1024,
                resv: [0; 4],
            },
        }
    }
    /// The segment kind (0 and 255 are refused).
    pub fn kind(mut self, kind: u8) -> Self {
        self.raw.kind = kind;
        self
    }
    /// Bytes per slot (a power of two from 64 to 2^30).
    pub fn slot_bytes(mut self, bytes: u32) -> Self {
        self.raw.slot_bytes = bytes;
        self
    }
    /// Slots in each node's lane (a power of two; a lane is at most 1 GiB).
    pub fn slots_per_lane(mut self, slots: u32) -> Self {
        self.raw.slots_per_lane = slots;
        self
    }
}

/// An exchanges table: its control streams and the arena(s) its flows use.
#[derive(Clone, Debug)]
pub struct ExchangeSpec {
    raw: sys::orbit_exchange_spec,
}

impl Default for ExchangeSpec {
    fn default() -> Self {
        ExchangeSpec::new()
    }
}

impl ExchangeSpec {
    /// `ORBIT_EXCHANGE_SPEC_DEFAULT`: control kind 243 (16 KiB rings), one arena (kind 244) for both flows.
    pub fn new() -> ExchangeSpec {
        let control = StreamSpec::new().kind(sys::ORBIT_EXCHANGE_CONTROL_KIND as u8).buffer_bytes(16384);
        ExchangeSpec {
            raw: sys::orbit_exchange_spec {
                control: control.raw,
                a_to_b: ArenaSpec::new().raw,
                b_to_a: sys::orbit_arena_spec::default(),
                resv: [0; 4],
            },
        }
    }
    /// The control streams table.
    pub fn control(mut self, spec: StreamSpec) -> Self {
        self.raw.control = spec.raw;
        self
    }
    /// The arena of the A→B flow (and of both, without [`b_to_a`](ExchangeSpec::b_to_a)).
    pub fn a_to_b(mut self, spec: ArenaSpec) -> Self {
        self.raw.a_to_b = spec.raw;
        self
    }
    /// A separate arena for the B→A flow.
    pub fn b_to_a(mut self, spec: ArenaSpec) -> Self {
        self.raw.b_to_a = spec.raw;
        self
    }
}

pub(crate) struct ExchangesHandle {
    pub(crate) ptr: *mut sys::orbit_exchanges,
    _fleet: Fleet,
    #[cfg(feature = "tokio")]
    pub(crate) readiness: crate::asyncio::Lazy,
}

// SAFETY: exchange.h: "arena and exchanges handles may be shared by the threads of a process".
unsafe impl Send for ExchangesHandle {}
// SAFETY: as above.
unsafe impl Sync for ExchangesHandle {}

impl Drop for ExchangesHandle {
    fn drop(&mut self) {
        #[cfg(feature = "tokio")]
        self.readiness.close();
        // SAFETY: every exchange (and so every chunk and reservation) holds an Arc to it.
        unsafe { sys::orbit_exchanges_close(self.ptr) }
    }
}

/// An exchanges table of a fleet. Clones share the handle.
#[derive(Clone)]
pub struct Exchanges {
    pub(crate) handle: Arc<ExchangesHandle>,
}

/// Counters of one exchanges handle since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExchangeStats {
    /// Events sent.
    pub events_sent: u64,
    /// Events received.
    pub events_received: u64,
    /// Chunks sent.
    pub chunks_sent: u64,
    /// Chunks received.
    pub chunks_received: u64,
    /// Payload bytes sent.
    pub bytes_sent: u64,
    /// Payload bytes received.
    pub bytes_received: u64,
}

impl Exchanges {
    /// Opens (creating if needed) the default exchanges table.
    pub fn open(fleet: &Fleet) -> Result<Exchanges> {
        Exchanges::open_with(fleet, &ExchangeSpec::new())
    }

    /// Opens (creating if needed) the exchanges table `spec` names.
    pub fn open_with(fleet: &Fleet, spec: &ExchangeSpec) -> Result<Exchanges> {
        let mut ptr = ptr::null_mut();
        // SAFETY: a live fleet; spec and ptr valid for the call.
        check(unsafe { sys::orbit_exchanges_open(fleet.ptr(), &spec.raw, &mut ptr) }, "orbit_exchanges_open")?;
        Ok(Exchanges {
            handle: Arc::new(ExchangesHandle {
                ptr,
                _fleet: fleet.clone(),
                #[cfg(feature = "tokio")]
                readiness: crate::asyncio::Lazy::default(),
            }),
        })
    }

    pub(crate) fn ptr(&self) -> *mut sys::orbit_exchanges {
        self.handle.ptr
    }

    fn exchange(&self, ptr: *mut sys::orbit_exchange) -> Exchange {
        Exchange { ptr, exchanges: self.clone() }
    }

    /// A new exchange in this node's lane: side A, and a ticket naming side B.
    pub fn create(&self) -> Result<(Exchange, Ticket)> {
        let mut a = ptr::null_mut();
        let mut ticket = sys::orbit_ticket::default();
        // SAFETY: a live table; outputs writable.
        check(unsafe { sys::orbit_exchange_create(self.ptr(), &mut a, &mut ticket) }, "orbit_exchange_create")?;
        Ok((self.exchange(a), Ticket { raw: ticket }))
    }

    /// Holds side B of the exchange a ticket names.
    pub fn open_ticket(&self, ticket: &Ticket) -> Result<Exchange> {
        let mut b = ptr::null_mut();
        // SAFETY: a live table; b writable.
        check(unsafe { sys::orbit_exchange_open(self.ptr(), &ticket.raw, &mut b) }, "orbit_exchange_open")?;
        Ok(self.exchange(b))
    }

    /// Offers the exchange to `to_node`.
    pub fn offer(&self, ticket: &Ticket, to_node: u16) -> Result<()> {
        // SAFETY: a live table.
        check(unsafe { sys::orbit_exchanges_offer(self.ptr(), &ticket.raw, to_node) }, "orbit_exchanges_offer").map(|_| ())
    }

    /// The next exchange offered to this node, if any.
    pub fn take_offer(&self) -> Result<Option<Ticket>> {
        let mut raw = sys::orbit_ticket::default();
        // SAFETY: a live table; raw writable.
        match check(unsafe { sys::orbit_exchanges_take_offer(self.ptr(), &mut raw) }, "orbit_exchanges_take_offer") {
            Ok(_) => Ok(Some(Ticket { raw })),
            Err(e) if e.is(crate::code::EAGAIN) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Waits for the next exchange offered to this node.
    pub fn wait_offer(&self, timeout: Option<Duration>) -> Result<Ticket> {
        let mut raw = sys::orbit_ticket::default();
        // SAFETY: a live table; raw writable.
        let rc = unsafe { sys::orbit_exchanges_wait_offer(self.ptr(), timeout_ms(timeout), &mut raw) };
        check(rc, "orbit_exchanges_wait_offer")?;
        Ok(Ticket { raw })
    }

    /// This handle's counters.
    pub fn stats(&self) -> ExchangeStats {
        let mut raw = sys::orbit_exchange_stats::default();
        // SAFETY: a live table; raw writable.
        unsafe { sys::orbit_exchanges_stats(self.ptr(), &mut raw) };
        ExchangeStats {
            events_sent: raw.events_sent,
            events_received: raw.events_received,
            chunks_sent: raw.chunks_sent,
            chunks_received: raw.chunks_received,
            bytes_sent: raw.bytes_sent,
            bytes_received: raw.bytes_received,
        }
    }
}

impl fmt::Debug for Exchanges {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Exchanges").finish()
    }
}

/// A remote lease accepted by its owner through an exchange (the pool's session
/// binding): the exchange's side B, the running execution and the caller's
/// metadata. Dropping it releases the metadata, completes the execution and
/// closes the exchange (`orbit_session_end`).
pub struct Session<'p> {
    raw: sys::orbit_session,
    exchange: ManuallyDrop<Exchange>,
    _pool: PhantomData<&'p Pool>,
}

// SAFETY: as Exchange: used by one thread at a time.
unsafe impl Send for Session<'_> {}

impl Session<'_> {
    /// The lease the caller brought (accepted: its unit is active until the drop).
    pub fn lease(&self) -> Lease {
        Lease { raw: self.raw.execution.lease }
    }
    /// The caller's metadata, in place.
    pub fn metadata(&self) -> &[u8] {
        let m = &self.raw.metadata;
        if m.released || m.data.is_null() {
            return &[];
        }
        // SAFETY: len bytes held by the session until it ends.
        unsafe { std::slice::from_raw_parts(m.data as *const u8, m.len) }
    }
    /// The exchange: receive the caller's body, send the answer.
    pub fn exchange(&self) -> &Exchange {
        &self.exchange
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        // SAFETY: ends each part once; the exchange is closed here, not by its own Drop.
        unsafe { sys::orbit_session_end(&mut self.raw) };
        // The table handle the exchange kept open is let go now (Exchange's Drop would close twice).
        // SAFETY: taken once; its `exchanges` field is moved out before the shell is forgotten.
        let ex = unsafe { ManuallyDrop::take(&mut self.exchange) };
        let exchanges = unsafe { ptr::read(&ex.exchanges) };
        std::mem::forget(ex);
        drop(exchanges);
    }
}

impl fmt::Debug for Session<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session").field("lease", &self.lease()).field("metadata", &self.metadata().len()).finish()
    }
}

impl Exchanges {
    /// For a lease on another node's resource: creates an exchange, sends START
    /// carrying the lease and `meta`, and offers side B to the resource's owner.
    /// Returns side A.
    pub fn open_session(&self, lease: &Lease, meta: &[u8], timeout: Option<Duration>) -> Result<Exchange> {
        let mut a = ptr::null_mut();
        // SAFETY: a live table; lease and meta valid for the call; a writable.
        let rc = unsafe {
            sys::orbit_exchange_open_session(self.ptr(), &lease.raw, meta.as_ptr().cast(), meta.len(), timeout_ms(timeout), &mut a)
        };
        check(rc, "orbit_exchange_open_session")?;
        Ok(self.exchange(a))
    }

    fn session<'p>(&self, raw: sys::orbit_session) -> Session<'p> {
        Session { exchange: ManuallyDrop::new(self.exchange(raw.exchange)), raw, _pool: PhantomData }
    }

    /// On the owner: opens side B of `ticket`, waits for its START and accepts
    /// the lease it carries in `pool` exactly once.
    pub fn accept_session<'p>(&self, pool: &'p Pool, ticket: &Ticket, timeout: Option<Duration>) -> Result<Session<'p>> {
        let mut raw = sys::orbit_session::default();
        // SAFETY: live tables; raw writable; on error it holds nothing.
        let rc = unsafe { sys::orbit_exchange_accept_session(self.ptr(), pool.ptr(), &ticket.raw, timeout_ms(timeout), &mut raw) };
        check(rc, "orbit_exchange_accept_session")?;
        Ok(self.session(raw))
    }

    /// On the owner: waits for the next session offered to this node and accepts it.
    pub fn wait_session<'p>(&self, pool: &'p Pool, timeout: Option<Duration>) -> Result<Session<'p>> {
        let mut raw = sys::orbit_session::default();
        // SAFETY: as in accept_session.
        let rc = unsafe { sys::orbit_exchange_wait_session(self.ptr(), pool.ptr(), timeout_ms(timeout), &mut raw) };
        check(rc, "orbit_exchange_wait_session")?;
        Ok(self.session(raw))
    }
}

/// Where one flow of an exchange is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowState {
    /// Nothing sent yet.
    New,
    /// Started.
    Open,
    /// FIN sent (or received).
    Finished,
    /// RESET.
    Reset,
    /// Receive side: a violation or a corrupt frame ended it.
    Failed,
}

impl FlowState {
    fn from_raw(raw: sys::orbit_exchange_state) -> FlowState {
        match raw {
            sys::ORBIT_FLOW_NEW => FlowState::New,
            sys::ORBIT_FLOW_OPEN => FlowState::Open,
            sys::ORBIT_FLOW_FINISHED => FlowState::Finished,
            sys::ORBIT_FLOW_RESET => FlowState::Reset,
            _ => FlowState::Failed,
        }
    }
}

/// One side of an exchange: it sends one flow and receives the other.
///
/// `Send`, not `Sync`: used by one thread at a time. Chunks it receives borrow
/// it, so they are released before it closes. Dropping it closes the side
/// (an unfinished sending flow is reset).
pub struct Exchange {
    pub(crate) ptr: *mut sys::orbit_exchange,
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) exchanges: Exchanges,
}

// SAFETY: an exchange endpoint may be used from any thread of its process, one at a time.
unsafe impl Send for Exchange {}

impl Drop for Exchange {
    fn drop(&mut self) {
        // SAFETY: no chunk or reservation borrows it any more (lifetimes).
        unsafe { sys::orbit_exchange_close(self.ptr) }
    }
}

impl fmt::Debug for Exchange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Exchange").field("id", &self.id()).field("side", &self.side()).finish()
    }
}

/// A run of this node's arena lane, writable until it is sent (by
/// [`Exchange::data`] or [`Exchange::start`]) or dropped (cancelled: the
/// credit returns).
pub struct Reservation<'x> {
    raw: sys::orbit_reservation,
    _ex: PhantomData<&'x Exchange>,
}

// SAFETY: exchange.h: "a reservation or chunk belongs to one thread at a time"; cancel
// touches only the thread-safe arena.
unsafe impl Send for Reservation<'_> {}

impl Reservation<'_> {
    /// Whether it was sent (or cancelled): nothing more to do.
    pub fn is_done(&self) -> bool {
        self.raw.done
    }
}

impl Deref for Reservation<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        if self.raw.done {
            return &[];
        }
        // SAFETY: capacity writable bytes in this node's lane, ours until committed or cancelled.
        unsafe { std::slice::from_raw_parts(self.raw.data as *const u8, self.raw.capacity) }
    }
}

impl DerefMut for Reservation<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        if self.raw.done {
            return &mut [];
        }
        // SAFETY: as in deref; &mut self makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.raw.data as *mut u8, self.raw.capacity) }
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        // SAFETY: idempotent, a no-op on a done reservation.
        unsafe { sys::orbit_arena_cancel(&mut self.raw) }
    }
}

/// A received chunk: its bytes, read in place in shared memory (`Deref<[u8]>`)
/// until it is dropped, which releases it to its producer. It borrows the
/// exchange it came from, and slices of it borrow the chunk, so no byte is
/// read after its release:
///
/// ```compile_fail
/// # fn f(ex: orbit::Exchange) -> orbit::Result<()> {
/// let bytes: &[u8];
/// {
///     let chunk = match ex.next(None)? { orbit::Event::Data(c) => c, _ => return Ok(()) };
///     bytes = &chunk[..];
/// } // released here
/// println!("{}", bytes.len()); // error: `chunk` does not live long enough
/// # Ok(()) }
/// ```
pub struct Chunk<'x> {
    raw: sys::orbit_chunk,
    id: u64,
    _ex: PhantomData<&'x Exchange>,
}

// SAFETY: a chunk belongs to one thread at a time; release touches only the arena.
unsafe impl Send for Chunk<'_> {}
// SAFETY: &Chunk only reads bytes nobody writes after the commit.
unsafe impl Sync for Chunk<'_> {}

impl Chunk<'_> {
    /// Its id in the flow: 1, 2, ... (a START's metadata takes 1).
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl Deref for Chunk<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        if self.raw.released || self.raw.data.is_null() {
            return &[];
        }
        // SAFETY: len bytes in place, held (consumed, not released) by this chunk.
        unsafe { std::slice::from_raw_parts(self.raw.data as *const u8, self.raw.len) }
    }
}

impl Drop for Chunk<'_> {
    fn drop(&mut self) {
        // SAFETY: idempotent; the arena outlives 'x.
        unsafe { sys::orbit_chunk_release(&mut self.raw) }
    }
}

impl fmt::Debug for Chunk<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Chunk").field("id", &self.id).field("len", &self.len()).finish()
    }
}

/// One received event of a flow.
#[derive(Debug)]
pub enum Event<'x> {
    /// The flow started, with its metadata chunk if it carried one.
    Start(Option<Chunk<'x>>),
    /// The next chunk of the body.
    Data(Chunk<'x>),
    /// The flow finished.
    Fin,
    /// The sender reset the flow with its application code.
    Reset(u32),
}

impl Exchange {
    /// The exchange.
    pub fn id(&self) -> Id {
        // SAFETY: a live exchange.
        Id(unsafe { sys::orbit_exchange_id(self.ptr) })
    }

    /// Which side this is (A sends A→B and receives B→A).
    pub fn side(&self) -> Side {
        // SAFETY: a live exchange.
        Side::from_raw(unsafe { sys::orbit_exchange_side(self.ptr) })
    }

    /// The peer's node and incarnation.
    pub fn peer(&self) -> Result<(u16, u64)> {
        let mut owner = sys::orbit_owner::default();
        // SAFETY: a live exchange; owner writable.
        check(unsafe { sys::orbit_exchange_peer(self.ptr, &mut owner) }, "orbit_exchange_peer")?;
        Ok((owner.node, owner.incarnation))
    }

    /// Where the flow this side sends is.
    pub fn send_state(&self) -> FlowState {
        // SAFETY: a live exchange.
        FlowState::from_raw(unsafe { sys::orbit_exchange_send_state(self.ptr) })
    }

    /// Where the flow this side receives is.
    pub fn recv_state(&self) -> FlowState {
        // SAFETY: a live exchange.
        FlowState::from_raw(unsafe { sys::orbit_exchange_recv_state(self.ptr) })
    }

    /// A run for `len` bytes in this node's lane, waiting up to `timeout` for credit.
    pub fn reserve(&self, len: usize, timeout: Option<Duration>) -> Result<Reservation<'_>> {
        let mut raw = sys::orbit_reservation::default();
        // SAFETY: a live exchange; raw writable.
        let rc = unsafe { sys::orbit_exchange_reserve(self.ptr, len, timeout_ms(timeout), &mut raw) };
        check(rc, "orbit_exchange_reserve")?;
        Ok(Reservation { raw, _ex: PhantomData })
    }

    /// As [`reserve`](Exchange::reserve) without waiting
    /// ([`code::EPAYLOADFULL`](crate::code::EPAYLOADFULL) when the lane is full).
    pub fn try_reserve(&self, len: usize) -> Result<Reservation<'_>> {
        let mut raw = sys::orbit_reservation::default();
        // SAFETY: a live exchange; raw writable.
        check(unsafe { sys::orbit_exchange_try_reserve(self.ptr, len, &mut raw) }, "orbit_exchange_try_reserve")?;
        Ok(Reservation { raw, _ex: PhantomData })
    }

    /// Sends START with the first `len` bytes of `res` as metadata. On success the
    /// reservation is done; on `EAGAIN`/`ETIMEDOUT` it is kept for a retry.
    pub fn start(&self, res: &mut Reservation<'_>, len: usize, timeout: Option<Duration>) -> Result<()> {
        // SAFETY: a live exchange; res is a reservation of this exchange's arena.
        let rc = unsafe { sys::orbit_exchange_start(self.ptr, &mut res.raw, len, timeout_ms(timeout)) };
        check(rc, "orbit_exchange_start").map(|_| ())
    }

    /// Sends the first `len` bytes of `res` as the next DATA chunk, zero-copy. On
    /// success the reservation is done; on `EAGAIN`/`ETIMEDOUT` it is kept.
    pub fn data(&self, res: &mut Reservation<'_>, len: usize, timeout: Option<Duration>) -> Result<()> {
        // SAFETY: as in start.
        let rc = unsafe { sys::orbit_exchange_data(self.ptr, &mut res.raw, len, timeout_ms(timeout)) };
        check(rc, "orbit_exchange_data").map(|_| ())
    }

    /// START with a copy of `meta` (empty: no metadata).
    pub fn send_start(&self, meta: &[u8], timeout: Option<Duration>) -> Result<()> {
        // SAFETY: a live exchange; meta readable for its length.
        let rc = unsafe { sys::orbit_exchange_send_start(self.ptr, meta.as_ptr().cast(), meta.len(), timeout_ms(timeout)) };
        check(rc, "orbit_exchange_send_start").map(|_| ())
    }

    /// DATA with a copy of `buf` (at least one byte, at most a lane).
    pub fn send_data(&self, buf: &[u8], timeout: Option<Duration>) -> Result<()> {
        // SAFETY: a live exchange; buf readable for its length.
        let rc = unsafe { sys::orbit_exchange_send_data(self.ptr, buf.as_ptr().cast(), buf.len(), timeout_ms(timeout)) };
        check(rc, "orbit_exchange_send_data").map(|_| ())
    }

    /// FIN on the flow this side sends.
    pub fn finish(&self, timeout: Option<Duration>) -> Result<()> {
        // SAFETY: a live exchange.
        check(unsafe { sys::orbit_exchange_finish(self.ptr, timeout_ms(timeout)) }, "orbit_exchange_finish").map(|_| ())
    }

    /// RESET with the application's code.
    pub fn reset(&self, code: u32, timeout: Option<Duration>) -> Result<()> {
        // SAFETY: a live exchange.
        check(unsafe { sys::orbit_exchange_reset(self.ptr, code, timeout_ms(timeout)) }, "orbit_exchange_reset").map(|_| ())
    }

    pub(crate) fn event(&self, raw: sys::orbit_exchange_event) -> Event<'_> {
        let chunk = |raw: sys::orbit_exchange_event| Chunk { raw: raw.chunk, id: raw.chunk_id, _ex: PhantomData };
        match raw.type_ {
            sys::ORBIT_EXCHANGE_START if !raw.chunk.released => Event::Start(Some(chunk(raw))),
            sys::ORBIT_EXCHANGE_START => Event::Start(None),
            sys::ORBIT_EXCHANGE_DATA => Event::Data(chunk(raw)),
            sys::ORBIT_EXCHANGE_FIN => Event::Fin,
            _ => Event::Reset(raw.reset_code),
        }
    }

    /// The next event of the flow this side receives, waiting up to `timeout`.
    /// After FIN or RESET: [`code::ECLOSED`](crate::code::ECLOSED).
    pub fn next(&self, timeout: Option<Duration>) -> Result<Event<'_>> {
        let mut raw = sys::orbit_exchange_event::default();
        // SAFETY: a live exchange; raw writable; a chunk in it is owned by the Event.
        check(unsafe { sys::orbit_exchange_next(self.ptr, &mut raw, timeout_ms(timeout)) }, "orbit_exchange_next")?;
        Ok(self.event(raw))
    }

    /// The next event if one is queued.
    pub fn try_next(&self) -> Result<Option<Event<'_>>> {
        let mut raw = sys::orbit_exchange_event::default();
        // SAFETY: as in next.
        match check(unsafe { sys::orbit_exchange_try_next(self.ptr, &mut raw) }, "orbit_exchange_try_next") {
            Ok(_) => Ok(Some(self.event(raw))),
            Err(e) if e.is(crate::code::EAGAIN) => Ok(None),
            Err(e) => Err(e),
        }
    }
}
