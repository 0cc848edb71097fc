//! The `tokio` feature: futures and `AsyncRead`/`AsyncWrite` driven by orbit's
//! descriptors through `AsyncFd`; no thread is started per wait.
//!
//! * Endpoint reads and writes, admission and death waits: the library's prep
//!   calls (`orbit_endpoint_prep_wait_readable`, `_writable_exact`,
//!   `orbit_admission_prep_wait`, `orbit_fleet_prep_wait_node_death`) spin as
//!   the blocking calls do, then fill a FUTEX_WAIT on the shared word in a small
//!   io_uring per fleet handle (kernel ABI, no liburing), whose descriptor
//!   tokio watches. A dropped future, or a closed endpoint, cancels its
//!   FUTEX_WAIT (IORING_OP_ASYNC_CANCEL). An endpoint's task spins first
//!   itself, for a budget learned from how soon its parks ended (`Spin`),
//!   looking through `orbit_streams_rings`, which arms nothing.
//! * Offers, pool reservations and exchange events, and endpoints where
//!   io_uring futex operations are missing: the table's readiness eventfd
//!   (`orbit_*_readiness` + `orbit_readiness_drain`). A `try_*` call that
//!   answers `EAGAIN` asks for this node's doorbell, the doorbell signals the
//!   eventfd, the waiting tasks wake and retry.
//! * Admission and death waits where io_uring futex operations are missing
//!   (Linux < 6.7, seccomp): the blocking call on tokio's blocking pool, in
//!   slices of 100 ms.
use crate::error::{Error, Result};
use crate::{code, Admission, Admit, Demand, Endpoint, Exchange, Event, Fleet, Id, Key, Lease, Pool, Streams, Ticket};
use orbit_sys as sys;
use std::future::Future;
use std::io;
use std::os::raw::c_int;
use std::os::unix::io::{AsRawFd, RawFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A future from a closure (std's `poll_fn` is Rust 1.64).
struct PollFn<F>(F);
impl<T, F: FnMut(&mut Context<'_>) -> Poll<T> + Unpin> Future for PollFn<F> {
    type Output = T;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        (self.0)(cx)
    }
}

fn io_err(e: io::Error, call: &'static str) -> Error {
    Error::new(e.raw_os_error().unwrap_or(libc::EIO), call, format!("{}: {}", call, e))
}

/// The tasks waiting on one descriptor. tokio keeps one waker per descriptor
/// and direction; this is the waker it keeps, and it wakes every task that
/// registered since the last readiness (each then retries its call).
#[derive(Default)]
struct Fanout {
    wakers: Mutex<Vec<Waker>>,
}

impl Fanout {
    fn register(&self, waker: &Waker) {
        let mut w = self.wakers.lock().unwrap();
        if !w.iter().any(|x| x.will_wake(waker)) {
            w.push(waker.clone());
        }
    }
    fn wake_all(&self) {
        let woken = std::mem::take(&mut *self.wakers.lock().unwrap());
        for w in woken {
            w.wake();
        }
    }
    /// Wakes every listed task but the one polling now, which stays listed (it
    /// looks again in this poll, and may still go to sleep after it).
    fn wake_others(&self, me: &Waker) {
        let woken = {
            let mut list = self.wakers.lock().unwrap();
            let all = std::mem::take(&mut *list);
            let (mine, others): (Vec<Waker>, Vec<Waker>) = all.into_iter().partition(|w| w.will_wake(me));
            *list = mine;
            others
        };
        for w in woken {
            w.wake();
        }
    }
}

impl Wake for Fanout {
    fn wake(self: Arc<Self>) {
        self.wake_all();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.wake_all();
    }
}

/// Retries `op` while it answers `EAGAIN`, for up to the library's spin budget
/// (`orbit_spin_ns`, 2 µs by default, `ORBIT_SPIN_NS`), as the blocking calls
/// spin before they park: a peer mid-copy usually answers within it, and a
/// task that need not sleep costs no wake.
fn spin<T>(op: &mut impl FnMut() -> Result<T>) -> Result<T> {
    let r = op();
    match &r {
        Err(e) if e.is(code::EAGAIN) => {}
        _ => return r,
    }
    // SAFETY: a plain getter.
    let budget = u64::from(unsafe { sys::orbit_spin_ns() });
    if budget == 0 {
        return r;
    }
    let t0 = std::time::Instant::now();
    loop {
        for _ in 0..64 {
            std::hint::spin_loop();
        }
        let r = op();
        match &r {
            Err(e) if e.is(code::EAGAIN) => {}
            _ => return r,
        }
        if t0.elapsed().as_nanos() as u64 >= budget {
            return r;
        }
    }
}

/// A descriptor someone else owns (the C handle closes it; we deregister first).
struct Fd(RawFd);
impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

fn watch(fd: RawFd, call: &'static str) -> Result<AsyncFd<Fd>> {
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(Error::new(
            code::ENOTSUP,
            call,
            format!("{}: an async orbit call needs a tokio runtime (with I/O enabled)", call),
        ));
    }
    AsyncFd::with_interest(Fd(fd), tokio::io::Interest::READABLE).map_err(|e| io_err(e, call))
}

/// One table handle's readiness eventfd, watched by tokio.
pub(crate) struct Readiness {
    fd: AsyncFd<Fd>,
    fanout: Arc<Fanout>,
    fanout_waker: Waker,
    /// Drains so far: a task whose call began before a drain retries before it sleeps.
    drains: AtomicU64,
}

