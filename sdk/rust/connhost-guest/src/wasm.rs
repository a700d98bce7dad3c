//! The ABI's exports and the host's imports (docs/abi.md), for wasm
//! builds.

use crate::{dispatch, Export, Host, HttpError, HttpRequest, HttpResponse, Operation, ABI_VERSION};
use std::cell::UnsafeCell;

/// A global buffer. The module runs one call at a time on one thread, and
/// the host touches guest memory only between or inside exports, as
/// docs/abi.md says.
struct Buf(UnsafeCell<Vec<u8>>);

// SAFETY: wasm32 without threads: there is exactly one thread.
unsafe impl Sync for Buf {}

impl Buf {
    #[allow(clippy::mut_from_ref)]
    fn get(&self) -> &mut Vec<u8> {
        // SAFETY: one thread, and no export holds a reference across
        // another export.
        unsafe { &mut *self.0.get() }
    }
}

/// The input buffer connhost_alloc hands out; valid until the next
/// connhost_alloc.
static INBUF: Buf = Buf(UnsafeCell::new(Vec::new()));
/// The last outcome or description; valid until the next call.
static OUTBUF: Buf = Buf(UnsafeCell::new(Vec::new()));

#[cfg(not(connhost_toolchain_initialize))]
#[no_mangle]
pub extern "C" fn _initialize() {}

#[no_mangle]
pub extern "C" fn connhost_abi_version() -> i32 {
    ABI_VERSION
}

#[no_mangle]
pub extern "C" fn connhost_alloc(size: u32) -> u32 {
    let buf = INBUF.get();
    let want = (size as usize).max(4096);
    if buf.len() < want {
        *buf = vec![0u8; want];
    }
    buf.as_mut_ptr() as u32
}

fn publish(b: &[u8]) -> u64 {
    if b.is_empty() {
        return 0;
    }
    ((b.as_ptr() as u64) << 32) | b.len() as u64
}

/// connhost_describe's body.
pub fn describe(ops: &[Operation]) -> u64 {
    let out = OUTBUF.get();
    *out = crate::describe(ops);
    publish(out)
}

/// The n bytes at ptr, which must lie inside the input buffer.
fn input(ptr: u32, n: u32) -> Option<&'static [u8]> {
    if n == 0 {
        return Some(&[]);
    }
    let buf = INBUF.get();
    let base = buf.as_ptr() as u32;
    if ptr < base || (ptr - base) as u64 + n as u64 > buf.len() as u64 {
        return None;
    }
    let off = (ptr - base) as usize;
    Some(&buf[off..off + n as usize])
}

/// connhost_execute's, connhost_execute_with_key's and
/// connhost_reconcile's body.
#[allow(clippy::too_many_arguments)]
pub fn call(ops: &[Operation], export: Export, op_ptr: u32, op_len: u32, key_ptr: u32, key_len: u32, args_ptr: u32, args_len: u32) -> u64 {
    let o = match (input(op_ptr, op_len), input(key_ptr, key_len), input(args_ptr, args_len)) {
        (Some(op), Some(key), Some(args)) => {
            let op = String::from_utf8_lossy(op).into_owned();
            let key = String::from_utf8_lossy(key).into_owned();
            dispatch(ops, &mut WasmHost, export, &op, &key, args)
        }
        _ => crate::Outcome::permanent("connhost-guest: call arguments outside the input buffer"),
    };
    let out = OUTBUF.get();
    o.encode(out);
    publish(out)
}

#[link(wasm_import_module = "connhost")]
extern "C" {
    #[link_name = "log"]
    fn host_log(level: i32, ptr: *const u8, len: u32);
    #[link_name = "config_get"]
    fn host_config_get(ptr: *const u8, len: u32) -> i32;
    #[link_name = "http_request"]
    fn host_http_request(ptr: *const u8, len: u32) -> i32;
    #[link_name = "take"]
    fn host_take(ptr: *mut u8, cap: u32) -> i32;
    #[link_name = "now"]
    fn host_now() -> i64;
    #[link_name = "sleep"]
    fn host_sleep(nanos: i64) -> i32;
    #[link_name = "execution_id"]
    fn host_execution_id() -> i32;
}

/// Copies the n-byte pending value out of the host.
fn take_pending(n: i32) -> Vec<u8> {
    if n <= 0 {
        return Vec::new();
    }
    let mut buf = vec![0u8; n as usize];
    // SAFETY: buf has n writable bytes.
    let got = unsafe { host_take(buf.as_mut_ptr(), n as u32) };
    if got < 0 {
        return Vec::new();
    }
    buf.truncate(got as usize);
    buf
}

/// The host functions.
struct WasmHost;

impl Host for WasmHost {
    fn execution_id(&mut self) -> String {
        // SAFETY: no pointers.
        let n = unsafe { host_execution_id() };
        String::from_utf8_lossy(&take_pending(n)).into_owned()
    }
    fn config(&mut self, key: &str) -> Result<String, i32> {
        // SAFETY: key is len bytes at ptr.
        let n = unsafe { host_config_get(key.as_ptr(), key.len() as u32) };
        if n < 0 {
            return Err(n);
        }
        Ok(String::from_utf8_lossy(&take_pending(n)).into_owned())
    }
    fn http(&mut self, req: &HttpRequest) -> HttpResponse {
        let env = req.encode();
        // SAFETY: env is len bytes at ptr.
        let n = unsafe { host_http_request(env.as_ptr(), env.len() as u32) };
        if n < 0 {
            return HttpResponse::failed(HttpError::Invalid, "the host refused the request envelope");
        }
        match HttpResponse::decode(&take_pending(n)) {
            Ok(r) => r,
            Err(e) => HttpResponse::failed(HttpError::Invalid, e),
        }
    }
    fn log(&mut self, level: i32, msg: &str) {
        // SAFETY: msg is len bytes at ptr.
        unsafe { host_log(level, msg.as_ptr(), msg.len() as u32) }
    }
    fn now_unix_nanos(&mut self) -> i64 {
        // SAFETY: no pointers.
        unsafe { host_now() }
    }
    fn sleep_nanos(&mut self, nanos: i64) -> bool {
        // SAFETY: no pointers.
        unsafe { host_sleep(nanos) == 0 }
    }
}
