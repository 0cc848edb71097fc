//! A lease and a stream in one fleet, two threads standing in for two processes:
//!   cargo run --example hello
use orbit::{Fleet, Key, Pool, Streams};
use std::io::{Read, Write};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let name = format!("ex-rs-hello-{}", std::process::id());
    let fleet = Fleet::join(&name)?;

    // The pool: an owner registers a resource; anyone reserves; the owner accepts.
    let pool = Pool::open(&fleet)?;
    let key = Key::new(0x6865_6c6c_6f, 0);
    let id = pool.register(key, 2)?;
    let lease = pool.reserve(id)?;
    let execution = pool.accept(&lease)?;
    println!("leased {} (fence {}), {} active", id, lease.fence(), pool.candidates(key)?[0].active);
    drop(execution); // completes: the unit is free again

    // A stream: side A here, side B on another thread (another process would open the ticket).
    let streams = Streams::open(&fleet)?;
    let (mut a, ticket) = streams.create()?;
    let s = streams.clone();
    let peer = std::thread::spawn(move || -> orbit::Result<String> {
        let mut b = s.open_ticket(&ticket)?;
        let mut text = String::new();
        b.read_to_string(&mut text).map_err(|e| e.into_inner().unwrap().downcast::<orbit::Error>().map(|e| *e).unwrap())?;
        Ok(text)
    });
    a.write_all(b"hello from side A")?;
    a.finish()?; // FIN: the reader drains, then reads 0
    println!("side B read \"{}\" through ticket {}", peer.join().unwrap()?, ticket);
    drop((a, streams, pool, fleet));
    Fleet::unlink(&name)?;
    Ok(())
}