impl Readiness {
    /// Runs `op` until it stops answering `EAGAIN`, parking the task on the
    /// eventfd in between. Returns Pending only with the task registered.
    pub(crate) fn poll_op<T>(&self, cx: &mut Context<'_>, mut op: impl FnMut() -> Result<T>) -> Poll<Result<T>> {
        loop {
            let before = self.drains.load(Ordering::SeqCst);
            match spin(&mut op) {
                Err(e) if e.is(code::EAGAIN) => {}
                r => return Poll::Ready(r),
            }
            // The call armed this node's doorbell for its object. Register, then look:
            // a drain after our call either shows in `drains` or wakes us (we are listed).
            self.fanout.register(cx.waker());
            if self.drains.load(Ordering::SeqCst) != before {
                continue;
            }
            let mut fcx = Context::from_waker(&self.fanout_waker);
            match self.fd.poll_read_ready(&mut fcx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(io_err(e, "orbit_readiness_drain"))),
                Poll::Ready(Ok(mut guard)) => {
                    // SAFETY: a readiness descriptor of this process's live handle.
                    let rc = unsafe { sys::orbit_readiness_drain(self.fd.get_ref().0) };
                    if rc < 0 {
                        return Poll::Ready(Err(Error::last(rc, "orbit_readiness_drain")));
                    }
                    self.drains.fetch_add(1, Ordering::SeqCst);
                    // A signal after the drain is a new tokio event: this clears only what we drained.
                    guard.clear_ready();
                    // Every other task that slept on this descriptor retries: the drain was theirs too.
                    // So does this one: its other futures (a join!, a select!) share its waker.
                    self.fanout.wake_others(cx.waker());
                    cx.waker().wake_by_ref();
                }
            }
        }
    }
}

/// A handle's readiness, opened on first async use (one per handle: the library
/// refuses a second `orbit_*_readiness` call).
#[derive(Default)]
pub(crate) struct Lazy {
    cell: Mutex<Option<Arc<Readiness>>>,
}

impl Lazy {
    pub(crate) fn get(&self, call: &'static str, open: impl FnOnce() -> c_int) -> Result<Arc<Readiness>> {
        let mut cell = self.cell.lock().unwrap();
        if let Some(r) = cell.as_ref() {
            return Ok(r.clone());
        }
        let fd = open();
        if fd < 0 {
            return Err(Error::last(fd, call));
        }
        let fanout = Arc::new(Fanout::default());
        let r = Arc::new(Readiness {
            fd: watch(fd, call)?,
            fanout_waker: Waker::from(fanout.clone()),
            fanout,
            drains: AtomicU64::new(0),
        });
        *cell = Some(r.clone());
        Ok(r)
    }

    /// Deregisters the descriptor from tokio before the C handle closes it.
    pub(crate) fn close(&self) {
        if let Ok(mut cell) = self.cell.lock() {
            cell.take();
        }
    }
}

/// Per-endpoint async state: the FUTEX_WAITs it has in the fleet's ring, each
/// direction's spin, and how many times a poll returned Pending.
#[derive(Default)]
pub(crate) struct EndpointWaits {
    parks: u64,
    ring: Option<Arc<Option<Waits>>>,
    read: Direction,
    write: Direction,
}

/// One direction's wait: its FUTEX_WAIT in the ring, when it was armed, and the
/// spin budget learned from how soon past waits ended.
#[derive(Default)]
struct Direction {
    token: Option<u64>,
    armed_at: Option<Instant>,
    spin: Spin,
}

/// A budget grows past the setting up to this many times it (as the library's
/// spin does): a peer that keeps answering just after we park is worth spinning for.
const SPIN_CEILING_FACTOR: u64 = 16;
/// A check that comes this late after the last one lost its CPU: spinning on a
/// contended CPU only delays the task it waits for (often the peer itself), so
/// the spin yields between checks instead, until this many yields in a row
/// came back at once (the library's spin does the same).
const SPIN_CONTENDED_GAP: Duration = Duration::from_micros(5);
const SPIN_CONTENDED_MEMORY: u32 = 16;

std::thread_local! {
    /// Yields left before this thread's spins pause again instead.
    static CONTENDED: std::cell::Cell<u32> = std::cell::Cell::new(0);
}

/// The async form of the blocking calls' adaptive spin. A task that returns
/// Pending pays a FUTEX_WAIT, an io_uring completion, an epoll wake and a
/// reschedule (several microseconds), where a blocking thread pays one futex
/// wake; the library's prep call spins only its own budget, which a FUTEX_WAIT
/// it never sees end cannot raise. So the task spins here first: a hit keeps
/// at least the setting, a miss halves the budget (floor: a sixteenth of the
/// setting), and a park that ended soon after it began raises the budget to
/// cover it next time, up to the ceiling. Past a sixteenth of the setting it
/// yields between looks instead of pausing (a task cannot see where its peer
/// runs, as the blocking calls' CPU hints do).
#[derive(Default)]
struct Spin {
    budget_ns: u64,
    waits: u64,
}

impl Spin {
    fn setting() -> u64 {
        // SAFETY: a plain getter.
        u64::from(unsafe { sys::orbit_spin_ns() })
    }

