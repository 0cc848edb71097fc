//! Streams: bounded duplex byte rings between two processes of a fleet.
use crate::error::{check, check_size, timeout_ms, Error, Result};
use crate::fleet::{c_string, Fleet, Id};
use orbit_sys as sys;
use std::ffi::CStr;
use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::os::raw::c_char;
use std::ptr;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

/// A streams table's geometry: every process opening a kind must give the same one.
#[derive(Clone, Debug)]
pub struct StreamSpec {
    pub(crate) raw: sys::orbit_stream_spec,
}

impl Default for StreamSpec {
    fn default() -> Self {
        StreamSpec::new()
    }
}

impl StreamSpec {
    /// `ORBIT_STREAM_SPEC_DEFAULT`: kind 246, 256 streams per node, 64 KiB rings.
    pub fn new() -> StreamSpec {
        StreamSpec {
            raw: sys::orbit_stream_spec {
                kind: sys::ORBIT_STREAM_KIND as u8,
                lane_capacity: 256,
                buffer_bytes: 65536,
                generation_limit: 0,
                resv: [0; 4],
            },
        }
    }
    /// The segment kind (a fleet may hold several stream tables).
    pub fn kind(mut self, kind: u8) -> Self {
        self.raw.kind = kind;
        self
    }
    /// Streams one node can hold at once (a power of two up to 65536).
    pub fn lane_capacity(mut self, streams: u32) -> Self {
        self.raw.lane_capacity = streams;
        self
    }
    /// Bytes one direction's ring holds (a power of two up to 2^31).
    pub fn buffer_bytes(mut self, bytes: u32) -> Self {
        self.raw.buffer_bytes = bytes;
        self
    }
    /// Tenancies of one slot per epoch (0: the id's 24-bit field).
    pub fn generation_limit(mut self, limit: u32) -> Self {
        self.raw.generation_limit = limit;
        self
    }
}

/// Which end of a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The creator's side.
    A,
    /// The side a ticket names.
    B,
}

impl Side {
    pub(crate) fn from_raw(raw: sys::orbit_side) -> Side {
        if raw == sys::ORBIT_SIDE_B {
            Side::B
        } else {
            Side::A
        }
    }
}

/// Names one side of a stream (or exchange) for whoever opens it: plain data,
/// printed and parsed as `"<id>/b/<epoch>"`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    pub(crate) raw: sys::orbit_ticket,
}

impl Ticket {
    /// The stream.
    pub fn id(&self) -> Id {
        Id(self.raw.id)
    }
    /// The side it opens.
    pub fn side(&self) -> Side {
        Side::from_raw(self.raw.side)
    }
    /// The table epoch it was minted in.
    pub fn epoch(&self) -> u64 {
        self.raw.epoch
    }
}

impl fmt::Display for Ticket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = [0 as c_char; 64];
        // SAFETY: buf writable for its length; 64 bytes always hold a ticket.
        if unsafe { sys::orbit_ticket_format(&self.raw, buf.as_mut_ptr(), buf.len()) } < 0 {
            return Err(fmt::Error);
        }
        // SAFETY: NUL-terminated within buf.
        f.write_str(&unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy())
    }
}

impl fmt::Debug for Ticket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Ticket({})", self)
    }
}

impl FromStr for Ticket {
    type Err = Error;
    fn from_str(s: &str) -> Result<Ticket> {
        let text = c_string(s, "orbit_ticket_parse")?;
        let mut raw = sys::orbit_ticket::default();
        // SAFETY: text NUL-terminated; raw writable.
        check(unsafe { sys::orbit_ticket_parse(text.as_ptr(), &mut raw) }, "orbit_ticket_parse")?;
        Ok(Ticket { raw })
    }
}

pub(crate) struct StreamsHandle {
    pub(crate) ptr: *mut sys::orbit_streams,
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fleet: Fleet,
    #[cfg(feature = "tokio")]
    pub(crate) readiness: crate::asyncio::Lazy,
}

// SAFETY: stream.h: "a streams handle may be shared by the threads of a process".
unsafe impl Send for StreamsHandle {}
// SAFETY: as above.
unsafe impl Sync for StreamsHandle {}

impl Drop for StreamsHandle {
    fn drop(&mut self) {
        #[cfg(feature = "tokio")]
        self.readiness.close();
        // SAFETY: every endpoint holds an Arc to this handle, so all are closed.
        unsafe { sys::orbit_streams_close(self.ptr) }
    }
}

/// A streams table of a fleet. Clones share the handle; endpoints keep it open.
#[derive(Clone)]
pub struct Streams {
    pub(crate) handle: Arc<StreamsHandle>,
}

