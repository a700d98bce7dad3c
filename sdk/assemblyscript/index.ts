// @connhost/guest: write connhost connectors in AssemblyScript.
//
// Register operations with register(); re-export the ABI's entry points
// from your entry file with
//
//   export * from "@connhost/guest/exports";
//
// and build with connhost build (asc with --exportStart _initialize and
// the kit's abort). The contract is docs/abi.md; what each outcome
// promises is the same in every language.

// ---- Host imports (docs/abi.md, Imports) ----

// @ts-ignore: decorator
@external("connhost", "log")
declare function hostLog(level: i32, ptr: usize, len: usize): void;
// @ts-ignore: decorator
@external("connhost", "config_get")
declare function hostConfigGet(ptr: usize, len: usize): i32;
// @ts-ignore: decorator
@external("connhost", "http_request")
declare function hostHTTPRequest(ptr: usize, len: usize): i32;
// @ts-ignore: decorator
@external("connhost", "take")
declare function hostTake(ptr: usize, cap: usize): i32;
// @ts-ignore: decorator
@external("connhost", "now")
declare function hostNow(): i64;
// @ts-ignore: decorator
@external("connhost", "sleep")
declare function hostSleep(nanos: i64): i32;
// @ts-ignore: decorator
@external("connhost", "execution_id")
declare function hostExecutionID(): i32;

/** The ABI version this kit speaks. */
export const ABI_VERSION: i32 = 1;

/** Log levels of Call.log. */
export const LEVEL_DEBUG: i32 = -4;
export const LEVEL_INFO: i32 = 0;
export const LEVEL_WARN: i32 = 4;
export const LEVEL_ERROR: i32 = 8;

function takePending(n: i32): ArrayBuffer {
  if (n <= 0) return new ArrayBuffer(0);
  const buf = new ArrayBuffer(n);
  const got = hostTake(changetype<usize>(buf), n);
  if (got < 0) return new ArrayBuffer(0);
  return got == n ? buf : buf.slice(0, got);
}

/** Logs msg at level through the host (tagged with connector, operation, execution). */
export function log(level: i32, msg: string): void {
  const b = String.UTF8.encode(msg);
  hostLog(level, changetype<usize>(b), b.byteLength);
}

// ---- Outcomes (docs/abi.md, Outcome envelope) ----

/** Outcome kinds. */
export enum Kind {
  OK = 1,
  RetryableError = 2,
  PermanentError = 3,
  Applied = 4,
  NotApplied = 5,
  Unknown = 6,
  Uncertain = 7,
  InProgress = 8,
}

/** What an operation answers; build it with the static constructors. */
export class Outcome {
  constructor(public kind: Kind, public result: string, public receipt: string, public error: string) {}
  /** The operation took effect: result is its JSON text, receipt names the external object. */
  static ok(result: string, receipt: string): Outcome { return new Outcome(Kind.OK, result, receipt, ""); }
  /** Reconcile found the original call's effect: the result and receipt it would have returned. */
  static applied(result: string, receipt: string): Outcome { return new Outcome(Kind.Applied, result, receipt, ""); }
  /** This attempt did not take effect and may be retried. Not for requests that may have been acted on. */
  static retryable(msg: string): Outcome { return new Outcome(Kind.RetryableError, "", "", msg); }
  /** Nothing took effect and retrying cannot help. */
  static permanent(msg: string): Outcome { return new Outcome(Kind.PermanentError, "", "", msg); }
  /** The attempt may have taken effect: the host applies the recovery policy. */
  static uncertain(msg: string): Outcome { return new Outcome(Kind.Uncertain, "", "", msg); }
  /** The provider is still processing an earlier request with this key. */
  static inProgress(msg: string): Outcome { return new Outcome(Kind.InProgress, "", "", msg); }
  /** Reconcile: authoritative evidence that the call had no effect. */
  static notApplied(msg: string): Outcome { return new Outcome(Kind.NotApplied, "", "", msg); }
  /** Reconcile cannot decide. */
  static unknown(msg: string): Outcome { return new Outcome(Kind.Unknown, "", "", msg); }

