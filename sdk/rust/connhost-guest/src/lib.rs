//! Write connhost connectors in Rust.
//!
//! A connector is a WebAssembly module the connhost host loads and calls
//! (the contract is `docs/abi.md`). With this crate you write operations —
//! plain functions from a [`Call`] and the call's JSON arguments to an
//! [`Outcome`] — and list them with [`operations!`]; the crate provides the
//! exports, the allocator, the envelopes and the host imports.
//!
//! ```ignore
//! use connhost_guest::{json, Call, HttpRequest, Outcome};
//!
//! connhost_guest::operations! {
//!     "create_item" => { execute_with_key: create_item },
//! }
//!
//! fn create_item(c: &mut Call, args: &[u8]) -> Outcome {
//!     let mut a = match json::Args::parse(args) { Ok(a) => a, Err(e) => return Outcome::permanent(e) };
//!     let name = match a.str("name") { Ok(v) => v, Err(e) => return Outcome::permanent(e) };
//!     if let Err(e) = a.finish() { return Outcome::permanent(e); }
//!     let body = json::Object::new().str("name", &name).build();
//!     let resp = c.http(&HttpRequest::post("https://api.example.com/v1/items", body)
//!         .header("Idempotency-Key", c.key));
//!     if let Some(failed) = resp.failure("create_item", true) { return failed; }
//!     Outcome::ok(resp.body, "")
//! }
//! ```
//!
//! Build with `connhost build plugins/NAME` (cargo, target `wasm32-wasip1`,
//! or `wasm32-wasi` on older toolchains; crate type `cdylib`). Natively,
//! [`testing::invoke`] runs an operation against a [`testing::FakeHost`].
//!
//! What each outcome promises, and which entry point each recovery policy
//! needs, is in `docs/abi.md` and the Go kit's documentation: the meaning
//! is the same in every language.
//!
//! The crate has no dependencies and builds with rustc 1.63 (Debian 12)
//! and later.

#![forbid(unsafe_op_in_unsafe_fn)]

pub mod form;
pub mod json;
pub mod testing;
mod wire;

#[cfg(target_arch = "wasm32")]
mod wasm;

#[doc(hidden)]
pub mod __export {
    //! What [`operations!`](crate::operations) expands to; not part of the
    //! API.
    #[cfg(target_arch = "wasm32")]
    pub use crate::wasm::{call, describe};
}

pub use wire::{Header, HttpError, HttpRequest, HttpResponse, Kind, Outcome};

/// The ABI version this crate speaks (`connhost_abi_version`).
pub const ABI_VERSION: i32 = 1;

/// The call exports, as [`testing::invoke`] names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Export {
    /// `connhost_execute`: no idempotency key.
    Execute,
    /// `connhost_execute_with_key`: every dispatch of an operation that
    /// implements it, with the call's key.
    ExecuteWithKey,
    /// `connhost_reconcile`: did an earlier attempt take effect?
    Reconcile,
}