/// Counters of one streams handle since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamStats {
    /// Bytes written through its endpoints.
    pub bytes_written: u64,
    /// Bytes read through its endpoints.
    pub bytes_read: u64,
    /// Futex sleeps and io_uring waits filled.
    pub parks: u64,
    /// Wakes issued to parked peers.
    pub wakes: u64,
    /// Doorbells rung (a watching peer's readiness descriptor signalled).
    pub doorbells: u64,
}

impl Streams {
    /// Opens (creating if needed) the default streams table of the fleet.
    pub fn open(fleet: &Fleet) -> Result<Streams> {
        Streams::open_with(fleet, &StreamSpec::new())
    }

    /// Opens (creating if needed) the streams table `spec` names.
    pub fn open_with(fleet: &Fleet, spec: &StreamSpec) -> Result<Streams> {
        let mut ptr = ptr::null_mut();
        // SAFETY: a live fleet; spec and ptr valid for the call.
        check(unsafe { sys::orbit_streams_open(fleet.ptr(), &spec.raw, &mut ptr) }, "orbit_streams_open")?;
        Ok(Streams {
            handle: Arc::new(StreamsHandle {
                ptr,
                fleet: fleet.clone(),
                #[cfg(feature = "tokio")]
                readiness: crate::asyncio::Lazy::default(),
            }),
        })
    }

    pub(crate) fn ptr(&self) -> *mut sys::orbit_streams {
        self.handle.ptr
    }

    fn endpoint(&self, ptr: *mut sys::orbit_endpoint) -> Endpoint {
        Endpoint {
            ptr,
            streams: self.clone(),
            read_timeout: None,
            write_timeout: None,
            #[cfg(feature = "tokio")]
            waits: Default::default(),
        }
    }

    /// A new stream in this node's lane: side A, and a ticket naming side B.
    pub fn create(&self) -> Result<(Endpoint, Ticket)> {
        let mut a = ptr::null_mut();
        let mut ticket = sys::orbit_ticket::default();
        // SAFETY: a live table; outputs writable.
        check(unsafe { sys::orbit_streams_create(self.ptr(), &mut a, &mut ticket) }, "orbit_streams_create")?;
        Ok((self.endpoint(a), Ticket { raw: ticket }))
    }

    /// Holds the side a ticket names (once per tenancy).
    pub fn open_ticket(&self, ticket: &Ticket) -> Result<Endpoint> {
        let mut ep = ptr::null_mut();
        // SAFETY: a live table; ep writable.
        check(unsafe { sys::orbit_streams_open_ticket(self.ptr(), &ticket.raw, &mut ep) }, "orbit_streams_open_ticket")?;
        Ok(self.endpoint(ep))
    }

    /// Offers the ticket's stream to `to_node` (discovery, not a claim).
    pub fn offer(&self, ticket: &Ticket, to_node: u16) -> Result<()> {
        // SAFETY: a live table.
        check(unsafe { sys::orbit_streams_offer(self.ptr(), &ticket.raw, to_node) }, "orbit_streams_offer").map(|_| ())
    }

    /// The next offer to this node, if any.
    pub fn take_offer(&self) -> Result<Option<Ticket>> {
        let mut raw = sys::orbit_ticket::default();
        // SAFETY: a live table; raw writable.
        match check(unsafe { sys::orbit_streams_take_offer(self.ptr(), &mut raw) }, "orbit_streams_take_offer") {
            Ok(_) => Ok(Some(Ticket { raw })),
            Err(e) if e.is(crate::code::EAGAIN) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Waits for the next offer to this node (`None`: forever).
    pub fn wait_offer(&self, timeout: Option<Duration>) -> Result<Ticket> {
        let mut raw = sys::orbit_ticket::default();
        // SAFETY: a live table; raw writable.
        let rc = unsafe { sys::orbit_streams_wait_offer(self.ptr(), timeout_ms(timeout), &mut raw) };
        check(rc, "orbit_streams_wait_offer")?;
        Ok(Ticket { raw })
    }

    /// Whether the id names a live stream now.
    pub fn is_live(&self, id: Id) -> bool {
        // SAFETY: a live table.
        unsafe { sys::orbit_streams_is_live(self.ptr(), id.0) }
    }

    /// The epoch tickets minted now carry.
    pub fn epoch(&self) -> u64 {
        // SAFETY: a live table.
        unsafe { sys::orbit_streams_epoch(self.ptr()) }
    }

    /// A confirmed death: every side that incarnation held ends.
    pub fn node_dead(&self, node: u16, incarnation: u64) {
        // SAFETY: a live table.
        unsafe { sys::orbit_streams_node_dead(self.ptr(), node, incarnation) }
    }

    /// This process took over its node (a replacement member): ends every side
    /// any other incarnation of this node held. Call it before creating anything.
    pub fn supersede(&self) {
        // SAFETY: a live table.
        unsafe { sys::orbit_streams_supersede(self.ptr()) }
    }

    /// This handle's counters.
    pub fn stats(&self) -> StreamStats {
        let mut raw = sys::orbit_stream_stats::default();
        // SAFETY: a live table; raw writable.
        unsafe { sys::orbit_streams_stats(self.ptr(), &mut raw) };
        StreamStats {
            bytes_written: raw.bytes_written,
            bytes_read: raw.bytes_read,
            parks: raw.parks,
            wakes: raw.wakes,
            doorbells: raw.doorbells,
        }
    }
}

impl fmt::Debug for Streams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Streams").field("epoch", &self.epoch()).finish()
    }
}

