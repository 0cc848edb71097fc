//! Real processes: Rust children (this binary, re-run with ORBIT_RS_CHILD set),
//! a C program built against the installed library, the installed orbit-reaper,
//! and fork(2). Runs single-threaded (harness = false) so fork is safe.
mod common;
use common::Name;
use orbit::{code, Admission, Admit, Demand, Fleet, Id, Key, Lease, Pool, Streams, Ticket};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const T: Option<Duration> = Some(Duration::from_secs(20));

fn pattern(i: usize) -> u8 {
    (i * 131 + (i >> 8)) as u8
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("child: {} not set", name))
}

/// Starts this binary as a child in `role`, with `vars`, stdin and stdout piped.
fn spawn_child(role: &str, vars: &[(&str, String)]) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.env("ORBIT_RS_CHILD", role).stdin(Stdio::piped()).stdout(Stdio::piped());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.spawn().expect("spawn the child")
}

fn read_line(child: &mut Child) -> String {
    let mut line = String::new();
    let out = child.stdout.as_mut().unwrap();
    // One byte at a time: the rest of stdout stays for later reads.
    let mut b = [0u8; 1];
    while out.read(&mut b).unwrap() == 1 && b[0] != b'\n' {
        line.push(b[0] as char);
    }
    line
}

fn child_main(role: &str) -> i32 {
    let fleet = Fleet::join(&env("FLEET")).expect("child join");
    match role {
        // Reserves a unit of ID, prints the lease, waits for a line on stdin, exits.
        "reserve" => {
            let pool = Pool::open(&fleet).unwrap();
            let id: Id = env("ID").parse().unwrap();
            let lease = pool.reserve(id).unwrap();
            let hex: String = lease.to_bytes().iter().map(|b| format!("{:02x}", b)).collect();
            println!("{} {}", fleet.node(), hex);
            let _ = std::io::stdin().read_line(&mut String::new());
            0
        }
        // Holds a resource, a stream side and an admission claim, then waits to be killed.
        "hold" => {
            let pool = Pool::open(&fleet).unwrap();
            let streams = Streams::open(&fleet).unwrap();
            let adm = Admission::open(&fleet).unwrap();
            let _id = pool.register(Key::new(77, 0), 2).unwrap();
            let ticket: Ticket = env("TICKET").parse().unwrap();
            let _b = streams.open_ticket(&ticket).unwrap();
            let _claim = match adm.try_claim(&Demand::new().claim(1, 3)).unwrap() {
                Admit::Claimed(c) => c,
                other => panic!("{:?}", other),
            };
            println!("{} {}", fleet.node(), fleet.incarnation());
            std::thread::sleep(Duration::from_secs(60));
            1
        }
        other => panic!("unknown role {}", other),
    }
}

/// A lease taken in one Rust process is accepted in another.
fn lease_across_processes() {
    let name = Name::new("mp-lease");
    let fleet = Fleet::join(&name).unwrap();
    let pool = Pool::open(&fleet).unwrap();
    let key = Key::new(1, 2);
    let id = pool.register(key, 1).unwrap();
    let mut child = spawn_child("reserve", &[("FLEET", name.0.clone()), ("ID", id.to_string())]);
    let line = read_line(&mut child);
    let mut parts = line.split(' ');
    let child_node: u16 = parts.next().unwrap().parse().unwrap();
    let hex = parts.next().expect("a lease");
    let mut bytes = [0u8; Lease::BYTES];
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
    }
    let lease = Lease::from_bytes(&bytes);
    assert_eq!((lease.id(), lease.holder()), (id, child_node));
    assert_ne!(child_node, fleet.node());
    assert_eq!(pool.reserve(id).unwrap_err().code(), code::EBUSY, "the child's reservation holds the unit");
    let exec = pool.accept(&lease).expect("the owner accepts the child's lease");
    assert_eq!(pool.accept(&lease).unwrap_err().code(), code::ENOTRESERVED, "exactly once");
    assert_eq!(pool.candidates(key).unwrap()[0].active, 1);
    drop(exec);
    assert_eq!(pool.candidates(key).unwrap()[0].active, 0);
    child.stdin.as_mut().unwrap().write_all(b"done\n").unwrap();
    assert!(child.wait().unwrap().success());
}