    /// Calls `op` once `ready` says it would progress, looking for up to the
    /// learned budget; `EAGAIN` when it did not. Looking through `ready`, not
    /// `op`, is what keeps a spin cheap for the peer: a try that finds nothing
    /// asks for this node's doorbell, which the peer's next publication rings.
    fn run<T>(&mut self, op: &mut impl FnMut() -> Result<T>, ready: &mut impl FnMut() -> bool) -> Result<T> {
        if let Some(r) = Spin::attempt(op, ready) {
            return r;
        }
        let setting = Spin::setting();
        // Every 8th wait explores with at least the setting: a budget that shrank
        // while the peer was away finds out that it is back.
        self.waits += 1;
        let explore = self.waits % 8 == 0;
        let learned = if self.budget_ns == 0 || (explore && self.budget_ns < setting) { setting } else { self.budget_ns };
        let budget = Duration::from_nanos(learned.clamp(setting / 16, setting * SPIN_CEILING_FACTOR));
        let t0 = Instant::now();
        let mut last = t0;
        loop {
            let now = Instant::now();
            if now - t0 >= budget {
                if !explore {
                    self.budget_ns = (budget.as_nanos() as u64 / 2).max(setting / 16);
                }
                return Err(Error::new(code::EAGAIN, "orbit_streams_rings", String::new()));
            }
            // Past a sixteenth of the setting, or on a contended CPU, look between
            // yields: the peer may wait for this very CPU, and pauses would keep it off
            // for the whole budget (the event then comes just after the park, and a
            // learned budget would only grow). A few pauses between looks otherwise
            // (a pause is up to ~65 cycles on AMD).
            if Spin::contended(now - last) || now - t0 >= Duration::from_nanos(setting / 16) {
                std::thread::yield_now();
            } else {
                for _ in 0..4 {
                    std::hint::spin_loop();
                }
            }
            last = now;
            if let Some(r) = Spin::attempt(op, ready) {
                self.budget_ns = (budget.as_nanos() as u64).max(setting);
                return r;
            }
        }
    }

    /// `op`'s answer, or None when `ready` says not yet (or `op` answers `EAGAIN`).
    fn attempt<T>(op: &mut impl FnMut() -> Result<T>, ready: &mut impl FnMut() -> bool) -> Option<Result<T>> {
        if !ready() {
            return None;
        }
        match op() {
            Err(e) if e.is(code::EAGAIN) => None,
            r => Some(r),
        }
    }

    /// Whether this thread's spin should yield rather than pause, given the gap
    /// since its last look: one that came late lost the CPU meanwhile; each
    /// yield that came back at once counts down.
    fn contended(gap: Duration) -> bool {
        CONTENDED.with(|c| {
            if gap > SPIN_CONTENDED_GAP {
                c.set(SPIN_CONTENDED_MEMORY);
            } else if c.get() > 0 {
                c.set(c.get() - 1);
            }
            c.get() > 0
        })
    }

    /// A park that lasted `parked`: spin that long (and a quarter) next time, if
    /// that is within the ceiling.
    fn learn_from_park(&mut self, parked: Duration) {
        let setting = Spin::setting();
        let want = (self.budget_ns.max(setting) + parked.as_nanos() as u64) * 5 / 4;
        if setting > 0 && want <= setting * SPIN_CEILING_FACTOR {
            self.budget_ns = want;
        }
    }
}

impl EndpointWaits {
    /// Before the endpoint closes: its waits leave the kernel.
    pub(crate) fn cancel(&mut self) {
        if let Some(Some(w)) = self.ring.as_deref() {
            for t in [self.read.token.take(), self.write.token.take()].iter().flatten() {
                w.cancel(*t);
            }
        }
    }
}

/// One direction of an endpoint through the ring: retry `op` (spinning for the
/// learned budget); on `EAGAIN` let the library fill a FUTEX_WAIT on the
/// direction's word (`prep`), and park the task until it completes.
fn poll_ring_op<T>(
    waits: &Waits,
    dir: &mut Direction,
    cx: &mut Context<'_>,
    mut op: impl FnMut() -> Result<T>,
    mut ready: impl FnMut() -> bool,
    mut prep: impl FnMut(*mut sys::io_uring_sqe) -> c_int,
    call: &'static str,
) -> Poll<Result<T>> {
    loop {
        if let Some(token) = dir.token {
            match waits.poll_done(cx, token) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(r) => {
                    dir.token = None;
                    if let Some(at) = dir.armed_at.take() {
                        dir.spin.learn_from_park(at.elapsed());
                    }
                    r?;
                }
            }
        }
        match dir.spin.run(&mut op, &mut ready) {
            Err(e) if e.is(code::EAGAIN) => {}
            r => return Poll::Ready(r),
        }
        match waits.arm(&mut prep, call) {
            Err(e) => return Poll::Ready(Err(e)),
            Ok(None) => {} // ready now: try again
            Ok(Some(t)) => {
                dir.token = Some(t);
                dir.armed_at = Some(Instant::now());
            }
        }
    }
}

/// One direction of a stream, looked at without touching it.
struct RingView {
    streams: *mut sys::orbit_streams,
    id: sys::orbit_id,
    index: usize,
}

impl RingView {
    /// A racy snapshot; None: ask the call itself (it reports why).
    fn now(&self) -> Option<sys::orbit_stream_ring> {
        let mut out = [sys::orbit_stream_ring::default(); 2];
        // SAFETY: a live table (the endpoint holds it); out holds two.
        if unsafe { sys::orbit_streams_rings(self.streams, self.id, out.as_mut_ptr()) } < 0 {
            return None;
        }
        Some(out[self.index])
    }
}

impl Endpoint {
    /// How many times `poll_read` or `poll_write` returned `Pending` on this
    /// endpoint: the async form of a park (each one ends with one wake).
    pub fn async_parks(&self) -> u64 {
        self.waits.parks
    }

    fn readiness(&self) -> Result<Arc<Readiness>> {
        let streams = self.streams.ptr();
        // SAFETY: a live table handle; the descriptor is closed by orbit_streams_close.
        self.streams.handle.readiness.get("orbit_streams_readiness", || unsafe { sys::orbit_streams_readiness(streams) })
    }
}

