//! One process: each table through the safe API, errors, ids and tickets.
mod common;
use common::Name;
use orbit::{code, Admission, Admit, Demand, Event, Exchanges, Fleet, FleetOptions, Id, Key, Pool, Streams, Ticket};
use std::io::{Read, Write};
use std::time::Duration;

const T: Option<Duration> = Some(Duration::from_secs(10));

#[test]
fn error_carries_code_and_sentence() {
    let err = Fleet::join("no spaces allowed").unwrap_err();
    assert_eq!(err.code(), code::EMALFORMED);
    assert_eq!(err.call(), "orbit_fleet_join");
    assert!(err.message().contains("orbit_fleet_join"), "{}", err.message());
    assert!(err.to_string().contains("'no spaces allowed'"), "{}", err);
    let io: std::io::Error = err.into();
    assert_eq!(io.kind(), std::io::ErrorKind::InvalidInput);
    let err = Fleet::join("nul\0byte").unwrap_err();
    assert_eq!(err.code(), code::EMALFORMED);
}

#[test]
fn ids_match_the_library() {
    // The Rust inline helpers agree with the C formatter on every field.
    for &(kind, node, gen, slot) in &[(247u8, 3u16, 1u32, 0u32), (255, 65535, 0xff_ffff, 0xffff), (1, 0, 7, 9)] {
        let id = Id(orbit_sys::orbit_id_make(kind, node, gen, slot));
        assert_eq!((id.kind(), id.node(), id.generation(), id.slot()), (kind, node, gen, slot));
        let counter = (u64::from(gen) << 16) | u64::from(slot);
        assert_eq!(id.to_string(), format!("{}:{}:{}", kind, node, counter));
        assert_eq!(id.to_string().parse::<Id>().unwrap(), id);
    }
    assert_eq!("1:2:x".parse::<Id>().unwrap_err().code(), code::EMALFORMED);
}

#[test]
fn pool_lease_accept_complete() {
    let name = Name::new("pool");
    let fleet = Fleet::join(&name).unwrap();
    let pool = Pool::open(&fleet).unwrap();
    let key = Key::new(42, 7);
    let id = pool.register(key, 1).unwrap();
    let lease = pool.reserve(id).unwrap();
    assert_eq!(pool.reserve(id).unwrap_err().code(), code::EBUSY, "capacity 1 holds one lease");
    assert_eq!(Lease::from_bytes(&lease.to_bytes()), lease);
    let exec = pool.accept(&lease).unwrap();
    assert_eq!(pool.accept(&lease).unwrap_err().code(), code::ENOTRESERVED, "accepted once");
    let c = pool.candidates(key).unwrap();
    assert_eq!((c.len(), c[0].active, c[0].capacity), (1, 1, 1));
    drop(exec); // completes
    let lease2 = pool.reserve(id).expect("the unit came back when the execution dropped");
    assert!(lease2.fence() > lease.fence());
    let since = pool.version(key).unwrap();
    assert_eq!(pool.wait_capacity(key, since, Some(Duration::ZERO)).unwrap_err().code(), code::ETIMEDOUT);

    let permit = pool.claim_create(Key::new(9, 9), 1).unwrap();
    assert_eq!(pool.claim_create(Key::new(9, 9), 1).unwrap_err().code(), code::EBUDGET);
    assert_eq!(pool.budget(Key::new(9, 9)), (0, 1));
    permit.finish();
    assert_eq!(pool.budget(Key::new(9, 9)), (0, 0));
    pool.unregister(id).unwrap();
    assert_eq!(pool.reserve(id).unwrap_err().code(), code::ESTALE);
}
use orbit::Lease;

