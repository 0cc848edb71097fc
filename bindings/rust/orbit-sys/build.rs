//! Links liborbit (and liborbit-reaper with the `reaper` feature) as pkg-config
//! finds them: set PKG_CONFIG_PATH for a library installed outside the default
//! search path. The installed library must be at least the release the
//! bindings were generated from.
use std::env;
use std::process::Command;

/// The liborbit release src/bindings.rs was generated from (its ORBIT_VERSION_*).
const BOUND_RELEASE: &str = "0.1.0";

fn pkg_config(args: &[&str]) -> Result<String, String> {
    let out = Command::new("pkg-config")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run pkg-config ({}): apt-get install pkg-config", e))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn link(module: &str) {
    let atleast = format!("--atleast-version={}", BOUND_RELEASE);
    if let Err(e) = pkg_config(&[&atleast, module]) {
        let found = pkg_config(&["--modversion", module]).unwrap_or_else(|_| "none".into());
        panic!(
            "orbit-sys: pkg-config module '{}' {} found, {} or later needed ({}); \
             install liborbit-dev or point PKG_CONFIG_PATH at an installed prefix",
            module, found, BOUND_RELEASE, e
        );
    }
    let libs = pkg_config(&["--libs", module]).unwrap_or_else(|e| panic!("orbit-sys: {}", e));
    for flag in libs.split_whitespace() {
        if let Some(dir) = flag.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={}", dir);
        } else if let Some(lib) = flag.strip_prefix("-l") {
            println!("cargo:rustc-link-lib={}", lib);
        }
    }
}

/// OUT_DIR/addresses.rs: an array of every binding's address, for tests/abi.rs
/// (taking them makes the linker resolve each one against the installed library).
fn write_addresses() {
    let text = std::fs::read_to_string("src/bindings.rs").expect("src/bindings.rs");
    let mut items = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        let name = |rest: &str| rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>();
        if let Some(rest) = line.strip_prefix("pub fn ") {
            items.push(format!("orbit_sys::{} as *const () as usize", name(rest)));
        } else if let Some(rest) = line.strip_prefix("pub static ") {
            items.push(format!("unsafe {{ std::ptr::addr_of!(orbit_sys::{}) as usize }}", name(rest)));
        }
    }
    let out = std::path::Path::new(&env::var("OUT_DIR").unwrap()).join("addresses.rs");
    std::fs::write(out, format!("[\n{}\n]\n", items.join(",\n"))).expect("write addresses.rs");
}

fn main() {
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-changed=src/bindings.rs");
    write_addresses();
    println!("cargo:rerun-if-changed=build.rs");
    link("orbit");
    if env::var_os("CARGO_FEATURE_REAPER").is_some() {
        link("orbit-reaper");
    }
    // For crates that build against the same installation (DEP_ORBIT_INCLUDE, DEP_ORBIT_LIBDIR).
    if let Ok(dir) = pkg_config(&["--variable=includedir", "orbit"]) {
        println!("cargo:include={}", dir);
    }
    if let Ok(dir) = pkg_config(&["--variable=libdir", "orbit"]) {
        println!("cargo:libdir={}", dir);
    }
}
