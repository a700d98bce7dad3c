// The kit exports _initialize, which the host runs once per instance,
// unless the toolchain already does: rustc links wasi-libc's
// crt1-reactor.o, which defines it, into cdylibs from some version on
// (rust-lang/rust#161421), and two definitions do not link. Rather than
// guess the version, compile an empty cdylib for the target and look.
use std::env;
use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    if rustc_minor(&rustc) >= 80 {
        println!("cargo:rustc-check-cfg=cfg(connhost_toolchain_initialize)");
    }
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if arch != "wasm32" || os != "wasi" {
        return;
    }
    let target = env::var("TARGET").unwrap_or_default();
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("connhost_probe.wasm");
    let child = Command::new(rustc)
        .args(["--crate-type", "cdylib", "--crate-name", "connhost_probe", "--target", &target, "-o"])
        .arg(&out)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(_) => return,
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(b"#[no_mangle] pub extern \"C\" fn connhost_probe() {}\n");
    }
    let ok = child.wait().map(|s| s.success()).unwrap_or(false);
    if !ok {
        return;
    }
    let wasm = fs::read(&out).unwrap_or_default();
    // An export entry: name length 11, "_initialize", kind 0 (function).
    let needle = b"\x0b_initialize\x00";
    if wasm.windows(needle.len()).any(|w| w == needle) {
        println!("cargo:rustc-cfg=connhost_toolchain_initialize");
    }
}

/// The minor version of rustc ("rustc 1.63.0 …" -> 63), 0 if unknown.
fn rustc_minor(rustc: &str) -> u32 {
    let out = match Command::new(rustc).arg("--version").output() {
        Ok(o) => o.stdout,
        Err(_) => return 0,
    };
    let text = String::from_utf8_lossy(&out);
    text.split_whitespace().nth(1).and_then(|v| v.split('.').nth(1)).and_then(|m| m.parse().ok()).unwrap_or(0)
}