  /** The envelope: tag 0xC1, kind, result, receipt, error. */
  encode(): ArrayBuffer {
    const w = new Writer();
    w.u8(0xC1);
    w.u8(<u8>this.kind);
    w.str(this.result);
    w.str(this.receipt);
    w.str(this.error);
    return w.done();
  }
}

// ---- Binary writer and reader (docs/abi.md, Binary envelopes) ----

class Writer {
  parts: ArrayBuffer[] = [];
  size: i32 = 0;
  u8(v: u8): void {
    const b = new ArrayBuffer(1);
    store<u8>(changetype<usize>(b), v);
    this.raw(b);
  }
  u32(v: u32): void {
    const b = new ArrayBuffer(4);
    store<u32>(changetype<usize>(b), v); // wasm is little-endian
    this.raw(b);
  }
  raw(b: ArrayBuffer): void {
    this.parts.push(b);
    this.size += b.byteLength;
  }
  bytes(b: ArrayBuffer): void {
    this.u32(<u32>b.byteLength);
    this.raw(b);
  }
  str(s: string): void { this.bytes(String.UTF8.encode(s)); }
  done(): ArrayBuffer {
    const out = new ArrayBuffer(this.size);
    let at: usize = changetype<usize>(out);
    for (let i = 0; i < this.parts.length; i++) {
      const p = this.parts[i];
      memory.copy(at, changetype<usize>(p), p.byteLength);
      at += p.byteLength;
    }
    return out;
  }
}

class Reader {
  at: i32 = 0;
  bad: bool = false;
  constructor(public b: ArrayBuffer) {}
  need(n: i32): bool {
    if (this.bad || this.b.byteLength - this.at < n) { this.bad = true; return false; }
    return true;
  }
  u8(): u8 {
    if (!this.need(1)) return 0;
    const v = load<u8>(changetype<usize>(this.b) + this.at);
    this.at += 1;
    return v;
  }
  u32(): u32 {
    if (!this.need(4)) return 0;
    const v = load<u32>(changetype<usize>(this.b) + this.at);
    this.at += 4;
    return v;
  }
  bytes(): ArrayBuffer {
    const n = <i32>this.u32();
    if (n < 0 || !this.need(n)) return new ArrayBuffer(0);
    const v = this.b.slice(this.at, this.at + n);
    this.at += n;
    return v;
  }
  str(): string { return String.UTF8.decode(this.bytes()); }
}

// ---- HTTP (docs/abi.md, http_request) ----

/** One header field. */
export class Header {
  constructor(public name: string, public value: string) {}
}

/** An HTTP request the host sends for the connector. */
export class HttpRequest {
  headers: Header[] = [];
  /** Bounds this request; 0: the call's deadline. */
  timeoutMillis: u32 = 0;
  constructor(public method: string, public url: string, public body: string = "") {}
  static get(url: string): HttpRequest { return new HttpRequest("GET", url); }
  static post(url: string, body: string): HttpRequest { return new HttpRequest("POST", url, body); }
  /** Adds a header field. */
  header(name: string, value: string): HttpRequest {
    this.headers.push(new Header(name, value));
    return this;
  }
  /** The envelope: tag 0xD1, method, url, headers, body, timeout. */
  encode(): ArrayBuffer {
    const w = new Writer();
    w.u8(0xD1);
    w.str(this.method);
    w.str(this.url);
    w.u32(<u32>this.headers.length);
    for (let i = 0; i < this.headers.length; i++) {
      w.str(this.headers[i].name);
      w.str(this.headers[i].value);
    }
    w.str(this.body);
    w.u32(this.timeoutMillis);
    return w.done();
  }
}

