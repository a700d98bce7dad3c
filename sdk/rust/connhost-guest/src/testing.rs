//! Native tests of a connector: run its operations against a fake host
//! whose HTTP answers the test gives.
//!
//! ```ignore
//! let mut h = FakeHost::new(|req| HttpResponse::json(200, r#"{"id":"it_1"}"#));
//! let o = invoke(OPERATIONS, &mut h, Export::ExecuteWithKey, "create_item", "ck_1", br#"{"name":"w"}"#);
//! assert_eq!(o.kind, Kind::Ok);
//! assert_eq!(h.sent[0].url, "https://api.example.com/v1/items");
//! ```

use crate::{dispatch, Export, Header, Host, HttpError, HttpRequest, HttpResponse, Operation, Outcome};
use std::collections::BTreeMap;

/// A host for native tests: config values from a map, HTTP answered by a
/// function, every request and log record kept.
pub struct FakeHost {
    /// Config values by key; a key absent here is "not set".
    pub config: BTreeMap<String, String>,
    /// Answers each request.
    pub answer: Box<dyn FnMut(&HttpRequest) -> HttpResponse>,
    /// Every request sent, in order.
    pub sent: Vec<HttpRequest>,
    /// Every log record, as (level, message).
    pub logs: Vec<(i32, String)>,
    /// The execution id served.
    pub execution_id: String,
    /// The clock, in Unix nanoseconds.
    pub now: i64,
}

impl FakeHost {
    /// A host whose HTTP requests are answered by answer.
    pub fn new(answer: impl FnMut(&HttpRequest) -> HttpResponse + 'static) -> FakeHost {
        FakeHost {
            config: BTreeMap::new(),
            answer: Box::new(answer),
            sent: Vec::new(),
            logs: Vec::new(),
            execution_id: "ex_test".to_string(),
            now: 1_700_000_000_000_000_000,
        }
    }
    /// Sets a config value.
    pub fn with_config(mut self, key: &str, value: &str) -> FakeHost {
        self.config.insert(key.to_string(), value.to_string());
        self
    }
}

impl Host for FakeHost {
    fn execution_id(&mut self) -> String {
        self.execution_id.clone()
    }
    fn config(&mut self, key: &str) -> Result<String, i32> {
        self.config.get(key).cloned().ok_or(-2)
    }
    fn http(&mut self, req: &HttpRequest) -> HttpResponse {
        self.sent.push(req.clone());
        (self.answer)(req)
    }
    fn log(&mut self, level: i32, msg: &str) {
        self.logs.push((level, msg.to_string()));
    }
    fn now_unix_nanos(&mut self) -> i64 {
        self.now
    }
    fn sleep_nanos(&mut self, nanos: i64) -> bool {
        self.now += nanos.max(0);
        true
    }
}

impl HttpResponse {
    /// A received response with a JSON body.
    pub fn json(status: u32, body: &str) -> HttpResponse {
        HttpResponse {
            err: HttpError::Ok,
            message: String::new(),
            status,
            headers: vec![Header { name: "Content-Type".to_string(), value: "application/json".to_string() }],
            body: body.as_bytes().to_vec(),
        }
    }
}