impl Endpoint {
    /// The fleet's ring, where io_uring futex operations work.
    fn ring(&mut self) -> Result<Arc<Option<Waits>>> {
        if self.waits.ring.is_none() {
            self.waits.ring = Some(self.streams.handle.fleet.handle.waits.get()?);
        }
        Ok(self.waits.ring.clone().unwrap())
    }

    /// The direction this side reads (`reading`) or writes, as a snapshot
    /// without side effects: a spin that looks through it arms no doorbell and
    /// writes no line the peer publishes on.
    fn ring_view(&self, reading: bool) -> RingView {
        // out[0] is A -> B: side A writes it and side B reads it.
        let a_to_b = (self.side() == crate::Side::A) != reading;
        RingView { streams: self.streams.ptr(), id: self.id().0, index: if a_to_b { 0 } else { 1 } }
    }

    fn poll_read_raw(&mut self, cx: &mut Context<'_>, dst: &mut [u8]) -> Poll<Result<usize>> {
        let ep = self.ptr;
        let ring = self.ring()?;
        match &*ring {
            Some(w) => {
                let ended = (sys::ORBIT_STREAM_FIN | sys::ORBIT_STREAM_RESET) as u32;
                let view = self.ring_view(true);
                let ready = || view.now().map_or(true, |r| r.queued > 0 || r.flags & ended != 0);
                let dir = &mut self.waits.read;
                // SAFETY (prep): a live endpoint; the SQE is the ring's.
                poll_ring_op(w, dir, cx, || crate::stream::try_read_raw(ep, dst), ready, |sqe| unsafe {
                    sys::orbit_endpoint_prep_wait_readable(ep, sqe)
                }, "orbit_endpoint_prep_wait_readable")
            }
            None => self.readiness()?.poll_op(cx, || crate::stream::try_read_raw(ep, dst)),
        }
    }

    fn poll_write_raw(&mut self, cx: &mut Context<'_>, src: &[u8]) -> Poll<Result<usize>> {
        let ep = self.ptr;
        let ring = self.ring()?;
        match &*ring {
            Some(w) => {
                // Room for this write, at most a quarter ring, as write_all waits: fewer, larger refills.
                let mut spec = sys::orbit_stream_spec::default();
                // SAFETY: a live table; spec writable.
                unsafe { sys::orbit_streams_spec(self.streams.ptr(), &mut spec) };
                let need = src.len().min((spec.buffer_bytes as usize / 4).max(1));
                let ended = (sys::ORBIT_STREAM_FIN | sys::ORBIT_STREAM_RESET | sys::ORBIT_STREAM_READER_GONE) as u32;
                let view = self.ring_view(false);
                let ready = || view.now().map_or(true, |r| r.queued < r.capacity || r.flags & ended != 0);
                let dir = &mut self.waits.write;
                // SAFETY (prep): a live endpoint; the SQE is the ring's.
                poll_ring_op(w, dir, cx, || crate::stream::try_write_raw(ep, src), ready, |sqe| unsafe {
                    sys::orbit_endpoint_prep_wait_writable_exact(ep, need, sqe)
                }, "orbit_endpoint_prep_wait_writable_exact")
            }
            None => self.readiness()?.poll_op(cx, || crate::stream::try_write_raw(ep, src)),
        }
    }
}

impl AsyncRead for Endpoint {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let dst = buf.initialize_unfilled();
        match this.poll_read_raw(cx, dst) {
            Poll::Ready(Ok(n)) => {
                buf.advance(n);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e.into())),
            Poll::Pending => {
                this.waits.parks += 1;
                Poll::Pending
            }
        }
    }
}

impl AsyncWrite for Endpoint {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = this.poll_write_raw(cx, buf).map_err(io::Error::from);
        if r.is_pending() {
            this.waits.parks += 1;
        }
        r
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    /// FIN.
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.get_mut().finish().map_err(io::Error::from))
    }
}

impl Streams {
    /// Waits for the next offer to this node, as a future.
    pub async fn wait_offer_async(&self) -> Result<Ticket> {
        let ptr = self.ptr();
        // SAFETY: a live table handle.
        let rd = self.handle.readiness.get("orbit_streams_readiness", || unsafe { sys::orbit_streams_readiness(ptr) })?;
        PollFn(|cx: &mut Context<'_>| {
            rd.poll_op(cx, || {
                let mut raw = sys::orbit_ticket::default();
                // SAFETY: a live table; raw writable.
                crate::error::check(unsafe { sys::orbit_streams_take_offer(ptr, &mut raw) }, "orbit_streams_take_offer")?;
                Ok(Ticket { raw })
            })
        })
        .await
    }
}

impl Pool {
    /// Reserves a unit of resource `id` (registered under `key`), waiting as a
    /// future while it is busy. Dropping the future leaves nothing reserved: a
    /// unit is taken only in the poll that returns it.
    pub async fn reserve_wait(&self, key: Key, id: Id) -> Result<Lease> {
        let ptr = self.ptr();
        // SAFETY: a live pool handle.
        let rd = self.readiness.get("orbit_pool_readiness", || unsafe { sys::orbit_pool_readiness(ptr) })?;
        PollFn(|cx: &mut Context<'_>| {
            rd.poll_op(cx, || {
                let since = self.version(key)?;
                match self.reserve(id) {
                    Err(e) if e.is(code::EBUSY) => {
                        // Watch from the version read before the try: a release in between rings at once.
                        // SAFETY: a live pool handle.
                        let rc = unsafe { sys::orbit_pool_watch_since(ptr, key.raw(), since) };
                        crate::error::check(rc, "orbit_pool_watch_since")?;
                        Err(Error::new(code::EAGAIN, "orbit_pool_reserve", String::new()))
                    }
                    r => r,
                }
            })
        })
        .await
    }
}