/** Why the host did not complete a request (docs/abi.md, HTTP error codes). */
export enum HttpError {
  OK = 0,
  /** Not in capabilities.http: nothing was sent. */
  Denied = 1,
  /** The deadline ran out: it may have been acted on. */
  Timeout = 2,
  /** DNS, connect, TLS or read failure: it may have been acted on. */
  Network = 3,
  TooLarge = 4,
  /** A malformed method, URL or header: nothing was sent. */
  Invalid = 5,
}

const httpErrorNames: string[] = ["ok", "denied", "timeout", "network", "too_large", "invalid"];

/** The host's answer to an HttpRequest. */
export class HttpResponse {
  headers: Header[] = [];
  body: ArrayBuffer = new ArrayBuffer(0);
  status: i32 = 0;
  constructor(public err: HttpError, public message: string) {}

  /** The first value of the named header (case-insensitive), or null. */
  header(name: string): string | null {
    const want = name.toLowerCase();
    for (let i = 0; i < this.headers.length; i++) {
      if (this.headers[i].name.toLowerCase() == want) return this.headers[i].value;
    }
    return null;
  }
  /** The body as text. */
  text(): string { return String.UTF8.decode(this.body); }
  /** The body as JSON, or null (see jsonError()). */
  json(): JsonValue | null { return parseJson(this.text()); }
  /** A received response with a 2xx status. */
  success(): bool { return this.err == HttpError.OK && this.status >= 200 && this.status < 300; }
  /** The error code's name ("ok", "timeout", …). */
  errName(): string { return httpErrorNames[<i32>this.err]; }

  /**
   * The outcome a response that is not a 2xx proves, or null for a 2xx.
   * mutating: the request may change the provider's state; then every
   * answer that leaves the effect open is uncertain (timeout, network
   * error, 5xx) and a 409 is in progress. A denial or an invalid request
   * was never sent: permanent. A 429 is retryable, any other status
   * permanent.
   */
  failure(what: string, mutating: bool): Outcome | null {
    if (this.err == HttpError.Denied || this.err == HttpError.Invalid) {
      return Outcome.permanent(what + ": " + this.errName() + ": " + this.message);
    }
    if (this.err != HttpError.OK) {
      const m = what + ": " + this.errName() + ": " + this.message;
      return mutating ? Outcome.uncertain(m) : Outcome.retryable(m);
    }
    if (this.status >= 200 && this.status < 300) return null;
    let body = this.text();
    if (body.length > 300) body = body.substring(0, 300);
    if (this.status == 409 && mutating) return Outcome.inProgress(what + ": the provider is still processing this key: " + body);
    if (this.status == 429) return Outcome.retryable(what + ": rate limited: " + body);
    if (this.status >= 500) {
      const m = what + ": provider error " + this.status.toString() + ": " + body;
      return mutating ? Outcome.uncertain(m) : Outcome.retryable(m);
    }
    return Outcome.permanent(what + ": status " + this.status.toString() + ": " + body);
  }

  /** Decodes the envelope (tag 0xD2). */
  static decode(b: ArrayBuffer): HttpResponse {
    const r = new Reader(b);
    if (r.u8() != 0xD2) return new HttpResponse(HttpError.Invalid, "http response: bad tag");
    const err = r.u8();
    const message = r.str();
    const status = r.u32();
    const n = r.u32();
    if (n > 256) return new HttpResponse(HttpError.Invalid, "http response: too many header fields");
    const resp = new HttpResponse(err <= 5 ? <HttpError>err : HttpError.Invalid, message);
    resp.status = <i32>status;
    for (let i: u32 = 0; i < n; i++) {
      const name = r.str();
      resp.headers.push(new Header(name, r.str()));
    }
    resp.body = r.bytes();
    if (r.bad || r.at != b.byteLength) return new HttpResponse(HttpError.Invalid, "http response: malformed envelope");
    return resp;
  }
}

// ---- Calls and operations ----

