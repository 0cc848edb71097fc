//! One error type for every call: the `ORBIT_E*` code and the library's sentence.
use std::ffi::CStr;
use std::fmt;
use std::io;
use std::os::raw::c_int;

/// The `ORBIT_E*` codes (positive errno values, as [`Error::code`] returns them).
///
/// Some share a value (`EDRAINING` and `ECLOSED` are both `ESHUTDOWN`); the call
/// that failed says which one it meant.
pub mod code {
    use orbit_sys as sys;
    /// An id or ticket names an ended slot, generation or epoch.
    pub const ESTALE: i32 = sys::ORBIT_ESTALE;
    /// No capacity left on that resource.
    pub const EBUSY: i32 = sys::ORBIT_EBUSY;
    /// The resource is draining: no new leases.
    pub const EDRAINING: i32 = sys::ORBIT_EDRAINING;
    /// Only the owner may do this.
    pub const ENOTOWNER: i32 = sys::ORBIT_ENOTOWNER;
    /// The lease is not an unaccepted reservation.
    pub const ENOTRESERVED: i32 = sys::ORBIT_ENOTRESERVED;
    /// The creation budget is spent.
    pub const EBUDGET: i32 = sys::ORBIT_EBUDGET;
    /// Every key slot is taken.
    pub const EKEYFULL: i32 = sys::ORBIT_EKEYFULL;
    /// This node's lane is full.
    pub const EFULL: i32 = sys::ORBIT_EFULL;
    /// The payload arena has no run that large.
    pub const EPAYLOADFULL: i32 = sys::ORBIT_EPAYLOADFULL;
    /// A frame or chunk larger than the ring or arena lane.
    pub const ETOOLARGE: i32 = sys::ORBIT_ETOOLARGE;
    /// Not an id, ticket or spec; a bad argument.
    pub const EMALFORMED: i32 = sys::ORBIT_EMALFORMED;
    /// That side of the stream is already held.
    pub const ECLAIMED: i32 = sys::ORBIT_ECLAIMED;
    /// This write half was finished or reset.
    pub const ECLOSED: i32 = sys::ORBIT_ECLOSED;
    /// The peer reset the direction.
    pub const ERESET: i32 = sys::ORBIT_ERESET;
    /// The peer's reader is gone.
    pub const EPEERGONE: i32 = sys::ORBIT_EPEERGONE;
    /// The call would block.
    pub const EAGAIN: i32 = sys::ORBIT_EAGAIN;
    /// A timed call found nothing by its deadline.
    pub const ETIMEDOUT: i32 = sys::ORBIT_ETIMEDOUT;
    /// A segment exists with another geometry or version.
    pub const EGEOMETRY: i32 = sys::ORBIT_EGEOMETRY;
    /// A shared value failed a bounds check.
    pub const ECORRUPT: i32 = sys::ORBIT_ECORRUPT;
    /// The admission ledger is fail-closed.
    pub const EPOISONED: i32 = sys::ORBIT_EPOISONED;
    /// Admission is closed to new claims.
    pub const ECLOSEDADM: i32 = sys::ORBIT_ECLOSEDADM;
    /// The kernel or build lacks the feature.
    pub const ENOTSUP: i32 = sys::ORBIT_ENOTSUP;
    /// A handle of the parent process used in a forked child.
    pub const EFORKED: i32 = sys::ORBIT_EFORKED;
}

/// A failed orbit call: its `ORBIT_E*` code and the sentence `orbit_last_error()`
/// gave right after it (or `orbit_strerror`'s text when the library said no more).
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    code: i32,
    call: &'static str,
    sentence: String,
}

/// `Result<T, orbit::Error>`.
pub type Result<T> = std::result::Result<T, Error>;

fn strerror(code: i32) -> String {
    // SAFETY: orbit_strerror returns a static, NUL-terminated string, never NULL.
    unsafe { CStr::from_ptr(orbit_sys::orbit_strerror(code)) }.to_string_lossy().into_owned()
}