impl Exchange {
    /// The next event of the flow this side receives, as a future.
    pub async fn next_async(&self) -> Result<Event<'_>> {
        let exchanges = self.exchanges.ptr();
        // SAFETY: a live exchanges handle.
        let rd = self
            .exchanges
            .handle
            .readiness
            .get("orbit_exchanges_readiness", || unsafe { sys::orbit_exchanges_readiness(exchanges) })?;
        let ptr = self.ptr;
        let raw = PollFn(|cx: &mut Context<'_>| {
            rd.poll_op(cx, || {
                let mut raw = sys::orbit_exchange_event::default();
                // SAFETY: a live exchange; the chunk it holds goes to the Event below.
                crate::error::check(unsafe { sys::orbit_exchange_try_next(ptr, &mut raw) }, "orbit_exchange_try_next")?;
                Ok(raw)
            })
        })
        .await?;
        Ok(self.event(raw))
    }
}

// ---- io_uring: admission and death waits -----------------------------------

mod ring {
    //! A minimal io_uring (the kernel's ABI, no liburing): one FUTEX_WAIT SQE per
    //! wait, filled by the library's prep calls; tokio watches the ring's descriptor.
    use std::io;
    use std::os::raw::c_void;
    use std::ptr;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[repr(C)]
    #[derive(Default)]
    struct SqOffsets {
        head: u32,
        tail: u32,
        ring_mask: u32,
        ring_entries: u32,
        flags: u32,
        dropped: u32,
        array: u32,
        resv1: u32,
        user_addr: u64,
    }
    #[repr(C)]
    #[derive(Default)]
    struct CqOffsets {
        head: u32,
        tail: u32,
        ring_mask: u32,
        ring_entries: u32,
        overflow: u32,
        cqes: u32,
        flags: u32,
        resv1: u32,
        user_addr: u64,
    }
    #[repr(C)]
    #[derive(Default)]
    struct Params {
        sq_entries: u32,
        cq_entries: u32,
        flags: u32,
        sq_thread_cpu: u32,
        sq_thread_idle: u32,
        features: u32,
        wq_fd: u32,
        resv: [u32; 3],
        sq_off: SqOffsets,
        cq_off: CqOffsets,
    }
    /// The kernel's 64-byte SQE, for the fields this file writes itself.
    #[repr(C)]
    pub(super) struct Sqe {
        pub opcode: u8,
        pub flags: u8,
        pub ioprio: u16,
        pub fd: i32,
        pub off: u64,
        pub addr: u64,
        pub len: u32,
        pub op_flags: u32,
        pub user_data: u64,
        pub rest: [u64; 3],
    }
    #[repr(C)]
    struct Cqe {
        user_data: u64,
        res: i32,
        flags: u32,
    }
    const OFF_SQ_RING: i64 = 0;
    const OFF_CQ_RING: i64 = 0x800_0000;
    const OFF_SQES: i64 = 0x1000_0000;
    const FEAT_SINGLE_MMAP: u32 = 1;
    pub(super) const OP_ASYNC_CANCEL: u8 = 14;

    struct Map(*mut c_void, usize);
    impl Map {
        fn new(fd: i32, len: usize, off: i64) -> io::Result<Map> {
            // SAFETY: a fresh shared mapping of the ring's region.
            let p = unsafe {
                libc::mmap(ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED | libc::MAP_POPULATE, fd, off)
            };
            if p == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            // Not inherited by a fork child: a child can never touch the parent's ring.
            // SAFETY: our own mapping.
            unsafe { libc::madvise(p, len, libc::MADV_DONTFORK) };
            Ok(Map(p, len))
        }
        fn at<T>(&self, off: u32) -> *mut T {
            // SAFETY: offsets come from the kernel and lie inside the mapping.
            unsafe { (self.0 as *mut u8).add(off as usize) as *mut T }
        }
    }
    impl Drop for Map {
        fn drop(&mut self) {
            // SAFETY: unmapping our own mapping (nothing in a fork child: DONTFORK).
            unsafe { libc::munmap(self.0, self.1) };
        }
    }

    pub(super) struct Ring {
        pub fd: i32,
        sq: Map,
        cq: Option<Map>,
        sqes: Map,
        sq_tail: *const AtomicU32,
        sq_mask: u32,
        sq_array: *mut u32,
        cq_head: *const AtomicU32,
        cq_tail: *const AtomicU32,
        cq_mask: u32,
        cqes: *const Cqe,
        pid: u32,
    }

    // SAFETY: every use goes through the Mutex in Waits.
    unsafe impl Send for Ring {}

    impl Ring {
        pub fn new(entries: u32) -> io::Result<Ring> {
            let mut p = Params::default();
            // SAFETY: io_uring_setup with a zeroed params block.
            let fd = unsafe { libc::syscall(libc::SYS_io_uring_setup, entries, &mut p as *mut Params) } as i32;
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: our descriptor; closed by Drop from here on.
            unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
            let make = || -> io::Result<Ring> {
                let sq_len = p.sq_off.array as usize + p.sq_entries as usize * 4;
                let cq_len = p.cq_off.cqes as usize + p.cq_entries as usize * std::mem::size_of::<Cqe>();
                let single = p.features & FEAT_SINGLE_MMAP != 0;
                let sq = Map::new(fd, if single { sq_len.max(cq_len) } else { sq_len }, OFF_SQ_RING)?;
                let cq = if single { None } else { Some(Map::new(fd, cq_len, OFF_CQ_RING)?) };
                let sqes = Map::new(fd, p.sq_entries as usize * std::mem::size_of::<Sqe>(), OFF_SQES)?;
                let cqm = cq.as_ref().unwrap_or(&sq);
                // SAFETY: ring_mask words lie in the mappings.
                let (sq_mask, cq_mask) = unsafe { (*sq.at::<u32>(p.sq_off.ring_mask), *cqm.at::<u32>(p.cq_off.ring_mask)) };
                Ok(Ring {
                    fd,
                    sq_tail: sq.at(p.sq_off.tail),
                    sq_mask,
                    sq_array: sq.at(p.sq_off.array),
                    cq_head: cqm.at(p.cq_off.head),
                    cq_tail: cqm.at(p.cq_off.tail),
                    cq_mask,
                    cqes: cqm.at(p.cq_off.cqes),
                    sq,
                    cq,
                    sqes,
                    pid: std::process::id(),
                })
            };
            make().map_err(|e| {
                // SAFETY: our descriptor, not yet owned by a Ring.
                unsafe { libc::close(fd) };
                e
            })
        }