/// One side of a stream: `std::io::Read` + `Write` (and, with the `tokio`
/// feature, `AsyncRead` + `AsyncWrite`). Dropping it closes the side: an
/// unfinished writer resets, the reader is gone.
///
/// An endpoint may be moved to another thread (`Send`) but not shared
/// (`!Sync`): the library allows one reading and one writing thread at once,
/// which [`split`](Endpoint::split) gives.
///
/// ```no_run
/// use std::io::{Read, Write};
/// let fleet = orbit::Fleet::join("web")?;
/// let streams = orbit::Streams::open(&fleet)?;
/// let (mut a, ticket) = streams.create()?;
/// let mut b = streams.open_ticket(&ticket)?;
/// a.write_all(b"hello")?;
/// a.finish()?;
/// let mut text = String::new();
/// b.read_to_string(&mut text)?;
/// assert_eq!(text, "hello");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Endpoint {
    pub(crate) ptr: *mut sys::orbit_endpoint,
    pub(crate) streams: Streams,
    read_timeout: Option<Duration>,
    write_timeout: Option<Duration>,
    #[cfg(feature = "tokio")]
    pub(crate) waits: crate::asyncio::EndpointWaits,
}

// SAFETY: an endpoint may be used from any thread of its process, one call at a time
// (&mut self for every read, write and close; Sync is not given).
unsafe impl Send for Endpoint {}

impl Drop for Endpoint {
    fn drop(&mut self) {
        #[cfg(feature = "tokio")]
        self.waits.cancel();
        // SAFETY: no ReadHalf/WriteHalf borrows it any more (lifetimes); the table outlives it.
        unsafe { sys::orbit_endpoint_close(self.ptr) }
    }
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint").field("id", &self.id()).field("side", &self.side()).finish()
    }
}

pub(crate) fn read_raw(ep: *mut sys::orbit_endpoint, buf: &mut [u8], timeout: Option<Duration>) -> Result<usize> {
    // SAFETY: ep live; buf writable for its length.
    let rc = unsafe { sys::orbit_endpoint_read(ep, buf.as_mut_ptr().cast(), buf.len(), timeout_ms(timeout)) };
    check_size(rc, "orbit_endpoint_read")
}

pub(crate) fn try_read_raw(ep: *mut sys::orbit_endpoint, buf: &mut [u8]) -> Result<usize> {
    // SAFETY: ep live; buf writable for its length.
    let rc = unsafe { sys::orbit_endpoint_try_read(ep, buf.as_mut_ptr().cast(), buf.len()) };
    check_size(rc, "orbit_endpoint_try_read")
}

pub(crate) fn try_write_raw(ep: *mut sys::orbit_endpoint, buf: &[u8]) -> Result<usize> {
    // SAFETY: ep live; buf readable for its length.
    let rc = unsafe { sys::orbit_endpoint_try_write(ep, buf.as_ptr().cast(), buf.len()) };
    check_size(rc, "orbit_endpoint_try_write")
}

fn write_all_raw(ep: *mut sys::orbit_endpoint, buf: &[u8], timeout: Option<Duration>) -> Result<()> {
    // SAFETY: ep live; buf readable for its length.
    let rc = unsafe { sys::orbit_endpoint_write_all(ep, buf.as_ptr().cast(), buf.len(), timeout_ms(timeout)) };
    check(rc, "orbit_endpoint_write_all").map(|_| ())
}

fn write_raw(ep: *mut sys::orbit_endpoint, buf: &[u8], timeout: Option<Duration>) -> Result<usize> {
    // SAFETY: ep live; buf readable for its length.
    let rc = unsafe { sys::orbit_endpoint_write(ep, buf.as_ptr().cast(), buf.len(), timeout_ms(timeout)) };
    check_size(rc, "orbit_endpoint_write")
}

