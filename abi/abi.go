// Package abi is the contract between the connhost host and a connector
// compiled to WebAssembly: export and import names, the ABI version, and the
// byte envelopes that cross the boundary.
//
// It depends on the standard library only, because the guest SDK in
// [github.com/connhost/connhost/abi/guest] compiles it into every connector.
//
// # Calling convention (version 1)
//
// A connector is a wasip1 module built with -buildmode=c-shared. The host runs
// its "_initialize" export once per instance, then:
//
//   - calls [ExportABIVersion] and refuses the module unless it returns
//     [Version];
//   - calls [ExportDescribe], which returns a packed pointer/length (see
//     [PackPtrLen]) to a JSON [Description]: the operations the module really
//     implements and, per operation, whether it implements execute_with_key
//     and reconcile;
//   - for each call, writes the operation name, the idempotency key and the
//     argument bytes back to back into the guest buffer obtained from
//     [ExportAlloc] (asking for a larger one only when the input does not
//     fit), and calls [ExportExecute] (op, args),
//     [ExportExecuteWithKey] (op, key, args) or [ExportReconcile]
//     (op, key, args). Every pointer and length is an i32. The result is a
//     packed i64 pointing at an [Outcome] envelope in guest memory, valid
//     until the next call into the instance.
//
// The idempotency key travels as its own argument, never inside the model's
// JSON arguments: arguments that happen to contain a "key" field are data and
// cannot change the execution identity.
//
// The host offers the functions named Import* in the module [HostModule].
// Functions that return variable-sized data (config values, HTTP responses,
// the execution id) return the length of a value the host holds for the
// current call; the guest copies it out with [ImportTake].
package abi

// Version is the ABI version described by this package. A module whose
// [ExportABIVersion] returns another number refuses to load.
const Version = 1

// Names of the functions a connector module exports.
const (
	// ExportABIVersion is `connhost_abi_version() -> i32`.
	ExportABIVersion = "connhost_abi_version"
	// ExportAlloc is `connhost_alloc(size i32) -> ptr i32`: a guest buffer
	// of at least size bytes the host writes call inputs into. The buffer
	// stays valid, at the same address, until the next connhost_alloc: the
	// host reuses it for every call whose input fits and calls
	// connhost_alloc again only for a larger input (one guest entry per
	// call instead of two).
	ExportAlloc = "connhost_alloc"
	// ExportDescribe is `connhost_describe() -> i64` (packed ptr/len of a
	// JSON Description).
	ExportDescribe = "connhost_describe"
	// ExportExecute is
	// `connhost_execute(op_ptr, op_len, args_ptr, args_len i32) -> i64`.
	ExportExecute = "connhost_execute"
	// ExportExecuteWithKey is `connhost_execute_with_key(op_ptr, op_len,
	// key_ptr, key_len, args_ptr, args_len i32) -> i64`. See RATIONALE.md,
	// "Why is the idempotency key an export argument?".
	ExportExecuteWithKey = "connhost_execute_with_key"
	// ExportReconcile is `connhost_reconcile(op_ptr, op_len, key_ptr,
	// key_len, args_ptr, args_len i32) -> i64`.
	ExportReconcile = "connhost_reconcile"
	// ExportInitialize is the wasip1 reactor initializer the Go toolchain
	// emits for -buildmode=c-shared; the host runs it once per instance.
	ExportInitialize = "_initialize"
)

// HostModule is the import module name of the host functions.
const HostModule = "connhost"

// Names of the host functions, all in [HostModule].
const (
	// ImportLog is `log(level i32, msg_ptr, msg_len i32)`. Level is one of
	// the Level* constants. The host tags the record with connector,
	// operation and execution id.
	ImportLog = "log"
	// ImportConfigGet is `config_get(key_ptr, key_len i32) -> i32`: the
	// length of the value now pending for [ImportTake], or a negative
	// Status* code ([StatusNotDeclared], [StatusNotSet]).
	ImportConfigGet = "config_get"
	// ImportHTTPRequest is `http_request(req_ptr, req_len i32) -> i32`: the
	// request is an [HTTPRequest] envelope; the result is the length of the
	// [HTTPResponse] envelope now pending for [ImportTake], or
	// [StatusBadRequest] when the envelope does not decode. Denials,
	// timeouts and network errors are reported inside the response
	// envelope.
	ImportHTTPRequest = "http_request"
	// ImportTake is `take(out_ptr, out_cap i32) -> i32`: copies the pending
	// value into guest memory and clears it. Returns the number of bytes
	// copied, or [StatusNothingPending], or [StatusTooSmall] (the value
	// stays pending) when out_cap is smaller than the value.
	ImportTake = "take"
	// ImportNow is `now() -> i64`: wall-clock time in Unix nanoseconds.
	ImportNow = "now"
	// ImportSleep is `sleep(nanos i64) -> i32`: sleeps, but never past the
	// call's deadline. Returns 0 when it slept the full duration and
	// [StatusDeadline] when the deadline or a cancellation cut it short.
	ImportSleep = "sleep"
	// ImportExecutionID is `execution_id() -> i32`: the length of the
	// current call's execution id, now pending for [ImportTake].
	ImportExecutionID = "execution_id"
)

// Status codes returned by host functions (negative i32).
const (
	StatusNotDeclared    = -1 // config key not declared in the manifest
	StatusNotSet         = -2 // config key declared but no value configured
	StatusBadRequest     = -3 // the request envelope did not decode
	StatusNothingPending = -4 // take called with no pending value
	StatusTooSmall       = -5 // take buffer smaller than the pending value
	StatusDeadline       = -6 // sleep cut short by the call's deadline
)

// Log levels for [ImportLog].
const (
	LevelDebug = -4
	LevelInfo  = 0
	LevelWarn  = 4
	LevelError = 8
)

// PackPtrLen packs a guest pointer and length into the i64 an export returns:
// pointer in the high 32 bits, length in the low 32 bits.
func PackPtrLen(ptr, size uint32) uint64 { return uint64(ptr)<<32 | uint64(size) }

// UnpackPtrLen is the inverse of [PackPtrLen].
func UnpackPtrLen(v uint64) (ptr, size uint32) { return uint32(v >> 32), uint32(v) }