/// A handler answers one call of an operation: `args` are the model's
/// JSON arguments exactly as the host recorded them. They never carry the
/// idempotency key: that is [`Call::key`].
pub type Handler = fn(&mut Call<'_>, &[u8]) -> Outcome;

/// An operation and the entry points it implements; [`operations!`]
/// builds them. `execute` or `execute_with_key` is required; `reconcile`
/// is optional. When `execute_with_key` is set the host calls it for every
/// dispatch and never `execute`: set it whenever the key must reach the
/// provider (recovery `idempotent-retry` requires it), and `reconcile`
/// when recovery `reconcile` is declared.
#[derive(Clone, Copy)]
pub struct Operation {
    #[doc(hidden)]
    pub name: &'static str,
    #[doc(hidden)]
    pub execute: Option<Handler>,
    #[doc(hidden)]
    pub execute_with_key: Option<Handler>,
    #[doc(hidden)]
    pub reconcile: Option<Handler>,
}

impl Operation {
    #[doc(hidden)]
    pub const EMPTY: Operation = Operation { name: "", execute: None, execute_with_key: None, reconcile: None };

    /// The operation's name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

/// Lists the connector's operations and, in a wasm build, exports the
/// ABI's entry points for them. Use it once, at the crate root; each
/// operation names the handlers of the entry points it implements
/// (`execute`, `execute_with_key`, `reconcile`):
///
/// ```ignore
/// connhost_guest::operations! {
///     "create_payment" => { execute_with_key: create, reconcile: reconcile_create },
///     "get_payment" => { execute: get },
/// }
/// ```
///
/// It defines `pub static OPERATIONS: &[Operation]`, which native tests
/// pass to [`testing::invoke`].
#[macro_export]
macro_rules! operations {
    ($($name:literal => { $($entry:ident : $handler:expr),* $(,)? }),* $(,)?) => {
        /// The connector's operations, in the order `connhost_describe`
        /// lists them.
        pub static OPERATIONS: &[$crate::Operation] = &[$(
            $crate::Operation { name: $name, $($entry: Some($handler as $crate::Handler),)* ..$crate::Operation::EMPTY }
        ),*];

        #[cfg(target_arch = "wasm32")]
        #[no_mangle]
        pub extern "C" fn connhost_describe() -> u64 {
            $crate::__export::describe(OPERATIONS)
        }
        #[cfg(target_arch = "wasm32")]
        #[no_mangle]
        pub extern "C" fn connhost_execute(op_ptr: u32, op_len: u32, args_ptr: u32, args_len: u32) -> u64 {
            $crate::__export::call(OPERATIONS, $crate::Export::Execute, op_ptr, op_len, 0, 0, args_ptr, args_len)
        }
        #[cfg(target_arch = "wasm32")]
        #[no_mangle]
        pub extern "C" fn connhost_execute_with_key(op_ptr: u32, op_len: u32, key_ptr: u32, key_len: u32, args_ptr: u32, args_len: u32) -> u64 {
            $crate::__export::call(OPERATIONS, $crate::Export::ExecuteWithKey, op_ptr, op_len, key_ptr, key_len, args_ptr, args_len)
        }
        #[cfg(target_arch = "wasm32")]
        #[no_mangle]
        pub extern "C" fn connhost_reconcile(op_ptr: u32, op_len: u32, key_ptr: u32, key_len: u32, args_ptr: u32, args_len: u32) -> u64 {
            $crate::__export::call(OPERATIONS, $crate::Export::Reconcile, op_ptr, op_len, key_ptr, key_len, args_ptr, args_len)
        }
    };
}

/// The description `connhost_describe` returns for ops (JSON, see
/// docs/abi.md, Description).
pub fn describe(ops: &[Operation]) -> Vec<u8> {
    let mut list = Vec::new();
    for op in ops {
        list.push(
            json::Object::new()
                .str("name", op.name)
                .bool("execute", op.execute.is_some())
                .bool("execute_with_key", op.execute_with_key.is_some())
                .bool("reconcile", op.reconcile.is_some())
                .build(),
        );
    }
    json::Object::new().int("abi", ABI_VERSION as i64).raw("operations", &json::array(&list)).build()
}

/// What a [`Call`] needs from its environment: the host functions in a
/// wasm build, a [`testing::FakeHost`] in native tests.
pub trait Host {
    /// The call's execution id (`ex_…`).
    fn execution_id(&mut self) -> String;
    /// A config value, or the negative status of docs/abi.md
    /// (-1 not declared, -2 not set).
    fn config(&mut self, key: &str) -> Result<String, i32>;
    /// One HTTP request through the host.
    fn http(&mut self, req: &HttpRequest) -> HttpResponse;
    /// A log record at level (-4 debug, 0 info, 4 warn, 8 error).
    fn log(&mut self, level: i32, msg: &str);
    /// Wall-clock time in Unix nanoseconds.
    fn now_unix_nanos(&mut self) -> i64;
    /// Sleeps, never past the call's deadline; true when the whole
    /// duration elapsed.
    fn sleep_nanos(&mut self, nanos: i64) -> bool;
}

/// One invocation of an operation, valid during its handler.
pub struct Call<'a> {
    /// The operation's name.
    pub operation: &'a str,
    /// The call's idempotency key (`ck_…`) in `execute_with_key` and
    /// `reconcile`, empty in `execute`. The same on every attempt of one
    /// call and another for every other call: it is what the provider
    /// keeps, and what reconcile looks the call up by.
    pub key: &'a str,
    host: &'a mut dyn Host,
}

/// Why [`Call::config`] has no value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// The manifest's `capabilities.config` does not list the key.
    NotDeclared(String),
    /// The key is declared but nothing configures it.
    NotSet(String),
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigError::NotDeclared(k) => write!(f, "config key {:?} not declared in the manifest", k),
            ConfigError::NotSet(k) => write!(f, "config key {:?} has no value", k),
        }
    }
}