impl Endpoint {
    /// The stream.
    pub fn id(&self) -> Id {
        // SAFETY: a live endpoint.
        Id(unsafe { sys::orbit_endpoint_id(self.ptr) })
    }

    /// Which side this is.
    pub fn side(&self) -> Side {
        // SAFETY: a live endpoint.
        Side::from_raw(unsafe { sys::orbit_endpoint_side(self.ptr) })
    }

    /// The table it belongs to.
    pub fn streams(&self) -> &Streams {
        &self.streams
    }

    /// The node and incarnation holding the other side
    /// ([`code::EAGAIN`](crate::code::EAGAIN) while nobody opened it).
    pub fn peer(&self) -> Result<(u16, u64)> {
        let mut owner = sys::orbit_owner::default();
        // SAFETY: a live endpoint; owner writable.
        check(unsafe { sys::orbit_endpoint_peer(self.ptr, &mut owner) }, "orbit_endpoint_peer")?;
        Ok((owner.node, owner.incarnation))
    }

    /// What is queued now, up to `buf.len()`: 0 at a clean end (FIN),
    /// [`code::EAGAIN`](crate::code::EAGAIN) when empty.
    pub fn try_read(&mut self, buf: &mut [u8]) -> Result<usize> {
        try_read_raw(self.ptr, buf)
    }

    /// Waits up to `timeout` (`None`: forever) for the first byte, then reads what is queued.
    pub fn read_timeout(&mut self, buf: &mut [u8], timeout: Option<Duration>) -> Result<usize> {
        read_raw(self.ptr, buf, timeout)
    }

    /// Copies what fits now: [`code::EAGAIN`](crate::code::EAGAIN) when the ring is full.
    pub fn try_write(&mut self, buf: &[u8]) -> Result<usize> {
        try_write_raw(self.ptr, buf)
    }

    /// Writes everything, waiting for room (for a quarter ring at a time) up to
    /// `timeout` for the whole call.
    pub fn write_all_timeout(&mut self, buf: &[u8], timeout: Option<Duration>) -> Result<()> {
        write_all_raw(self.ptr, buf, timeout)
    }

    /// Reads exactly `buf.len()` bytes as one frame, waiting up to `timeout`:
    /// all or nothing ([`code::ETOOLARGE`](crate::code::ETOOLARGE) above the
    /// ring, [`code::EMALFORMED`](crate::code::EMALFORMED) when FIN comes first).
    pub fn read_frame(&mut self, buf: &mut [u8], timeout: Option<Duration>) -> Result<()> {
        // SAFETY: a live endpoint; buf writable for its length.
        let rc = unsafe { sys::orbit_endpoint_read_exact(self.ptr, buf.as_mut_ptr().cast(), buf.len(), timeout_ms(timeout)) };
        check(rc, "orbit_endpoint_read_exact").map(|_| ())
    }

    /// Consumes exactly `buf.len()` bytes if a whole frame is queued now
    /// ([`code::EAGAIN`](crate::code::EAGAIN) otherwise).
    pub fn try_read_frame(&mut self, buf: &mut [u8]) -> Result<()> {
        // SAFETY: as in read_frame.
        let rc = unsafe { sys::orbit_endpoint_try_read_exact(self.ptr, buf.as_mut_ptr().cast(), buf.len()) };
        check(rc, "orbit_endpoint_try_read_exact").map(|_| ())
    }

    /// Publishes `buf` as one frame, waiting up to `timeout` for room for all of
    /// it: the reader never sees part of it.
    pub fn write_frame(&mut self, buf: &[u8], timeout: Option<Duration>) -> Result<()> {
        // SAFETY: a live endpoint; buf readable for its length.
        let rc = unsafe { sys::orbit_endpoint_write_exact(self.ptr, buf.as_ptr().cast(), buf.len(), timeout_ms(timeout)) };
        check(rc, "orbit_endpoint_write_exact").map(|_| ())
    }

    /// Publishes `buf` as one frame if it fits now ([`code::EAGAIN`](crate::code::EAGAIN) otherwise).
    pub fn try_write_frame(&mut self, buf: &[u8]) -> Result<()> {
        // SAFETY: as in write_frame.
        let rc = unsafe { sys::orbit_endpoint_try_write_exact(self.ptr, buf.as_ptr().cast(), buf.len()) };
        check(rc, "orbit_endpoint_try_write_exact").map(|_| ())
    }