/** A handler answers one call: args are the call's JSON arguments as the host recorded them. */
export type Handler = (c: Call, args: Uint8Array) => Outcome;

/** One invocation of an operation, valid during its handler. */
export class Call {
  constructor(
    /** The operation's name. */
    public operation: string,
    /**
     * The idempotency key ("ck_…") in executeWithKey and reconcile, "" in
     * execute: the same on every attempt of one call, another for every
     * other call. What the provider keeps and reconcile looks up.
     */
    public key: string,
  ) {}
  /** The execution id ("ex_…"): what people know the call by; not the key. */
  executionId(): string { return String.UTF8.decode(takePending(hostExecutionID())); }
  /** A config value the manifest declares, or null when not declared (-1) or not set (-2). */
  config(key: string): string | null {
    const k = String.UTF8.encode(key);
    const n = hostConfigGet(changetype<usize>(k), k.byteLength);
    if (n < 0) return null;
    return String.UTF8.decode(takePending(n));
  }
  /** An HTTP request through the host, to the origins capabilities.http allows. */
  http(req: HttpRequest): HttpResponse {
    const env = req.encode();
    const n = hostHTTPRequest(changetype<usize>(env), env.byteLength);
    if (n < 0) return new HttpResponse(HttpError.Invalid, "the host refused the request envelope");
    return HttpResponse.decode(takePending(n));
  }
  debug(msg: string): void { log(LEVEL_DEBUG, msg); }
  info(msg: string): void { log(LEVEL_INFO, msg); }
  warn(msg: string): void { log(LEVEL_WARN, msg); }
  error(msg: string): void { log(LEVEL_ERROR, msg); }
  /** The host's wall-clock time in Unix nanoseconds. */
  nowUnixNanos(): i64 { return hostNow(); }
  /** Sleeps, never past the call's deadline; true when the whole duration elapsed. */
  sleepMillis(ms: i64): bool { return hostSleep(ms * 1000000) == 0; }
}

/**
 * An operation and the entry points it implements. executeWithKey is
 * called for every dispatch when set (required by idempotent-retry);
 * reconcile is required by recovery reconcile.
 */
export class Operation {
  execute: Handler | null = null;
  executeWithKey: Handler | null = null;
  reconcile: Handler | null = null;
  constructor(public name: string) {}
  static named(name: string): Operation { return new Operation(name); }
  withExecute(h: Handler): Operation { this.execute = h; return this; }
  withExecuteWithKey(h: Handler): Operation { this.executeWithKey = h; return this; }
  withReconcile(h: Handler): Operation { this.reconcile = h; return this; }
}

/** The registered operations, in order. */
export const operations: Operation[] = [];

/** Registers operations; call it at the top level of the entry file. */
export function register(ops: Operation[]): void {
  for (let i = 0; i < ops.length; i++) {
    const op = ops[i];
    assert(op.name.length > 0, "connhost-guest: operation without a name");
    assert(op.execute != null || op.executeWithKey != null, "connhost-guest: operation " + op.name + " has neither execute nor executeWithKey");
    for (let j = 0; j < operations.length; j++) {
      assert(operations[j].name != op.name, "connhost-guest: operation " + op.name + " registered twice");
    }
    operations.push(op);
  }
}

/** The description connhost_describe returns (docs/abi.md, Description). */
export function describe(): string {
  const list: string[] = [];
  for (let i = 0; i < operations.length; i++) {
    const op = operations[i];
    list.push(new JsonObject().str("name", op.name).bool("execute", op.execute != null)
      .bool("execute_with_key", op.executeWithKey != null).bool("reconcile", op.reconcile != null).build());
  }
  return new JsonObject().int("abi", ABI_VERSION).raw("operations", "[" + list.join(",") + "]").build();
}

/** Export numbers of dispatch. */
export const EXECUTE: i32 = 0;
export const EXECUTE_WITH_KEY: i32 = 1;
export const RECONCILE: i32 = 2;

