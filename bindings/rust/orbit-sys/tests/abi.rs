//! The installed ABI against these bindings:
//! * every function and extern object the installed headers declare
//!   (universal-ctags, as tests/abi/check-abi.sh reads them) is declared in
//!   src/bindings.rs, and nothing else is; every `static inline` helper has its
//!   Rust form in src/lib.rs;
//! * every exported symbol of the libraries pkg-config finds is bound, and
//!   every binding resolves (the addresses below are taken, so this test does
//!   not link if one is missing);
//! * src/bindings.rs is what regenerate.sh makes from the installed headers now.
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{:?}: {}", cmd, e));
    assert!(out.status.success(), "{:?}: {}", cmd, String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn pkg(var: &str, module: &str) -> PathBuf {
    run(Command::new("pkg-config").arg(format!("--variable={}", var)).arg(module)).trim().into()
}

fn headers() -> Vec<PathBuf> {
    let dir = pkg("includedir", "orbit").join("orbit");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {}", dir.display(), e))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().map_or(false, |x| x == "h"))
        .collect();
    v.sort();
    assert!(v.len() >= 10, "the installed headers in {}", dir.display());
    v
}

/// ctags-universal names of `kinds` (p: prototypes, x: extern objects, f: definitions).
fn ctags(kinds: &str) -> BTreeSet<String> {
    let out = run(Command::new("ctags-universal")
        .args(["-x", &format!("--c-kinds={}", kinds), "--language-force=C"])
        .args(headers()));
    out.lines().filter_map(|l| l.split_whitespace().next()).map(String::from).collect()
}

fn bound() -> BTreeSet<String> {
    let text = include_str!("../src/bindings.rs");
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let line = line.trim();
        for prefix in ["pub fn ", "pub static "] {
            if let Some(rest) = line.strip_prefix(prefix) {
                let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                names.insert(name);
            }
        }
    }
    names
}

fn exported(lib: &str) -> BTreeSet<String> {
    let path = pkg("libdir", "orbit").join(lib);
    let out = run(Command::new("nm").args(["-D", "--defined-only"]).arg(&path));
    out.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            match f.as_slice() {
                [_, kind, name] if *kind != "A" => Some(name.split('@').next().unwrap().to_string()),
                _ => None,
            }
        })
        .collect()
}

#[test]
fn every_declared_call_is_bound() {
    let declared = ctags("px");
    let bound = bound();
    let missing: Vec<_> = declared.difference(&bound).collect();
    let extra: Vec<_> = bound.difference(&declared).collect();
    assert!(
        missing.is_empty(),
        "declared in the installed headers but not in orbit-sys (run orbit-sys/regenerate.sh): {:?}",
        missing
    );
    assert!(extra.is_empty(), "bound but declared in no installed header: {:?}", extra);
    assert!(declared.len() > 200, "{} declarations: the headers were read", declared.len());
}

#[test]
fn every_inline_helper_has_a_rust_form() {
    let lib = include_str!("../src/lib.rs");
    let inline = ctags("f");
    assert!(!inline.is_empty());
    for name in &inline {
        assert!(lib.contains(&format!("pub const fn {}(", name)), "static inline {} has no Rust form in src/lib.rs", name);
    }
    use orbit_sys::*;
    let id = orbit_id_make(247, 513, 0x12_3456, 0xbeef);
    assert_eq!((orbit_id_kind(id), orbit_id_node(id), orbit_id_generation(id), orbit_id_slot(id)), (247, 513, 0x12_3456, 0xbeef));
    assert_eq!(orbit_id_counter(id), (0x12_3456 << 16) | 0xbeef);
    // The C formatter agrees with the Rust field helpers.
    let mut buf = [0 as std::os::raw::c_char; ORBIT_ID_TEXT_MAX as usize];
    // SAFETY: buf writable for its length.
    let n = unsafe { orbit_id_format(id, buf.as_mut_ptr(), buf.len()) };
    assert!(n > 0);
    // SAFETY: NUL-terminated by the call.
    let text = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap().to_string();
    assert_eq!(text, format!("247:513:{}", orbit_id_counter(id)));
}

#[test]
#[allow(unused_unsafe)] // addr_of! on an extern static needs unsafe before Rust 1.82
fn every_export_is_bound_and_resolves() {
    let bound = bound();
    let mut exports = exported("liborbit.so");
    exports.extend(exported("liborbit-reaper.so"));
    let unbound: Vec<_> = exports.difference(&bound).collect();
    assert!(unbound.is_empty(), "exported by the installed libraries but not bound: {:?}", unbound);
    // Taking every binding's address makes the linker resolve each one.
    let addrs = include!(concat!(env!("OUT_DIR"), "/addresses.rs"));
    assert_eq!(addrs.len(), bound.len(), "an address per binding");
    assert!(addrs.iter().all(|&a| a != 0));
}

#[test]
fn bindings_are_what_regenerate_makes() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::env::temp_dir().join(format!("orbit-sys-bindings-{}.rs", std::process::id()));
    let status = Command::new(here.join("regenerate.sh")).arg(&out).status().expect("run regenerate.sh");
    assert!(status.success(), "regenerate.sh failed (bindgen installed? apt-get install bindgen)");
    let fresh = std::fs::read_to_string(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    let checked_in = include_str!("../src/bindings.rs");
    if fresh != checked_in {
        let first = fresh.lines().zip(checked_in.lines()).position(|(a, b)| a != b);
        panic!(
            "src/bindings.rs differs from the installed headers (first differing line {:?}): \
             run orbit-sys/regenerate.sh and commit the result",
            first.map(|i| i + 1)
        );
    }
}