        /// This process made it (a fork child must not touch it).
        pub fn ours(&self) -> bool {
            self.pid == std::process::id()
        }

        /// The next SQE, zeroed; published only by `submit`.
        pub fn next_sqe(&mut self) -> *mut Sqe {
            // SAFETY: we are the only producer; tail is ours to read relaxed.
            let tail = unsafe { (*self.sq_tail).load(Ordering::Relaxed) };
            let sqe = self.sqes.at::<Sqe>(0);
            // SAFETY: index masked into the SQE array.
            let sqe = unsafe { sqe.add((tail & self.sq_mask) as usize) };
            // SAFETY: a whole SQE of ours (the kernel consumed it at the last enter).
            unsafe { ptr::write_bytes(sqe, 0, 1) };
            sqe
        }

        /// Publishes the SQE `next_sqe` gave and enters the kernel.
        pub fn submit(&mut self) -> io::Result<()> {
            // SAFETY: as in next_sqe.
            let tail = unsafe { (*self.sq_tail).load(Ordering::Relaxed) };
            let idx = tail & self.sq_mask;
            // SAFETY: the array slot for this index.
            unsafe { *self.sq_array.add(idx as usize) = idx };
            // Release: the kernel reads the SQE and array slot after it sees the tail.
            // SAFETY: the tail word of our ring.
            unsafe { (*self.sq_tail).store(tail.wrapping_add(1), Ordering::Release) };
            // Without SQPOLL the kernel consumes the SQE inside this call, so the SQ never fills.
            // SAFETY: io_uring_enter on our ring.
            let rc = unsafe { libc::syscall(libc::SYS_io_uring_enter, self.fd, 1u32, 0u32, 0u32, ptr::null::<c_void>(), 0usize) };
            if rc < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        }

        /// Every completion posted so far: (user_data, res).
        pub fn reap(&mut self, mut f: impl FnMut(u64, i32)) {
            // SAFETY: head is ours; tail is the kernel's (acquire: the CQEs before it are written).
            let head = unsafe { (*self.cq_head).load(Ordering::Relaxed) };
            let tail = unsafe { (*self.cq_tail).load(Ordering::Acquire) };
            let mut h = head;
            while h != tail {
                // SAFETY: a posted CQE, index masked into the array.
                let cqe = unsafe { &*self.cqes.add((h & self.cq_mask) as usize) };
                f(cqe.user_data, cqe.res);
                h = h.wrapping_add(1);
            }
            if h != head {
                // Release: the kernel may reuse the slots once it sees the head move.
                // SAFETY: the head word of our ring.
                unsafe { (*self.cq_head).store(h, Ordering::Release) };
            }
        }
    }

    impl Drop for Ring {
        fn drop(&mut self) {
            let _ = (&self.sq, &self.cq);
            // Closing the ring cancels what is still waiting in it (the maps go with the fields).
            // SAFETY: our descriptor (a fork child's copy only drops its reference).
            unsafe { libc::close(self.fd) };
        }
    }
}

struct WaitState {
    ring: ring::Ring,
    next: u64,
    /// Tokens whose FUTEX_WAIT is in the kernel.
    inflight: Vec<u64>,
    /// Tokens whose wait completed, not yet seen by their future.
    done: Vec<u64>,
}

/// A small io_uring per fleet handle for the waits with no readiness descriptor.
pub(crate) struct Waits {
    state: Mutex<WaitState>,
    fd: AsyncFd<Fd>,
    fanout: Arc<Fanout>,
    fanout_waker: Waker,
}

const CANCEL_TOKEN: u64 = 0;

impl Waits {
    fn new() -> Result<Option<Waits>> {
        // SAFETY: a pure probe.
        if !unsafe { sys::orbit_uring_futex_supported() } {
            return Ok(None);
        }
        let ring = match ring::Ring::new(32) {
            Ok(r) => r,
            // io_uring refused (seccomp, sysctl): the blocking fallback.
            Err(_) => return Ok(None),
        };
        let fanout = Arc::new(Fanout::default());
        Ok(Some(Waits {
            fd: watch(ring.fd, "io_uring_setup")?,
            state: Mutex::new(WaitState { ring, next: 1, inflight: Vec::new(), done: Vec::new() }),
            fanout_waker: Waker::from(fanout.clone()),
            fanout,
        }))
    }

    /// Moves completed waits to `done`; true when it moved any but `mine`.
    fn reap(st: &mut WaitState, mine: Option<u64>) -> bool {
        let WaitState { ring, inflight, done, .. } = st;
        let mut others = false;
        ring.reap(|token, _res| {
            // Any result ends the wait (a wake, -EAGAIN: the word moved, -ECANCELED): the caller re-checks.
            if let Some(i) = inflight.iter().position(|&t| t == token) {
                inflight.swap_remove(i);
                done.push(token);
                others |= Some(token) != mine;
            }
        });
        others
    }