impl Error {
    /// The error of the orbit call `call` that just returned `rc` (negative) on
    /// this thread: reads `orbit_last_error()` before anything else can replace it.
    pub(crate) fn last(rc: c_int, call: &'static str) -> Error {
        // SAFETY: thread-local, valid until this thread's next orbit call; copied now.
        let sentence = unsafe { CStr::from_ptr(orbit_sys::orbit_last_error()) }.to_string_lossy().into_owned();
        Error { code: rc.checked_abs().unwrap_or(i32::MAX), call, sentence }
    }

    /// An error the binding itself detected (no C call failed).
    pub(crate) fn new(code: i32, call: &'static str, sentence: String) -> Error {
        Error { code, call, sentence }
    }

    /// The `ORBIT_E*` code (positive; compare with the constants of [`code`]).
    pub fn code(&self) -> i32 {
        self.code
    }

    /// Whether this is that `ORBIT_E*` code: `err.is(orbit::code::ESTALE)`.
    pub fn is(&self, code: i32) -> bool {
        self.code == code
    }

    /// The C call that failed (`"orbit_pool_reserve"`).
    pub fn call(&self) -> &'static str {
        self.call
    }

    /// One sentence naming the call and what was wrong, as `orbit_last_error()`
    /// gave it; `orbit_strerror`'s text when the library said no more.
    pub fn message(&self) -> String {
        if self.sentence.is_empty() {
            format!("{}: {}", self.call, strerror(self.code))
        } else {
            self.sentence.clone()
        }
    }

    /// The `std::io::ErrorKind` nearest to the code (for `Read`/`Write` users).
    pub fn io_kind(&self) -> io::ErrorKind {
        match self.code {
            code::EAGAIN => io::ErrorKind::WouldBlock,
            code::ETIMEDOUT => io::ErrorKind::TimedOut,
            code::ERESET => io::ErrorKind::ConnectionReset,
            code::EPEERGONE | code::ECLOSED => io::ErrorKind::BrokenPipe,
            code::EMALFORMED => io::ErrorKind::InvalidInput,
            code::ENOTOWNER => io::ErrorKind::PermissionDenied,
            code::ESTALE | code::ENOTRESERVED => io::ErrorKind::NotFound,
            code::ETOOLARGE | code::ECORRUPT => io::ErrorKind::InvalidData,
            code::ENOTSUP => io::ErrorKind::Unsupported,
            _ => io::ErrorKind::Other,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message(), strerror(self.code))
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("code", &self.code)
            .field("call", &self.call)
            .field("message", &self.message())
            .finish()
    }
}

impl std::error::Error for Error {}

impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        io::Error::new(e.io_kind(), e)
    }
}

/// 0 or a count, or the error of `call`.
#[inline]
pub(crate) fn check(rc: c_int, call: &'static str) -> Result<c_int> {
    if rc < 0 {
        Err(Error::last(rc, call))
    } else {
        Ok(rc)
    }
}

/// As [`check`], for calls returning `ssize_t`.
#[inline]
pub(crate) fn check_size(rc: isize, call: &'static str) -> Result<usize> {
    if rc < 0 {
        Err(Error::last(rc as c_int, call))
    } else {
        Ok(rc as usize)
    }
}

/// A `timeout_ms` from an optional duration: `None` waits forever (-1), a
/// fraction of a millisecond rounds up (so a short timeout still waits).
pub(crate) fn timeout_ms(timeout: Option<std::time::Duration>) -> c_int {
    match timeout {
        None => -1,
        Some(d) => {
            let ms = d.as_millis() + u128::from(d.subsec_nanos() % 1_000_000 != 0);
            if ms > i32::MAX as u128 {
                i32::MAX
            } else {
                ms as c_int
            }
        }
    }
}

/// Every record of a counting call (`n = call(buf, max)` returns how many exist,
/// which may exceed `max`): grows the buffer until they all fit.
pub(crate) fn collect<T>(call: &'static str, mut fill: impl FnMut(*mut T, usize) -> isize) -> Result<Vec<T>> {
    let mut cap = 16;
    loop {
        let mut v: Vec<T> = Vec::with_capacity(cap);
        let n = check_size(fill(v.as_mut_ptr(), cap), call)?;
        if n <= cap {
            // SAFETY: the call wrote n records, n <= capacity.
            unsafe { v.set_len(n) };
            return Ok(v);
        }
        cap = n;
    }
}