#[test]
fn stream_read_write_fin() {
    let name = Name::new("stream");
    let fleet = Fleet::join(&name).unwrap();
    let streams = Streams::open(&fleet).unwrap();
    let (mut a, ticket) = streams.create().unwrap();
    let text = ticket.to_string();
    assert_eq!(text.parse::<Ticket>().unwrap(), ticket);
    streams.offer(&ticket, fleet.node()).unwrap();
    let offered = streams.wait_offer(T).unwrap();
    assert_eq!(offered, ticket);
    let mut b = streams.open_ticket(&offered).unwrap();
    assert_eq!(streams.open_ticket(&ticket).unwrap_err().code(), code::ECLAIMED);
    assert_eq!(b.peer().unwrap().0, fleet.node());

    // More than a ring's worth, from another thread, so writes wait for room.
    let body: Vec<u8> = (0..300_000u32).map(|i| (i * 131 + (i >> 8)) as u8).collect();
    let sent = body.clone();
    let writer = std::thread::spawn(move || {
        a.write_all(&sent).unwrap();
        a.finish().unwrap();
        a
    });
    let mut got = Vec::new();
    b.read_to_end(&mut got).unwrap();
    assert!(got == body, "every byte in order");
    let mut a = writer.join().unwrap();
    assert_eq!(a.try_read(&mut [0u8; 8]).unwrap_err().code(), code::EAGAIN);
    b.write_all(b"bye").unwrap();
    drop(b); // unfinished writer: close resets... after the bytes? No: close of a writer that did not finish resets
    let mut buf = [0u8; 8];
    let err = a.read(&mut buf).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset);
    let orbit_err = err.get_ref().unwrap().downcast_ref::<orbit::Error>().unwrap();
    assert_eq!(orbit_err.code(), code::ERESET);
    assert!(streams.stats().bytes_written >= body.len() as u64);
}

#[test]
fn stream_split_halves_on_two_threads() {
    let name = Name::new("split");
    let fleet = Fleet::join(&name).unwrap();
    let streams = Streams::open(&fleet).unwrap();
    let (mut a, ticket) = streams.create().unwrap();
    let mut b = streams.open_ticket(&ticket).unwrap();
    let echo = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        loop {
            let n = b.read(&mut buf).unwrap();
            if n == 0 {
                b.finish().unwrap();
                return;
            }
            b.write_all(&buf[..n]).unwrap();
        }
    });
    let (mut r, mut w) = a.split();
    std::thread::scope(|s| {
        s.spawn(move || {
            for i in 0..1000u32 {
                w.write_all(&i.to_le_bytes()).unwrap();
            }
            w.finish().unwrap();
        });
        let mut got = Vec::new();
        r.read_to_end(&mut got).unwrap();
        assert_eq!(got.len(), 4000);
        assert!(got.chunks(4).enumerate().all(|(i, c)| c == (i as u32).to_le_bytes()));
    });
    echo.join().unwrap();
}

#[test]
fn exchange_zero_copy() {
    let name = Name::new("exchange");
    let fleet = Fleet::join(&name).unwrap();
    let ex = Exchanges::open(&fleet).unwrap();
    let (a, ticket) = ex.create().unwrap();
    let b = ex.open_ticket(&ticket).unwrap();
    a.send_start(b"GET /", T).unwrap();
    let mut res = a.reserve(10_000, T).unwrap();
    assert!(res.len() >= 10_000);
    res[..5].copy_from_slice(b"hello");
    a.data(&mut res, 5, T).unwrap();
    assert!(res.is_done());
    drop(res);
    a.send_data(b" world", T).unwrap();
    a.finish(T).unwrap();
    match b.next(T).unwrap() {
        Event::Start(Some(meta)) => assert_eq!(&meta[..], b"GET /"),
        other => panic!("{:?}", other),
    }
    // Two chunks held at once, read in place.
    let first = match b.next(T).unwrap() {
        Event::Data(c) => c,
        other => panic!("{:?}", other),
    };
    let second = match b.next(T).unwrap() {
        Event::Data(c) => c,
        other => panic!("{:?}", other),
    };
    assert_eq!([&first[..], &second[..]].concat(), b"hello world");
    assert_eq!((first.id(), second.id()), (2, 3));
    drop(first);
    drop(second);
    assert!(matches!(b.next(T).unwrap(), Event::Fin));
    assert_eq!(b.next(T).unwrap_err().code(), code::ECLOSED);
    assert_eq!(ex.stats().chunks_received, 3);
}

#[test]
fn admission_claims_are_guards() {
    let name = Name::new("adm");
    let fleet = Fleet::join(&name).unwrap();
    let adm = Admission::open(&fleet).unwrap();
    adm.set_capacity(1, 10).unwrap();
    adm.set_capacity(2, 1).unwrap();
    let demand = Demand::new().claim(1, 6).claim(2, 1);
    let claim = match adm.try_claim(&demand).unwrap() {
        Admit::Claimed(c) => c,
        other => panic!("{:?}", other),
    };
    let epoch = match adm.try_claim(&demand).unwrap() {
        Admit::Deferred { release_epoch, blocker_domain, .. } => {
            assert_eq!(blocker_domain, 1);
            release_epoch
        }
        other => panic!("{:?}", other),
    };
    assert!(matches!(adm.try_claim(&Demand::new().claim(1, 11)).unwrap(), Admit::Rejected { blocker_domain: 1, .. }));
    assert_eq!(adm.wait(epoch, Some(Duration::ZERO)).unwrap_err().code(), code::ETIMEDOUT);
    let waiter = std::thread::scope(|s| {
        let h = s.spawn(|| adm.wait(epoch, T));
        std::thread::sleep(Duration::from_millis(20));
        drop(claim); // releases: the waiter wakes
        h.join().unwrap()
    });
    assert!(waiter.unwrap() > epoch);
    assert_eq!(adm.domains().unwrap().iter().map(|d| d.used).sum::<u64>(), 0);
    let record = match adm.claim_blocking(&demand, T).unwrap() {
        Admit::Claimed(c) => c.into_record(),
        other => panic!("{:?}", other),
    };
    let mut copy = record;
    adm.release_record(&mut copy).unwrap();
    let mut again = record;
    assert_eq!(adm.release_record(&mut again).unwrap_err().code(), code::ENOTRESERVED);
}