    /// Fills and submits one wait with `prep`; Ok(None) when the thing is ready now.
    fn arm(&self, prep: &mut dyn FnMut(*mut sys::io_uring_sqe) -> c_int, call: &'static str) -> Result<Option<u64>> {
        let mut st = self.state.lock().unwrap();
        if !st.ring.ours() {
            return Err(Error::new(code::EFORKED, call, format!("{}: a ring of the parent process used in a forked child", call)));
        }
        let sqe = st.ring.next_sqe();
        let rc = prep(sqe.cast());
        if rc < 0 {
            return Err(Error::last(rc, call));
        }
        if rc == 1 {
            return Ok(None); // ready now; the NOP is never submitted
        }
        let token = st.next;
        st.next += 1;
        // SAFETY: the SQE the prep filled.
        unsafe { (*sqe).user_data = token };
        st.ring.submit().map_err(|e| io_err(e, "io_uring_enter"))?;
        st.inflight.push(token);
        Ok(Some(token))
    }

    /// Whether `token`'s wait completed; registers the task otherwise.
    fn poll_done(&self, cx: &mut Context<'_>, token: u64) -> Poll<Result<()>> {
        loop {
            // Registered before the look: a task that reaps our completion after it wakes us.
            self.fanout.register(cx.waker());
            let (mine, others) = {
                let mut st = self.state.lock().unwrap();
                let others = Waits::reap(&mut st, Some(token));
                let mine = st.done.iter().position(|&t| t == token).map(|i| st.done.swap_remove(i)).is_some();
                (mine, others)
            };
            if others {
                // Other waits completed: their tasks look again, and so does this one, whose
                // other futures (a join!, a select!) may own some of them and share its waker.
                self.fanout.wake_others(cx.waker());
                cx.waker().wake_by_ref();
            }
            if mine {
                return Poll::Ready(Ok(()));
            }
            let mut fcx = Context::from_waker(&self.fanout_waker);
            match self.fd.poll_read_ready(&mut fcx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(io_err(e, "io_uring"))),
                // A completion after this clear is a new tokio event; the look above reaps it.
                Poll::Ready(Ok(mut guard)) => guard.clear_ready(),
            }
        }
    }

    /// A dropped future: its FUTEX_WAIT is cancelled, nothing stays armed.
    fn cancel(&self, token: u64) {
        let mut st = self.state.lock().unwrap();
        if Waits::reap(&mut st, None) {
            self.fanout.wake_all();
        }
        if let Some(i) = st.done.iter().position(|&t| t == token) {
            st.done.swap_remove(i);
            return;
        }
        if !st.ring.ours() || !st.inflight.contains(&token) {
            return;
        }
        let sqe = st.ring.next_sqe();
        // SAFETY: a zeroed SQE of ours: ASYNC_CANCEL of the wait whose user_data is token.
        unsafe {
            (*sqe).opcode = ring::OP_ASYNC_CANCEL;
            (*sqe).fd = -1;
            (*sqe).addr = token;
            (*sqe).user_data = CANCEL_TOKEN;
        }
        if st.ring.submit().is_ok() {
            // Its completion (-ECANCELED) is reaped into `done` and dropped with the next cancel or reap.
            let i = st.inflight.iter().position(|&t| t == token).unwrap();
            st.inflight.swap_remove(i);
        }
    }

    #[cfg(test)]
    fn armed(&self) -> usize {
        self.state.lock().unwrap().inflight.len()
    }
}

/// One wait in a `Waits` ring; cancels itself when dropped unfinished.
struct Armed<'a> {
    waits: &'a Waits,
    token: Option<u64>,
}

impl Drop for Armed<'_> {
    fn drop(&mut self) {
        if let Some(t) = self.token.take() {
            self.waits.cancel(t);
        }
    }
}