/// Runs an operation's entry point on host, as the host would.
pub fn invoke(ops: &[Operation], host: &mut FakeHost, export: Export, operation: &str, key: &str, args: &[u8]) -> Outcome {
    dispatch(ops, host, export, operation, key, args)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{self, Args, Json};
    use crate::{form, Kind};

    pub fn echo(c: &mut crate::Call<'_>, args: &[u8]) -> Outcome {
        let mut a = match Args::parse(args) {
            Ok(a) => a,
            Err(e) => return Outcome::permanent(e),
        };
        let name = match a.str("name") {
            Ok(v) => v,
            Err(e) => return Outcome::permanent(e),
        };
        if let Err(e) = a.finish() {
            return Outcome::permanent(e);
        }
        let resp = c.http(
            &HttpRequest::post("https://p.example:443/x", json::Object::new().str("name", &name).build()).header("Idempotency-Key", c.key),
        );
        if let Some(f) = resp.failure("echo", true) {
            return f;
        }
        Outcome::ok(resp.body, "r1")
    }

    mod conn {
        use super::echo;
        crate::operations! { "echo" => { execute_with_key: echo } }
    }
    use conn::OPERATIONS as OPS;

    #[test]
    fn dispatch_runs_the_handler_with_the_key() {
        let mut h = FakeHost::new(|_| HttpResponse::json(200, "{\"ok\":true}"));
        let o = invoke(OPS, &mut h, Export::ExecuteWithKey, "echo", "ck_1", br#"{"name":"w<"}"#);
        assert_eq!(o.kind, Kind::Ok);
        assert_eq!(o.receipt, "r1");
        assert_eq!(h.sent[0].headers[0].value, "ck_1");
        assert_eq!(h.sent[0].body, br#"{"name":"w\u003c"}"#.to_vec());
    }

    #[test]
    fn unknown_operation_and_entry_point_are_refused_truthfully() {
        let mut h = FakeHost::new(|_| HttpResponse::json(200, "{}"));
        assert_eq!(invoke(OPS, &mut h, Export::ExecuteWithKey, "nope", "k", b"{}").kind, Kind::PermanentError);
        assert_eq!(invoke(OPS, &mut h, Export::Execute, "echo", "", b"{}").kind, Kind::PermanentError);
        assert_eq!(invoke(OPS, &mut h, Export::Reconcile, "echo", "k", b"{}").kind, Kind::Unknown);
        assert!(h.sent.is_empty());
    }

    #[test]
    fn failures_say_what_they_prove() {
        let cases: Vec<(HttpResponse, Kind)> = vec![
            (HttpResponse::failed(HttpError::Denied, "no"), Kind::PermanentError),
            (HttpResponse::failed(HttpError::Timeout, "slow"), Kind::Uncertain),
            (HttpResponse::json(500, "{}"), Kind::Uncertain),
            (HttpResponse::json(409, "{}"), Kind::InProgress),
            (HttpResponse::json(429, "{}"), Kind::RetryableError),
            (HttpResponse::json(400, "{}"), Kind::PermanentError),
        ];
        for (resp, want) in cases {
            let r = resp.clone();
            let mut h = FakeHost::new(move |_| r.clone());
            let o = invoke(OPS, &mut h, Export::ExecuteWithKey, "echo", "ck_1", br#"{"name":"w"}"#);
            assert_eq!(o.kind, want, "{:?}", resp);
        }
        // A read is never uncertain.
        assert_eq!(HttpResponse::json(503, "").failure("get", false).unwrap().kind, Kind::RetryableError);
    }

    #[test]
    fn args_are_strict() {
        let mut h = FakeHost::new(|_| HttpResponse::json(200, "{}"));
        for bad in [
            &br#"{"name":"w","idempotency_key":"k"}"#[..],
            br#"{"name":"w","name":"x"}"#,
            br#"{"name":1}"#,
            br#"{}"#,
            br#"{"name":"w"} x"#,
            b"[1]",
            b"\xff",
        ] {
            let o = invoke(OPS, &mut h, Export::ExecuteWithKey, "echo", "ck_1", bad);
            assert_eq!(o.kind, Kind::PermanentError, "{:?}", String::from_utf8_lossy(bad));
        }
        assert!(h.sent.is_empty());
    }

    #[test]
    fn json_round_trips() {
        let v = json::parse(br#" {"a":[1,-2.5e3,true,null,"x\"\u00e9\ud83d\ude00"],"b":{}} "#).unwrap();
        assert_eq!(v.get("a").unwrap().as_array().unwrap()[1].as_f64(), Some(-2500.0));
        assert_eq!(v.to_json(), "{\"a\":[1,-2.5e3,true,null,\"x\\\"é😀\"],\"b\":{}}");
        for bad in ["", "01", "1.", "\"\\ud800\"", "[1,]", "{\"a\" 1}", "tru", "\"\u{1}\""] {
            assert!(json::parse(bad.as_bytes()).is_err(), "{:?} parsed", bad);
        }
        assert_eq!(Json::Null.to_json(), "null");
    }

    #[test]
    fn envelopes_are_the_documents() {
        let mut out = Vec::new();
        Outcome::uncertain("lost").encode(&mut out);
        assert_eq!(out, [0xC1, 7, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, b'l', b'o', b's', b't']);
        let q = HttpRequest::get("u").header("A", "1").encode();
        assert_eq!(
            q,
            [0xD1, 3, 0, 0, 0, b'G', b'E', b'T', 1, 0, 0, 0, b'u', 1, 0, 0, 0, 1, 0, 0, 0, b'A', 1, 0, 0, 0, b'1', 0, 0, 0, 0, 0, 0, 0, 0]
        );
        let p = HttpResponse::decode(&[0xD2, 0, 0, 0, 0, 0, 201, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, b'{', b'}']).unwrap();
        assert_eq!((p.status, p.body.as_slice()), (201, &b"{}"[..]));
        assert!(HttpResponse::decode(&[0xD2, 0, 0, 0, 0, 0, 201, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, b'{']).is_err());
        assert_eq!(
            String::from_utf8(crate::describe(OPS)).unwrap(),
            r#"{"abi":1,"operations":[{"name":"echo","execute":false,"execute_with_key":true,"reconcile":false}]}"#
        );
    }

    #[test]
    fn form_encodes_as_go_does() {
        let f = form::Form::new().add("metadata[k]", "a b&c").add("x", "é~");
        assert_eq!(f.encode(), "metadata%5Bk%5D=a+b%26c&x=%C3%A9~");
        assert_eq!(form::path_escape("a b/c"), "a%20b%2Fc");
    }
}