impl<'a> Call<'a> {
    /// A call on host (used by the exports and by [`testing::invoke`]).
    pub fn new(host: &'a mut dyn Host, operation: &'a str, key: &'a str) -> Call<'a> {
        Call { operation, key, host }
    }
    /// The host's execution id for this call (`ex_…`): what people know
    /// the call by. It is not the idempotency key.
    pub fn execution_id(&mut self) -> String {
        self.host.execution_id()
    }
    /// A configuration value the manifest declares.
    pub fn config(&mut self, key: &str) -> Result<String, ConfigError> {
        match self.host.config(key) {
            Ok(v) => Ok(v),
            Err(-1) => Err(ConfigError::NotDeclared(key.to_string())),
            Err(_) => Err(ConfigError::NotSet(key.to_string())),
        }
    }
    /// An HTTP request through the host, to the origins the manifest's
    /// `capabilities.http` allows. Check [`HttpResponse::err`] (or use
    /// [`HttpResponse::failure`]) before the status.
    pub fn http(&mut self, req: &HttpRequest) -> HttpResponse {
        self.host.http(req)
    }
    /// Logs at debug level, tagged with connector, operation and execution.
    pub fn debug(&mut self, msg: &str) {
        self.host.log(-4, msg)
    }
    /// Logs at info level.
    pub fn info(&mut self, msg: &str) {
        self.host.log(0, msg)
    }
    /// Logs at warn level.
    pub fn warn(&mut self, msg: &str) {
        self.host.log(4, msg)
    }
    /// Logs at error level.
    pub fn error(&mut self, msg: &str) {
        self.host.log(8, msg)
    }
    /// The host's wall-clock time in Unix nanoseconds.
    pub fn now_unix_nanos(&mut self) -> i64 {
        self.host.now_unix_nanos()
    }
    /// Sleeps for d, never past the call's deadline; true when the whole
    /// duration elapsed.
    pub fn sleep(&mut self, d: std::time::Duration) -> bool {
        self.host.sleep_nanos(d.as_nanos().min(i64::MAX as u128) as i64)
    }
}

/// Runs the handler of `operation` for `export` on host: what the wasm
/// exports do with the host functions, and [`testing::invoke`] with a
/// fake. An operation the module does not know, or an entry point it does
/// not implement, is `permanent_error` (`unknown` for reconcile, which has
/// not proven "not applied").
pub fn dispatch(ops: &[Operation], host: &mut dyn Host, export: Export, operation: &str, key: &str, args: &[u8]) -> Outcome {
    let refuse = |msg: String| if export == Export::Reconcile { Outcome::unknown(msg) } else { Outcome::permanent(msg) };
    let op = match ops.iter().find(|o| o.name == operation) {
        Some(op) => op,
        None => return refuse(format!("connhost-guest: unknown operation {:?}", operation)),
    };
    let handler = match export {
        Export::Execute => op.execute,
        Export::ExecuteWithKey => op.execute_with_key,
        Export::Reconcile => op.reconcile,
    };
    match handler {
        Some(h) => h(&mut Call::new(host, operation, key), args),
        None => refuse(format!("connhost-guest: operation {:?} does not implement {:?}", operation, export)),
    }
}