/**
 * Runs the handler of operation for export. An unknown operation or an
 * entry point it does not implement is permanent_error (reconcile:
 * unknown, which does not claim "not applied").
 */
export function dispatch(exp: i32, operation: string, key: string, args: Uint8Array): Outcome {
  let op: Operation | null = null;
  for (let i = 0; i < operations.length; i++) {
    if (operations[i].name == operation) { op = operations[i]; break; }
  }
  const msg = op == null
    ? "connhost-guest: unknown operation \"" + operation + "\""
    : "connhost-guest: operation \"" + operation + "\" does not implement this entry point";
  const refuse = exp == RECONCILE ? Outcome.unknown(msg) : Outcome.permanent(msg);
  if (op == null) return refuse;
  const h = exp == EXECUTE ? op.execute : exp == EXECUTE_WITH_KEY ? op.executeWithKey : op.reconcile;
  if (h == null) return refuse;
  return h(new Call(operation, key), args);
}

// ---- JSON ----

/** JSON value kinds. */
export enum JsonKind { Null, Bool, Number, String, Array, Object }

/** A JSON value; numbers keep their text. */
export class JsonValue {
  b: bool = false;
  s: string = "";
  items: JsonValue[] = [];
  keys: string[] = [];
  constructor(public kind: JsonKind) {}

  /** The member name of an object, or null. */
  get(name: string): JsonValue | null {
    if (this.kind != JsonKind.Object) return null;
    for (let i = 0; i < this.keys.length; i++) if (this.keys[i] == name) return this.items[i];
    return null;
  }
  isString(): bool { return this.kind == JsonKind.String; }
  /** The string of a string ("" otherwise). */
  asString(): string { return this.kind == JsonKind.String ? this.s : ""; }
  /** Whether a number is an integer that fits i64. */
  isInteger(): bool { return this.kind == JsonKind.Number && isIntText(this.s); }
  /** The integer of a number (0 otherwise). */
  asI64(): i64 { return this.isInteger() ? parseI64(this.s) : 0; }
  /** The elements of an array (empty otherwise). */
  asArray(): JsonValue[] { return this.kind == JsonKind.Array ? this.items : []; }
  /** A string member of an object ("" when absent or not a string). */
  strOf(name: string): string { const v = this.get(name); return v == null ? "" : v.asString(); }
  /** An integer member of an object (0 when absent or not an integer). */
  i64Of(name: string): i64 { const v = this.get(name); return v == null ? 0 : v.asI64(); }
  /** The value as JSON text. */
  toJson(): string {
    switch (this.kind) {
      case JsonKind.Null: return "null";
      case JsonKind.Bool: return this.b ? "true" : "false";
      case JsonKind.Number: return this.s;
      case JsonKind.String: return quote(this.s);
      case JsonKind.Array: {
        const parts: string[] = [];
        for (let i = 0; i < this.items.length; i++) parts.push(this.items[i].toJson());
        return "[" + parts.join(",") + "]";
      }
    }
    const parts: string[] = [];
    for (let i = 0; i < this.keys.length; i++) parts.push(quote(this.keys[i]) + ":" + this.items[i].toJson());
    return "{" + parts.join(",") + "}";
  }
}

