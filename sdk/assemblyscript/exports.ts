// The ABI's entry points (docs/abi.md, Exports). Re-export them from the
// connector's entry file:
//
//   export * from "@connhost/guest/exports";
//
// _initialize is the start function (asc --exportStart _initialize), which
// runs the entry file's top-level register() call.

import { ABI_VERSION, describe, dispatch, EXECUTE, EXECUTE_WITH_KEY, RECONCILE, Outcome, log, LEVEL_ERROR } from "./index";

/** The input buffer connhost_alloc hands out, valid until the next one. */
let inbuf: ArrayBuffer = new ArrayBuffer(0);
/** The last outcome or description, valid until the next call. */
let outbuf: ArrayBuffer = new ArrayBuffer(0);

function publish(b: ArrayBuffer): u64 {
  outbuf = b;
  if (b.byteLength == 0) return 0;
  return (<u64>changetype<usize>(b) << 32) | <u64>b.byteLength;
}

export function connhost_abi_version(): i32 {
  return ABI_VERSION;
}

export function connhost_alloc(size: u32): u32 {
  if (<u32>inbuf.byteLength < size || inbuf.byteLength == 0) {
    inbuf = new ArrayBuffer(<i32>max<u32>(size, 4096));
  }
  return <u32>changetype<usize>(inbuf);
}

export function connhost_describe(): u64 {
  return publish(String.UTF8.encode(describe()));
}

/** The n bytes at ptr, which must lie inside the input buffer, or null. */
function input(ptr: u32, n: u32): Uint8Array | null {
  if (n == 0) return new Uint8Array(0);
  const base = <u32>changetype<usize>(inbuf);
  if (ptr < base || <u64>(ptr - base) + <u64>n > <u64>inbuf.byteLength) return null;
  return Uint8Array.wrap(inbuf, <i32>(ptr - base), <i32>n);
}

function call(exp: i32, opPtr: u32, opLen: u32, keyPtr: u32, keyLen: u32, argsPtr: u32, argsLen: u32): u64 {
  const op = input(opPtr, opLen);
  const key = input(keyPtr, keyLen);
  const args = input(argsPtr, argsLen);
  let o: Outcome;
  if (op == null || key == null || args == null) {
    o = Outcome.permanent("connhost-guest: call arguments outside the input buffer");
  } else {
    o = dispatch(exp, String.UTF8.decode(op.slice().buffer), String.UTF8.decode(key.slice().buffer), args);
  }
  return publish(o.encode());
}

export function connhost_execute(opPtr: u32, opLen: u32, argsPtr: u32, argsLen: u32): u64 {
  return call(EXECUTE, opPtr, opLen, 0, 0, argsPtr, argsLen);
}

export function connhost_execute_with_key(opPtr: u32, opLen: u32, keyPtr: u32, keyLen: u32, argsPtr: u32, argsLen: u32): u64 {
  return call(EXECUTE_WITH_KEY, opPtr, opLen, keyPtr, keyLen, argsPtr, argsLen);
}

export function connhost_reconcile(opPtr: u32, opLen: u32, keyPtr: u32, keyLen: u32, argsPtr: u32, argsLen: u32): u64 {
  return call(RECONCILE, opPtr, opLen, keyPtr, keyLen, argsPtr, argsLen);
}

/**
 * The abort handler (asc --use abort=…/connhostAbort): a failed assertion
 * or a runtime error is logged at error level, then traps. The host takes
 * a trap as an attempt that may have acted, never as a failure.
 */
export function connhostAbort(message: string | null, fileName: string | null, line: u32, column: u32): void {
  const m = message != null ? message : "";
  const f = fileName != null ? fileName : "?";
  log(LEVEL_ERROR, "abort: " + m + " at " + f + ":" + line.toString() + ":" + column.toString());
  unreachable();
}
