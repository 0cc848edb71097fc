//! Paired benchmark of the Rust stream paths (run by bindings/rust/bench.sh):
//! a one-way transfer in 64 KiB chunks through a 1 MiB ring, blocking
//! (std Read/Write: orbit_endpoint_write_all / orbit_endpoint_read) beside async
//! (tokio AsyncRead/AsyncWrite over the readiness descriptor), and optionally
//! beside the C path (`orbit-bench stream`, 64 KiB chunks, 1 MiB ring); and a
//! 64-byte ping-pong, blocking beside async. One writer (or echo) process, one
//! reader (or pinger) process. Prints medians and the [min-max] of the per-pair
//! ratios, the order alternating within pairs.
//!
//!   stream_bench [--bytes MiB] [--pairs N] [--rounds N] [--multi-thread] [--c-bench PATH]
use orbit::{Fleet, StreamSpec, Streams, Ticket};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CHUNK: usize = 64 * 1024;
const RING: u32 = 1 << 20;
const PING: usize = 64;

#[derive(Clone, Copy, PartialEq, Debug)]
enum Mode {
    Blocking,
    Async,
}

struct Opts {
    bytes: u64,
    pairs: usize,
    rounds: usize,
    multi_thread: bool,
    c_bench: Option<String>,
}

fn runtime(multi: bool) -> tokio::runtime::Runtime {
    if multi {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
    } else {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    }
}

fn spec() -> StreamSpec {
    StreamSpec::new().buffer_bytes(RING)
}

// ---- the child: writer or echo ---------------------------------------------------

fn child(role: &str) {
    let fleet = Fleet::join(&std::env::var("FLEET").unwrap()).unwrap();
    let streams = Streams::open_with(&fleet, &spec()).unwrap();
    let mode = if std::env::var("MODE").unwrap() == "async" { Mode::Async } else { Mode::Blocking };
    let multi = std::env::var("MULTI").is_ok();
    let bytes: u64 = std::env::var("BYTES").unwrap().parse().unwrap();
    let mut stdin = BufReader::new(std::io::stdin());
    let mut line = String::new();
    stdin.read_line(&mut line).unwrap();
    let ticket: Ticket = line.trim().parse().unwrap();
    let mut ep = streams.open_ticket(&ticket).unwrap();
    println!("ready");
    line.clear();
    stdin.read_line(&mut line).unwrap(); // go
    let rt = runtime(multi);
    match (role, mode) {
        ("writer", Mode::Blocking) => {
            let buf = vec![0x5au8; CHUNK];
            let mut sent = 0;
            while sent < bytes {
                Write::write_all(&mut ep, &buf).unwrap();
                sent += CHUNK as u64;
            }
            ep.finish().unwrap();
        }
        ("writer", Mode::Async) => {
            ep = rt.block_on(async move {
                let buf = vec![0x5au8; CHUNK];
                let mut sent = 0;
                while sent < bytes {
                    AsyncWriteExt::write_all(&mut ep, &buf).await.unwrap();
                    sent += CHUNK as u64;
                }
                AsyncWriteExt::shutdown(&mut ep).await.unwrap();
                ep
            });
        }
        ("echo", Mode::Blocking) => {
            let mut buf = [0u8; PING];
            while Read::read_exact(&mut ep, &mut buf).is_ok() {
                Write::write_all(&mut ep, &buf).unwrap();
            }
        }
        ("echo", Mode::Async) => {
            ep = rt.block_on(async move {
                let mut buf = [0u8; PING];
                while AsyncReadExt::read_exact(&mut ep, &mut buf).await.is_ok() {
                    AsyncWriteExt::write_all(&mut ep, &buf).await.unwrap();
                }
                ep
            });
        }
        _ => unreachable!(),
    }
    let st = streams.stats();
    println!("{} {} {}", st.parks, st.doorbells, ep.async_parks());
    line.clear();
    let _ = stdin.read_line(&mut line); // the parent has read everything
}

// ---- the parent --------------------------------------------------------------------

struct Peer {
    child: Child,
    out: BufReader<ChildStdout>,
}