function isIntText(s: string): bool {
  let i = s.startsWith("-") ? 1 : 0;
  if (i == s.length || s.length - i > 18) return false; // fits i64 without overflow checks
  for (; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  return true;
}

function parseI64(s: string): i64 {
  let neg = s.startsWith("-");
  let v: i64 = 0;
  for (let i = neg ? 1 : 0; i < s.length; i++) v = v * 10 + <i64>(s.charCodeAt(i) - 48);
  return neg ? -v : v;
}

let jsonErr: string = "";

/** Why the last parseJson returned null. */
export function jsonError(): string { return jsonErr; }

/** Parses exactly one JSON value, or returns null (see jsonError()). */
export function parseJson(text: string): JsonValue | null {
  const p = new JsonParser(text);
  const v = p.value(0);
  if (v != null) {
    p.ws();
    if (p.at != text.length) p.fail("trailing data");
  }
  if (p.err.length > 0) { jsonErr = p.err; return null; }
  return v;
}

class JsonParser {
  at: i32 = 0;
  err: string = "";
  constructor(public s: string) {}
  fail(what: string): JsonValue | null {
    if (this.err.length == 0) this.err = "json: " + what + " at offset " + this.at.toString();
    return null;
  }
  ws(): void {
    while (this.at < this.s.length) {
      const c = this.s.charCodeAt(this.at);
      if (c != 32 && c != 9 && c != 10 && c != 13) break;
      this.at++;
    }
  }
  lit(word: string, v: JsonValue): JsonValue | null {
    if (this.s.substr(this.at, word.length) != word) return this.fail("invalid literal");
    this.at += word.length;
    return v;
  }
  value(depth: i32): JsonValue | null {
    if (depth > 128) return this.fail("nested too deep");
    this.ws();
    if (this.at >= this.s.length) return this.fail("unexpected end");
    const c = this.s.charCodeAt(this.at);
    if (c == 110) return this.lit("null", new JsonValue(JsonKind.Null));
    if (c == 116) { const v = new JsonValue(JsonKind.Bool); v.b = true; return this.lit("true", v); }
    if (c == 102) return this.lit("false", new JsonValue(JsonKind.Bool));
    if (c == 34) {
      const str = this.string();
      if (str == null) return null;
      const v = new JsonValue(JsonKind.String);
      v.s = str;
      return v;
    }
    if (c == 91) {
      this.at++;
      const v = new JsonValue(JsonKind.Array);
      this.ws();
      if (this.peek() == 93) { this.at++; return v; }
      while (true) {
        const item = this.value(depth + 1);
        if (item == null) return null;
        v.items.push(item);
        this.ws();
        const d = this.peek();
        if (d == 44) { this.at++; continue; }
        if (d == 93) { this.at++; return v; }
        return this.fail("expected , or ]");
      }
    }
    if (c == 123) {
      this.at++;
      const v = new JsonValue(JsonKind.Object);
      this.ws();
      if (this.peek() == 125) { this.at++; return v; }
      while (true) {
        this.ws();
        if (this.peek() != 34) return this.fail("expected a member name");
        const k = this.string();
        if (k == null) return null;
        if (v.keys.includes(k)) return this.fail("member \"" + k + "\" given twice");
        this.ws();
        if (this.peek() != 58) return this.fail("expected :");
        this.at++;
        const item = this.value(depth + 1);
        if (item == null) return null;
        v.keys.push(k);
        v.items.push(item);
        this.ws();
        const d = this.peek();
        if (d == 44) { this.at++; continue; }
        if (d == 125) { this.at++; return v; }
        return this.fail("expected , or }");
      }
    }
    if (c == 45 || (c >= 48 && c <= 57)) return this.number();
    return this.fail("unexpected character");
  }
  peek(): i32 { return this.at < this.s.length ? this.s.charCodeAt(this.at) : -1; }
  digits(): i32 {
    const start = this.at;
    while (this.peek() >= 48 && this.peek() <= 57) this.at++;
    return this.at - start;
  }
  number(): JsonValue | null {
    const start = this.at;
    if (this.peek() == 45) this.at++;
    const intStart = this.at;
    const n = this.digits();
    if (n == 0 || (n > 1 && this.s.charCodeAt(intStart) == 48)) return this.fail("invalid number");
    if (this.peek() == 46) {
      this.at++;
      if (this.digits() == 0) return this.fail("invalid number");
    }
    if (this.peek() == 101 || this.peek() == 69) {
      this.at++;
      if (this.peek() == 43 || this.peek() == 45) this.at++;
      if (this.digits() == 0) return this.fail("invalid number");
    }
    const v = new JsonValue(JsonKind.Number);
    v.s = this.s.substring(start, this.at);
    return v;
  }
  hex4(): i32 {
    if (this.s.length - this.at < 4) return -1;
    let v = 0;
    for (let i = 0; i < 4; i++) {
      const c = this.s.charCodeAt(this.at + i);
      let d = -1;
      if (c >= 48 && c <= 57) d = c - 48;
      else if (c >= 97 && c <= 102) d = c - 87;
      else if (c >= 65 && c <= 70) d = c - 55;
      if (d < 0) return -1;
      v = v * 16 + d;
    }
    this.at += 4;
    return v;
  }
  string(): string | null {
    this.at++; // "
    let out = "";
    let run = this.at;
    while (this.at < this.s.length) {
      const c = this.s.charCodeAt(this.at);
      if (c == 34) {
        out += this.s.substring(run, this.at);
        this.at++;
        return out;
      }
      if (c < 32) { this.fail("control character in string"); return null; }
      if (c != 92) { this.at++; continue; }
      out += this.s.substring(run, this.at);
      this.at++;
      const e = this.peek();
      this.at++;
      if (e == 34) out += "\"";
      else if (e == 92) out += "\\";
      else if (e == 47) out += "/";
      else if (e == 98) out += "\b";
      else if (e == 102) out += "\f";
      else if (e == 110) out += "\n";
      else if (e == 114) out += "\r";
      else if (e == 116) out += "\t";
      else if (e == 117) {
        const hi = this.hex4();
        if (hi < 0) { this.fail("bad escape"); return null; }
        if (hi >= 0xD800 && hi < 0xDC00) {
          if (this.peek() != 92 || this.s.charCodeAt(this.at + 1) != 117) { this.fail("unpaired surrogate"); return null; }
          this.at += 2;
          const lo = this.hex4();
          if (lo < 0xDC00 || lo >= 0xE000) { this.fail("unpaired surrogate"); return null; }
          out += String.fromCharCode(hi) + String.fromCharCode(lo);
        } else if (hi >= 0xDC00 && hi < 0xE000) {
          this.fail("unpaired surrogate"); return null;
        } else {
          out += String.fromCharCode(hi);
        }
      } else { this.fail("invalid escape"); return null; }
      run = this.at;
    }
    this.fail("unterminated string");
    return null;
  }
}

/** s as a JSON string, escaped as Go's encoding/json does. */
export function quote(s: string): string {
  let out = "\"";
  let run = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    let esc: string | null = null;
    if (c == 34) esc = "\\\"";
    else if (c == 92) esc = "\\\\";
    else if (c == 10) esc = "\\n";
    else if (c == 13) esc = "\\r";
    else if (c == 9) esc = "\\t";
    else if (c < 32 || c == 60 || c == 62 || c == 38 || c == 0x2028 || c == 0x2029) {
      const h = c.toString(16);
      esc = "\\u" + "0000".substring(h.length) + h;
    }
    if (esc != null) {
      out += s.substring(run, i) + esc;
      run = i + 1;
    }
  }
  return out + s.substring(run) + "\"";
}