/// Builds tests/c/stream_peer.c against the installed library (pkg-config).
fn build_c_peer() -> std::path::PathBuf {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/stream_peer.c");
    let out = std::env::temp_dir().join(format!("orbit-rs-stream-peer-{}", std::process::id()));
    let pc = |args: &[&str]| {
        let o = Command::new("pkg-config").args(args).output().expect("pkg-config");
        assert!(o.status.success(), "pkg-config {:?}: {}", args, String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    let cflags = pc(&["--cflags", "orbit"]);
    let libs = pc(&["--libs", "orbit"]);
    let libdir = pc(&["--variable=libdir", "orbit"]);
    let status = Command::new("cc")
        .args(["-std=gnu11", "-Wall", "-Wextra", "-Werror"])
        .args(cflags.split_whitespace())
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .args(libs.split_whitespace())
        .arg(format!("-Wl,-rpath,{}", libdir.trim()))
        .status()
        .expect("cc");
    assert!(status.success(), "cc {} failed", src.display());
    out
}

/// A stream between this Rust process (side A) and a C process (side B).
fn stream_rust_to_c() {
    let peer = build_c_peer();
    let name = Name::new("mp-c");
    let fleet = Fleet::join(&name).unwrap();
    let streams = Streams::open(&fleet).unwrap();
    let (mut a, ticket) = streams.create().unwrap();
    let mut child = Command::new(&peer).arg(&*name).arg(ticket.to_string()).spawn().unwrap();
    let body: Vec<u8> = (0..300_000).map(pattern).collect(); // past the 64 KiB ring: writes wait
    a.set_write_timeout(T);
    a.set_read_timeout(T);
    a.write_all(&body).unwrap();
    a.finish().unwrap();
    let mut answer = Vec::new();
    a.read_to_end(&mut answer).unwrap();
    let head_end = answer.iter().position(|&b| b == b'\n').unwrap();
    assert_eq!(&answer[..head_end], format!("got {} bytes", body.len()).as_bytes());
    assert!(answer[head_end + 1..] == body[..], "the C side's body, every byte");
    drop(a);
    assert!(child.wait().unwrap().success(), "the C peer exits 0");
    let _ = std::fs::remove_file(peer);
}

fn orbit_reaper_path() -> std::path::PathBuf {
    if let Ok(p) = std::env::var("ORBIT_REAPER") {
        return p.into();
    }
    let o = Command::new("pkg-config").args(["--variable=prefix", "orbit"]).output().unwrap();
    let bin = std::path::Path::new(String::from_utf8(o.stdout).unwrap().trim()).join("bin/orbit-reaper");
    assert!(bin.exists(), "{} missing: install orbit-tools or set ORBIT_REAPER", bin.display());
    bin
}

/// A fleet whose member is about to die: this process's tables, and side A of a
/// stream whose side B the member will hold.
struct Victim {
    name: Name,
    fleet: Fleet,
    pool: Pool,
    streams: Streams,
    adm: Admission,
    a: orbit::Endpoint,
    ticket: Ticket,
}

impl Victim {
    fn new(tag: &str) -> Victim {
        let name = Name::new(tag);
        let fleet = Fleet::join(&name).unwrap();
        let pool = Pool::open(&fleet).unwrap();
        let streams = Streams::open(&fleet).unwrap();
        let adm = Admission::open(&fleet).unwrap();
        adm.set_capacity(1, 10).unwrap();
        let (a, ticket) = streams.create().unwrap();
        Victim { name, fleet, pool, streams, adm, a, ticket }
    }
}

/// Starts a child that holds a resource, side B of a stream and a claim; returns it with its node.
fn start_holder(name: &Name, ticket: &Ticket) -> (Child, u16, u64) {
    let mut child = spawn_child("hold", &[("FLEET", name.0.clone()), ("TICKET", ticket.to_string())]);
    let line = read_line(&mut child);
    let mut p = line.split(' ');
    let node = p.next().unwrap().parse().expect("the holder's node");
    let incarnation = p.next().unwrap().parse().unwrap();
    (child, node, incarnation)
}

fn assert_reclaimed(pool: &Pool, a: &mut orbit::Endpoint, adm: &Admission) {
    assert!(pool.candidates(Key::new(77, 0)).unwrap().is_empty(), "the dead member's resource is gone");
    let err = a.try_write(b"x").unwrap_err();
    assert!(err.is(code::EPEERGONE) || err.is(code::ERESET), "the dead reader: {}", err);
    assert_eq!(adm.domains().unwrap()[0].used, 0, "the dead member's claim is released");
}

/// kill -9 of a Rust member; the C reaper (orbit-reaper, pidfd backend) reclaims it.
fn kill9_reaped_by_orbit_reaper() {
    let Victim { name, fleet: _fleet, pool, streams: _streams, adm, mut a, ticket } = Victim::new("mp-kill");
    let mut reaper = Command::new(orbit_reaper_path())
        .args(["--fleet", &name, "--backend", "pidfd", "--interval", "20"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = BufReader::new(reaper.stdout.take().unwrap());
    let (mut child, node, _) = start_holder(&name, &ticket);
    assert_eq!(pool.candidates(Key::new(77, 0)).unwrap().len(), 1);
    assert_eq!(adm.domains().unwrap()[0].used, 3);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // The reaper logs one JSON line per death.
    let deadline = Instant::now() + Duration::from_secs(20);
    let want = format!("\"node\":{}", node);
    loop {
        assert!(Instant::now() < deadline, "orbit-reaper reported no death of node {}", node);
        let mut line = String::new();
        assert!(log.read_line(&mut line).unwrap() > 0, "orbit-reaper ended early");
        if line.contains("\"death\"") && line.replace(' ', "").contains(&want) {
            break;
        }
    }
    assert_reclaimed(&pool, &mut a, &adm);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(reaper.id() as i32, libc::SIGTERM) };
    assert!(reaper.wait().unwrap().success(), "orbit-reaper stops cleanly");
}

/// kill -9 of a Rust member, seen by Fleet::wait_node_death_async (no reaper),
/// then reclaimed by the library's own sweep (orbit_fleet_reap).
#[cfg(feature = "tokio")]
fn kill9_seen_async_then_reaped() {
    let Victim { name, fleet, pool, streams: _streams, adm, mut a, ticket } = Victim::new("mp-death");
    let (mut child, node, incarnation) = start_holder(&name, &ticket);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        // Not dead yet: the wait is still pending after 50 ms, and dropping it is fine.
        let early = tokio::time::timeout(Duration::from_millis(50), fleet.wait_node_death_async(node, incarnation)).await;
        assert!(early.is_err(), "a live member is not dead");
        let t0 = Instant::now();
        let wait = fleet.wait_node_death_async(node, incarnation);
        let kill = async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            child.kill().unwrap();
        };
        let (r, ()) = tokio::join!(tokio::time::timeout(Duration::from_secs(20), wait), kill);
        r.expect("the death is seen").unwrap();
        eprintln!("    death seen {:?} after the kill was sent", t0.elapsed() - Duration::from_millis(20));
    });
    child.wait().unwrap();
    assert_eq!(fleet.reap().unwrap(), 1, "orbit_fleet_reap reports the one death");
    assert_reclaimed(&pool, &mut a, &adm);
}