#[test]
fn private_fleet_and_options() {
    let fleet = Fleet::private(&FleetOptions::new().capacity(4)).unwrap();
    assert_eq!(fleet.capacity(), 4);
    assert_eq!(fleet.backing(), orbit::Backing::Private);
    assert_eq!(fleet.name(), "");
    let err = Fleet::private(&FleetOptions::new().capacity(4).node(9)).unwrap_err();
    assert_eq!(err.code(), code::EMALFORMED);
    assert!(!orbit::library_version().is_empty());
}

#[test]
fn exact_frames_are_all_or_nothing() {
    let name = Name::new("frames");
    let fleet = Fleet::join(&name).unwrap();
    let streams = Streams::open_with(&fleet, &orbit::StreamSpec::new().buffer_bytes(4096)).unwrap();
    let (mut a, ticket) = streams.create().unwrap();
    let mut b = streams.open_ticket(&ticket).unwrap();
    a.write_frame(&[1u8; 3000], T).unwrap();
    assert_eq!(a.try_write_frame(&[2u8; 3000]).unwrap_err().code(), code::EAGAIN, "no room for the whole frame");
    assert_eq!(a.write_frame(&[0u8; 5000], T).unwrap_err().code(), code::ETOOLARGE);
    let mut frame = [0u8; 3001];
    assert_eq!(b.try_read_frame(&mut frame).unwrap_err().code(), code::EAGAIN, "3000 queued, 3001 asked: nothing read");
    b.read_frame(&mut frame[..3000], T).unwrap();
    assert!(frame[..3000].iter().all(|&x| x == 1));
    a.try_write_frame(&[2u8; 3000]).unwrap();
    a.finish().unwrap();
    assert_eq!(b.read_frame(&mut frame, T).unwrap_err().code(), code::EMALFORMED, "FIN before the frame completed");
    let before = orbit::spin_ns();
    orbit::set_spin_ns(0);
    assert_eq!(orbit::spin_ns(), 0);
    orbit::set_spin_ns(before);
}

#[test]
fn session_carries_a_lease_to_its_owner() {
    let name = Name::new("session");
    let fleet = Fleet::join(&name).unwrap();
    let pool = Pool::open(&fleet).unwrap();
    let ex = Exchanges::open(&fleet).unwrap();
    let key = Key::new(8, 8);
    let id = pool.register(key, 1).unwrap();
    let lease = pool.reserve(id).unwrap();
    let a = ex.open_session(&lease, b"GET /", T).unwrap();
    a.send_data(b"body", T).unwrap();
    a.finish(T).unwrap();
    {
        let session = ex.wait_session(&pool, T).unwrap();
        assert_eq!(session.metadata(), b"GET /");
        assert_eq!(session.lease(), lease);
        assert_eq!(pool.candidates(key).unwrap()[0].active, 1, "accepted once the session opened");
        match session.exchange().next(T).unwrap() {
            Event::Data(c) => assert_eq!(&c[..], b"body"),
            other => panic!("{:?}", other),
        }
        session.exchange().send_start(b"", T).unwrap();
        session.exchange().send_data(b"200", T).unwrap();
        session.exchange().finish(T).unwrap();
    } // session ends: the execution completes
    assert_eq!(pool.candidates(key).unwrap()[0].active, 0);
    assert!(matches!(a.next(T).unwrap(), Event::Start(None)));
    match a.next(T).unwrap() {
        Event::Data(c) => assert_eq!(&c[..], b"200"),
        other => panic!("{:?}", other),
    }
    assert_eq!(pool.accept(&lease).unwrap_err().code(), code::ENOTRESERVED, "the session accepted it");
}