/** Writes an object member by member. */
export class JsonObject {
  parts: string[] = [];
  str(k: string, v: string): JsonObject { this.parts.push(quote(k) + ":" + quote(v)); return this; }
  optStr(k: string, v: string | null): JsonObject { return v == null ? this.raw(k, "null") : this.str(k, v); }
  int(k: string, v: i64): JsonObject { this.parts.push(quote(k) + ":" + v.toString()); return this; }
  bool(k: string, v: bool): JsonObject { this.parts.push(quote(k) + ":" + (v ? "true" : "false")); return this; }
  /** A member whose value is JSON text already. */
  raw(k: string, json: string): JsonObject { this.parts.push(quote(k) + ":" + json); return this; }
  build(): string { return "{" + this.parts.join(",") + "}"; }
}

/**
 * A call's arguments, read strictly: read each member with its type, then
 * finish() returns the first error (a missing or mistyped member, a member
 * nothing read, arguments that are not one JSON object), or null.
 */
export class Args {
  obj: JsonValue = new JsonValue(JsonKind.Object);
  read: bool[] = [];
  err: string | null = null;

  static parse(args: Uint8Array): Args {
    const a = new Args();
    const v = parseJson(String.UTF8.decode(args.buffer.slice(args.byteOffset, args.byteOffset + args.byteLength)));
    if (v == null) {
      a.err = "arguments: " + jsonError();
    } else if (v.kind != JsonKind.Object) {
      a.err = "arguments: not a JSON object";
    } else {
      a.obj = v;
      for (let i = 0; i < v.keys.length; i++) a.read.push(false);
    }
    return a;
  }
  private take(name: string): JsonValue | null {
    for (let i = 0; i < this.obj.keys.length; i++) {
      if (this.obj.keys[i] == name) {
        this.read[i] = true;
        const v = this.obj.items[i];
        return v.kind == JsonKind.Null ? null : v;
      }
    }
    return null;
  }
  private fail(msg: string): void { if (this.err == null) this.err = "arguments: " + msg; }
  /** Whether the member is present and not null. */
  has(name: string): bool { return this.obj.get(name) != null && this.obj.get(name)!.kind != JsonKind.Null; }
  /** A required string member ("" and an error when missing). */
  str(name: string): string {
    const v = this.optStr(name);
    if (v == null) { this.fail(name + " is required"); return ""; }
    return v;
  }
  /** An optional string member. */
  optStr(name: string): string | null {
    const v = this.take(name);
    if (v == null) return null;
    if (v.kind != JsonKind.String) { this.fail(name + " must be a string"); return null; }
    return v.s;
  }
  /** A required integer member. */
  i64(name: string): i64 {
    const v = this.take(name);
    if (v == null) { this.fail(name + " is required"); return 0; }
    if (!v.isInteger()) { this.fail(name + " must be an integer"); return 0; }
    return v.asI64();
  }
  /** An optional integer member (def when absent). */
  optI64(name: string, def: i64): i64 {
    const v = this.take(name);
    if (v == null) return def;
    if (!v.isInteger()) { this.fail(name + " must be an integer"); return def; }
    return v.asI64();
  }
  /** The first error, or null when every member was read with its type. */
  finish(): string | null {
    if (this.err != null) return this.err;
    const unread: string[] = [];
    for (let i = 0; i < this.read.length; i++) if (!this.read[i]) unread.push(this.obj.keys[i]);
    if (unread.length > 0) return "arguments: unknown member(s) " + unread.join(", ");
    return null;
  }
}

// ---- URL encoding ----

const HEX = "0123456789ABCDEF";

function escape(s: string, query: bool): string {
  const b = Uint8Array.wrap(String.UTF8.encode(s));
  let out = "";
  for (let i = 0; i < b.length; i++) {
    const c = b[i];
    if ((c >= 65 && c <= 90) || (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c == 45 || c == 95 || c == 46 || c == 126) {
      out += String.fromCharCode(c);
    } else if (c == 32 && query) {
      out += "+";
    } else {
      out += "%" + HEX.charAt(c >> 4) + HEX.charAt(c & 15);
    }
  }
  return out;
}

/** s escaped for a query string or form value (space as +). */
export function queryEscape(s: string): string { return escape(s, true); }
/** s escaped for one path segment. */
export function pathEscape(s: string): string { return escape(s, false); }

/** A form body or query string, fields in the order added. */
export class Form {
  parts: string[] = [];
  add(name: string, value: string): Form { this.parts.push(queryEscape(name) + "=" + queryEscape(value)); return this; }
  encode(): string { return this.parts.join("&"); }
}