/// The fork rule: a forked child's inherited handles are refused with EFORKED and
/// change nothing of the parent's; dropping them in the child is harmless.
fn fork_rule() {
    let name = Name::new("mp-fork");
    let fleet = Fleet::join(&name).unwrap();
    let pool = Pool::open(&fleet).unwrap();
    let streams = Streams::open(&fleet).unwrap();
    let key = Key::new(3, 3);
    let id = pool.register(key, 1).unwrap();
    let (mut a, ticket) = streams.create().unwrap();
    let mut b = streams.open_ticket(&ticket).unwrap();
    // SAFETY: this test binary is single-threaded here (harness = false).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        let checks = [
            pool.reserve(id).map(|_| ()),
            pool.register(key, 1).map(|_| ()),
            streams.create().map(|_| ()),
            a.try_write(b"child").map(|_| ()),
            fleet.reap().map(|_| ()),
        ];
        let all_forked = checks.iter().all(|r| matches!(r, Err(e) if e.is(code::EFORKED)));
        let sentence = checks[0].as_ref().err().map(|e| e.message()).unwrap_or_default();
        drop((a, b, pool, streams, fleet)); // frees the child's memory only
        if !all_forked {
            eprintln!("fork child: {:?}", checks);
        }
        if sentence.is_empty() {
            eprintln!("fork child: no sentence for EFORKED");
        }
        // SAFETY: leave without running the parent's atexit handlers or destructors again.
        unsafe { libc::_exit(if all_forked && !sentence.is_empty() { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: our child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "the child saw EFORKED everywhere");
    // Nothing of the parent's changed: the resource is free, the stream works.
    let lease = pool.reserve(id).expect("the parent's resource is untouched");
    drop(pool.accept(&lease).unwrap());
    a.write_all(b"parent").unwrap();
    let mut buf = [0u8; 6];
    b.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"parent");
    assert_eq!(fleet.nodes().unwrap().iter().filter(|n| n.alive).count(), 1);
}

fn main() {
    if let Ok(role) = std::env::var("ORBIT_RS_CHILD") {
        std::process::exit(child_main(&role));
    }
    let filter: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let mut tests: Vec<(&str, fn())> = vec![
        ("fork_rule", fork_rule), // first: no runtime thread exists yet
        ("lease_across_processes", lease_across_processes),
        ("stream_rust_to_c", stream_rust_to_c),
        ("kill9_reaped_by_orbit_reaper", kill9_reaped_by_orbit_reaper),
    ];
    #[cfg(feature = "tokio")]
    tests.push(("kill9_seen_async_then_reaped", kill9_seen_async_then_reaped));
    let (mut passed, mut failed) = (0, 0);
    for (name, f) in tests {
        if !filter.is_empty() && !filter.iter().any(|x| name.contains(x.as_str())) {
            continue;
        }
        let t0 = Instant::now();
        match std::panic::catch_unwind(f) {
            Ok(()) => {
                passed += 1;
                println!("test {} ... ok ({} ms)", name, t0.elapsed().as_millis());
            }
            Err(_) => {
                failed += 1;
                println!("test {} ... FAILED", name);
            }
        }
    }
    println!("{} passed, {} failed", passed, failed);
    std::process::exit(if failed == 0 { 0 } else { 1 });
}