impl Peer {
    fn start(role: &str, fleet: &str, mode: Mode, opts: &Opts, ticket: &Ticket) -> Peer {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.env("ORBIT_BENCH_CHILD", role)
            .env("FLEET", fleet)
            .env("MODE", if mode == Mode::Async { "async" } else { "blocking" })
            .env("BYTES", opts.bytes.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        if opts.multi_thread {
            cmd.env("MULTI", "1");
        }
        let mut child = cmd.spawn().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let mut p = Peer { child, out };
        p.say(&ticket.to_string());
        assert_eq!(p.line(), "ready");
        p
    }
    fn say(&mut self, s: &str) {
        writeln!(self.child.stdin.as_mut().unwrap(), "{}", s).unwrap();
    }
    fn line(&mut self) -> String {
        let mut l = String::new();
        self.out.read_line(&mut l).unwrap();
        l.trim().to_string()
    }
    fn finish(mut self) -> (u64, u64, u64) {
        let l = self.line();
        let v: Vec<u64> = l.split(' ').map(|x| x.parse().unwrap()).collect();
        self.say("bye");
        assert!(self.child.wait().unwrap().success());
        (v[0], v[1], v[2])
    }
}

struct Transfer {
    gbps: f64,
    parks: f64,
    doorbells: f64,
    task_parks: f64,
}

fn transfer(fleet: &str, streams: &Streams, rt: &tokio::runtime::Runtime, mode: Mode, opts: &Opts) -> Transfer {
    let (mut a, ticket) = streams.create().unwrap();
    let mut peer = Peer::start("writer", fleet, mode, opts, &ticket);
    let before = streams.stats();
    let mut buf = vec![0u8; CHUNK];
    let t0 = Instant::now();
    peer.say("go");
    let got = match mode {
        Mode::Blocking => {
            let mut got = 0u64;
            loop {
                let n = Read::read(&mut a, &mut buf).unwrap();
                if n == 0 {
                    break got;
                }
                got += n as u64;
            }
        }
        Mode::Async => rt.block_on(async {
            let mut got = 0u64;
            loop {
                let n = AsyncReadExt::read(&mut a, &mut buf).await.unwrap();
                if n == 0 {
                    break got;
                }
                got += n as u64;
            }
        }),
    };
    let secs = t0.elapsed().as_secs_f64();
    let after = streams.stats();
    let (w_parks, w_doorbells, w_task) = peer.finish();
    assert_eq!(got, opts.bytes);
    let ringfuls = got as f64 / f64::from(RING);
    Transfer {
        gbps: got as f64 / secs / 1e9,
        parks: (after.parks - before.parks + w_parks) as f64 / ringfuls,
        doorbells: (after.doorbells - before.doorbells + w_doorbells) as f64 / ringfuls,
        task_parks: (a.async_parks() + w_task) as f64 / ringfuls,
    }
}

fn pingpong(fleet: &str, streams: &Streams, rt: &tokio::runtime::Runtime, mode: Mode, opts: &Opts) -> f64 {
    let (mut a, ticket) = streams.create().unwrap();
    let mut peer = Peer::start("echo", fleet, mode, opts, &ticket);
    peer.say("go");
    let mut rtt = Vec::with_capacity(opts.rounds);
    let msg = [7u8; PING];
    let mut back = [0u8; PING];
    let warm = 500;
    match mode {
        Mode::Blocking => {
            for i in 0..warm + opts.rounds {
                let t = Instant::now();
                Write::write_all(&mut a, &msg).unwrap();
                Read::read_exact(&mut a, &mut back).unwrap();
                if i >= warm {
                    rtt.push(t.elapsed().as_nanos() as f64);
                }
            }
        }
        Mode::Async => rt.block_on(async {
            for i in 0..warm + opts.rounds {
                let t = Instant::now();
                AsyncWriteExt::write_all(&mut a, &msg).await.unwrap();
                AsyncReadExt::read_exact(&mut a, &mut back).await.unwrap();
                if i >= warm {
                    rtt.push(t.elapsed().as_nanos() as f64);
                }
            }
        }),
    }
    a.finish().unwrap();
    peer.finish();
    median(&mut rtt)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn spread(v: &[f64]) -> String {
    let mut s = v.to_vec();
    let m = median(&mut s);
    format!("{:.2} [{:.2}-{:.2}]", m, s[0], s[s.len() - 1])
}

/// orbit-bench stream's blocking figure for 64 KiB chunks through a 1 MiB ring (one pair).
fn c_path(bench: &str, opts: &Opts) -> Option<f64> {
    let out = Command::new(bench)
        .args(["stream", "--pairs", "1", "--mode", "blocking", "--rounds", "500", "--json"])
        .args(["--bytes", &(opts.bytes >> 20).to_string()])
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    // {"mode":"blocking","chunk":"65536","ring":1048576,"ok":true,"gbps":{"median":X
    let key = "\"chunk\":\"65536\",\"ring\":1048576,";
    let at = text.find(key)?;
    let rest = &text[at..];
    let g = rest.find("\"gbps\":{\"median\":")? + "\"gbps\":{\"median\":".len();
    rest[g..].split(|c| c == ',' || c == '}').next()?.parse().ok()
}

fn main() {
    if let Ok(role) = std::env::var("ORBIT_BENCH_CHILD") {
        child(&role);
        return;
    }
    let mut opts = Opts { bytes: 128 << 20, pairs: 9, rounds: 5000, multi_thread: false, c_bench: None };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let val = || args.get(i + 1).cloned().expect("a value");
        match args[i].as_str() {
            "--bytes" => opts.bytes = val().parse::<u64>().unwrap() << 20,
            "--pairs" => opts.pairs = val().parse().unwrap(),
            "--rounds" => opts.rounds = val().parse().unwrap(),
            "--c-bench" => opts.c_bench = Some(val()),
            "--multi-thread" => {
                opts.multi_thread = true;
                i -= 1;
            }
            other => panic!("unknown option {}", other),
        }
        i += 2;
    }
    let name = format!("b-rs-{}", std::process::id());
    let _ = Fleet::unlink(&name);
    let fleet = Fleet::join(&name).unwrap();
    let streams = Streams::open_with(&fleet, &spec()).unwrap();
    let rt = runtime(opts.multi_thread);
    let (mut ratio, mut parks_a, mut parks_b, mut task_a, mut bells_a) = (vec![], vec![], vec![], vec![], vec![]);
    let (mut gb_a, mut gb_b, mut rust_c, mut gb_c) = (vec![], vec![], vec![], vec![]);
    let (mut pp_a, mut pp_b) = (vec![], vec![]);
    for pair in 0..opts.pairs {
        let order = if pair % 2 == 0 { [Mode::Blocking, Mode::Async] } else { [Mode::Async, Mode::Blocking] };
        let mut r = [None, None];
        for &m in &order {
            r[m as usize] = Some(transfer(&name, &streams, &rt, m, &opts));
        }
        let (b, a) = (r[0].take().unwrap(), r[1].take().unwrap());
        ratio.push(a.gbps / b.gbps);
        gb_a.push(a.gbps);
        gb_b.push(b.gbps);
        parks_a.push(a.parks);
        parks_b.push(b.parks);
        task_a.push(a.task_parks);
        bells_a.push(a.doorbells);
        if let Some(bench) = &opts.c_bench {
            // Blocking Rust beside the C path, the order alternating.
            let (rb, c) = if pair % 2 == 0 {
                let rb = transfer(&name, &streams, &rt, Mode::Blocking, &opts).gbps;
                (rb, c_path(bench, &opts))
            } else {
                let c = c_path(bench, &opts);
                (transfer(&name, &streams, &rt, Mode::Blocking, &opts).gbps, c)
            };
            if let Some(c) = c {
                rust_c.push(rb / c);
                gb_c.push(c);
            }
        }
        let order = if pair % 2 == 0 { [Mode::Blocking, Mode::Async] } else { [Mode::Async, Mode::Blocking] };
        let mut p = [0.0; 2];
        for &m in &order {
            p[m as usize] = pingpong(&name, &streams, &rt, m, &opts);
        }
        pp_b.push(p[0] / 1000.0);
        pp_a.push(p[1] / 1000.0);
        eprintln!(
            "pair {}: async {:.2} GB/s ({:.2} parks, {:.2} task parks per ring-ful), blocking {:.2} GB/s ({:.2} parks), ping-pong p50 async {:.2} us, blocking {:.2} us",
            pair + 1,
            a.gbps,
            a.parks,
            a.task_parks,
            b.gbps,
            b.parks,
            p[1] / 1000.0,
            p[0] / 1000.0
        );
    }
    drop(streams);
    drop(fleet);
    let _ = Fleet::unlink(&name);
    let flavor = if opts.multi_thread { "multi-thread (2 workers)" } else { "current-thread" };
    println!(
        "stream, 64 KiB chunks, 1 MiB ring, {} MiB one way, {} pairs, tokio {} runtime per process",
        opts.bytes >> 20,
        opts.pairs,
        flavor
    );
    println!("  async GB/s           {}", spread(&gb_a));
    println!("  blocking GB/s        {}", spread(&gb_b));
    println!("  async / blocking     {}  (per-pair ratios: median [min-max])", spread(&ratio));
    println!("  parks per ring-ful (futex sleeps, orbit_streams_stats): async {}, blocking {}", spread(&parks_a), spread(&parks_b));
    println!("  async: task parks per ring-ful {}, doorbells rung per ring-ful {}", spread(&task_a), spread(&bells_a));
    if !rust_c.is_empty() {
        println!("  C path GB/s (orbit-bench stream, blocking) {}", spread(&gb_c));
        println!("  blocking Rust / C    {}  (per-pair ratios)", spread(&rust_c));
    }
    println!("64-byte ping-pong p50, {} round trips per pair", opts.rounds);
    println!("  async us             {}", spread(&pp_a));
    println!("  blocking us          {}", spread(&pp_b));
}