/// Waits for one change through the ring: Ok(()) when `prep` found it ready or
/// its FUTEX_WAIT completed (the caller re-checks what it waits for).
async fn ring_wait(waits: &Waits, call: &'static str, mut prep: impl FnMut(*mut sys::io_uring_sqe) -> c_int) -> Result<()> {
    let mut armed = Armed { waits, token: waits.arm(&mut prep, call)? };
    let token = match armed.token {
        None => return Ok(()),
        Some(t) => t,
    };
    PollFn(|cx: &mut Context<'_>| waits.poll_done(cx, token)).await?;
    armed.token = None;
    Ok(())
}

/// Runs `slice(ms)` on tokio's blocking pool until it returns `Ok(true)`, in
/// slices of 100 ms so a dropped future stops its thread within one slice.
async fn blocking_slices(mut slice: impl FnMut(c_int) -> Result<bool> + Send + 'static) -> Result<()> {
    struct Stop(Arc<AtomicBool>);
    impl Drop for Stop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let stop = Stop(Arc::new(AtomicBool::new(false)));
    let flag = stop.0.clone();
    let task = tokio::task::spawn_blocking(move || loop {
        if flag.load(Ordering::SeqCst) {
            return Ok(());
        }
        match slice(100) {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(e) if e.is(code::ETIMEDOUT) => {}
            Err(e) => return Err(e),
        }
    });
    let r = task.await.map_err(|e| Error::new(libc::EIO, "spawn_blocking", format!("a blocking wait panicked: {}", e)))?;
    drop(stop);
    r
}

/// The fleet's async waits (created on first use).
#[derive(Default)]
pub(crate) struct FleetWaits {
    cell: Mutex<Option<Arc<Option<Waits>>>>,
}

impl FleetWaits {
    fn get(&self) -> Result<Arc<Option<Waits>>> {
        let mut cell = self.cell.lock().unwrap();
        if let Some(w) = cell.as_ref() {
            return Ok(w.clone());
        }
        let w = Arc::new(Waits::new()?);
        *cell = Some(w.clone());
        Ok(w)
    }
}

impl Fleet {
    /// Waits, as a future, until that incarnation of `node` is dead as the kernel
    /// reports it (as [`Fleet::wait_node_death`]). Dropping the future cancels
    /// the wait. It reports nothing: call [`reap`](Fleet::reap) next.
    pub async fn wait_node_death_async(&self, node: u16, incarnation: u64) -> Result<()> {
        let ptr = self.ptr();
        let waits = self.handle.waits.get()?;
        match &*waits {
            Some(w) => loop {
                // SAFETY: a live fleet; the SQE is the ring's.
                let r = ring_wait(w, "orbit_fleet_prep_wait_node_death", |sqe| unsafe {
                    sys::orbit_fleet_prep_wait_node_death(ptr, node, incarnation, sqe)
                })
                .await;
                match r {
                    Err(e) if e.is(code::ENOTSUP) => break,
                    Err(e) => return Err(e),
                    Ok(()) => {}
                }
                // Completed: dead, or the word moved for another reason. Look without waiting.
                match self.wait_node_death(node, incarnation, Some(Duration::ZERO)) {
                    Err(e) if e.is(code::ETIMEDOUT) => continue,
                    r => return r,
                }
            },
            None => {}
        }
        let fleet = self.clone();
        blocking_slices(move |ms| {
            // SAFETY: a live fleet (held by the closure).
            let rc = unsafe { sys::orbit_fleet_wait_node_death(fleet.ptr(), node, incarnation, ms) };
            crate::error::check(rc, "orbit_fleet_wait_node_death").map(|_| true)
        })
        .await
    }
}

impl Admission {
    /// Claims `demand`, waiting as a future through deferrals until it is
    /// claimed, skipped or rejected. A dropped future holds no claim and leaves
    /// no wait armed.
    pub async fn claim_wait(&self, demand: &Demand) -> Result<Admit<'_>> {
        let waits = self.handle.fleet.handle.waits.get()?;
        let ptr = self.ptr();
        loop {
            let since = match self.try_claim(demand)? {
                Admit::Deferred { release_epoch, .. } => release_epoch,
                other => return Ok(other),
            };
            match &*waits {
                Some(w) => {
                    // SAFETY: a live ledger; the SQE is the ring's.
                    let r = ring_wait(w, "orbit_admission_prep_wait", |sqe| unsafe { sys::orbit_admission_prep_wait(ptr, since, sqe) }).await;
                    match r {
                        Err(e) if e.is(code::ENOTSUP) => self.wait_blocking_pool(since).await?,
                        r => r?,
                    }
                }
                None => self.wait_blocking_pool(since).await?,
            }
        }
    }

    async fn wait_blocking_pool(&self, since: u64) -> Result<()> {
        let handle = self.handle.clone();
        blocking_slices(move |ms| {
            let mut now = 0;
            // SAFETY: a live ledger (the closure holds its handle).
            let rc = unsafe { sys::orbit_admission_wait(handle.ptr, since, ms, &mut now) };
            crate::error::check(rc, "orbit_admission_wait").map(|_| true)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FleetOptions, Streams};
    use tokio::io::AsyncReadExt;

    fn armed(fleet: &Fleet) -> usize {
        match &*fleet.handle.waits.get().unwrap() {
            Some(w) => w.armed(),
            None => 0,
        }
    }

    /// A dropped claim wait and a dropped endpoint leave no FUTEX_WAIT in the kernel.
    #[tokio::test]
    async fn dropped_waits_leave_nothing_armed() {
        // Without io_uring futex operations the fallback has no ring: nothing is ever armed there.
        // SAFETY: a pure probe.
        let one = usize::from(unsafe { sys::orbit_uring_futex_supported() });
        let fleet = Fleet::private(&FleetOptions::new().capacity(4)).unwrap();
        let adm = Admission::open(&fleet).unwrap();
        adm.set_capacity(1, 1).unwrap();
        let held = match adm.try_claim(&Demand::new().claim(1, 1)).unwrap() {
            Admit::Claimed(c) => c,
            other => panic!("{:?}", other),
        };
        let demand = Demand::new().claim(1, 1);
        let mut wait = Box::pin(adm.claim_wait(&demand));
        assert!(futures_poll(wait.as_mut()).is_pending());
        assert_eq!(armed(&fleet), one, "the deferred claim waits in the ring");
        drop(wait);
        assert_eq!(armed(&fleet), 0, "dropping the future cancelled its wait");
        drop(held);

        let streams = Streams::open(&fleet).unwrap();
        let (mut a, _ticket) = streams.create().unwrap();
        let mut buf = [0u8; 8];
        {
            let mut read = Box::pin(a.read(&mut buf));
            assert!(futures_poll(read.as_mut()).is_pending());
        }
        assert_eq!(armed(&fleet), one, "the endpoint's read wait stays for the next poll");
        drop(a);
        assert_eq!(armed(&fleet), 0, "closing the endpoint cancelled it");
    }

    fn futures_poll<F: Future + ?Sized>(f: Pin<&mut F>) -> Poll<F::Output> {
        struct Noop;
        impl Wake for Noop {
            fn wake(self: Arc<Self>) {}
        }
        let waker = Waker::from(Arc::new(Noop));
        f.poll(&mut Context::from_waker(&waker))
    }
}