    /// Sets the timeout of `Read::read` (`None`: wait forever, the default).
    pub fn set_read_timeout(&mut self, timeout: Option<Duration>) {
        self.read_timeout = timeout;
    }

    /// Sets the timeout of `Write::write` and `write_all` (`None`: forever, the default).
    pub fn set_write_timeout(&mut self, timeout: Option<Duration>) {
        self.write_timeout = timeout;
    }

    /// FIN: the reader drains what is queued, then reads 0. Idempotent.
    pub fn finish(&mut self) -> Result<()> {
        // SAFETY: a live endpoint; &mut self: the writing thread.
        check(unsafe { sys::orbit_endpoint_finish(self.ptr) }, "orbit_endpoint_finish").map(|_| ())
    }

    /// RESET: the reader gets [`code::ERESET`](crate::code::ERESET); queued bytes are dropped.
    pub fn reset(&mut self) {
        // SAFETY: a live endpoint; &mut self: the writing thread.
        unsafe { sys::orbit_endpoint_reset(self.ptr) }
    }

    /// Stops reading (the peer's writes fail with
    /// [`code::EPEERGONE`](crate::code::EPEERGONE)); the slot is kept.
    pub fn stop_reading(&mut self) {
        // SAFETY: a live endpoint.
        unsafe { sys::orbit_endpoint_stop_reading(self.ptr) }
    }

    /// Side A only: after side B closed, clears both directions so the same
    /// ticket can be opened again.
    pub fn rearm(&mut self) -> Result<()> {
        // SAFETY: a live endpoint; &mut self: no other call runs.
        check(unsafe { sys::orbit_endpoint_rearm(self.ptr) }, "orbit_endpoint_rearm").map(|_| ())
    }

    /// Whether the reader of this side's writes has gone (stopped, closed, reset or died).
    pub fn peer_closed(&self) -> Result<bool> {
        // SAFETY: a live endpoint.
        check(unsafe { sys::orbit_endpoint_peer_closed(self.ptr) }, "orbit_endpoint_peer_closed").map(|r| r == 1)
    }

    /// A reading half and a writing half, for one reading thread and one
    /// writing thread at once.
    pub fn split(&mut self) -> (ReadHalf<'_>, WriteHalf<'_>) {
        let ptr = self.ptr;
        let (rt, wt) = (self.read_timeout, self.write_timeout);
        (
            ReadHalf { ptr, timeout: rt, _ep: PhantomData },
            WriteHalf { ptr, timeout: wt, _ep: PhantomData },
        )
    }
}

impl io::Read for Endpoint {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        Ok(read_raw(self.ptr, buf, self.read_timeout)?)
    }
}

impl io::Write for Endpoint {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(write_raw(self.ptr, buf, self.write_timeout)?)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        Ok(write_all_raw(self.ptr, buf, self.write_timeout)?)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The reading half of an [`Endpoint`] (from [`Endpoint::split`]).
pub struct ReadHalf<'a> {
    ptr: *mut sys::orbit_endpoint,
    timeout: Option<Duration>,
    _ep: PhantomData<&'a mut Endpoint>,
}

/// The writing half of an [`Endpoint`] (from [`Endpoint::split`]).
pub struct WriteHalf<'a> {
    ptr: *mut sys::orbit_endpoint,
    timeout: Option<Duration>,
    _ep: PhantomData<&'a mut Endpoint>,
}

// SAFETY: stream.h: one reading thread and one writing thread may use an endpoint at once.
unsafe impl Send for ReadHalf<'_> {}
// SAFETY: as above.
unsafe impl Send for WriteHalf<'_> {}

impl ReadHalf<'_> {
    /// As [`Endpoint::try_read`].
    pub fn try_read(&mut self, buf: &mut [u8]) -> Result<usize> {
        try_read_raw(self.ptr, buf)
    }
}

impl WriteHalf<'_> {
    /// As [`Endpoint::try_write`].
    pub fn try_write(&mut self, buf: &[u8]) -> Result<usize> {
        try_write_raw(self.ptr, buf)
    }
    /// FIN (as [`Endpoint::finish`]).
    pub fn finish(&mut self) -> Result<()> {
        // SAFETY: the writing half: finish belongs to the writing thread.
        check(unsafe { sys::orbit_endpoint_finish(self.ptr) }, "orbit_endpoint_finish").map(|_| ())
    }
}

impl io::Read for ReadHalf<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        Ok(read_raw(self.ptr, buf, self.timeout)?)
    }
}

impl io::Write for WriteHalf<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(write_raw(self.ptr, buf, self.timeout)?)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        Ok(write_all_raw(self.ptr, buf, self.timeout)?)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
