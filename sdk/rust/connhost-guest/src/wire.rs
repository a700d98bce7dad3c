//! Outcomes and HTTP messages, and their binary envelopes (docs/abi.md,
//! Binary envelopes).

/// An outcome kind (docs/abi.md, Outcome envelope).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The operation took effect (a read answered).
    Ok = 1,
    /// This attempt did not take effect; it may be tried again.
    RetryableError = 2,
    /// It did not take effect, and retrying cannot help.
    PermanentError = 3,
    /// Reconcile: the original call took effect.
    Applied = 4,
    /// Reconcile: authoritative evidence that no attempt took effect.
    NotApplied = 5,
    /// Reconcile: cannot decide.
    Unknown = 6,
    /// The attempt may have taken effect.
    Uncertain = 7,
    /// The provider is still processing an earlier request with this key.
    InProgress = 8,
}

/// What an operation answers. Build it with the constructors: each says
/// what it promises about the effect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The kind.
    pub kind: Kind,
    /// The JSON result (empty when there is none).
    pub result: Vec<u8>,
    /// The external object the call created or found, or "".
    pub receipt: String,
    /// A message for error and unknown kinds.
    pub error: String,
}

impl Outcome {
    fn with(kind: Kind, result: Vec<u8>, receipt: &str, error: String) -> Outcome {
        Outcome { kind, result, receipt: receipt.to_string(), error }
    }
    /// The operation took effect: `result` is its JSON result (bytes of
    /// JSON text, e.g. from [`crate::json::Object`]), `receipt` names the
    /// external object, if any.
    pub fn ok(result: impl Into<Vec<u8>>, receipt: &str) -> Outcome {
        Outcome::with(Kind::Ok, result.into(), receipt, String::new())
    }
    /// Reconcile found the original call's effect: the result and receipt
    /// the call would have returned.
    pub fn applied(result: impl Into<Vec<u8>>, receipt: &str) -> Outcome {
        Outcome::with(Kind::Applied, result.into(), receipt, String::new())
    }
    /// This attempt did not take effect and may be retried (a rate limit,
    /// a refusal before the provider acted, a request never sent). When
    /// the request may have been acted on, it is [`Outcome::uncertain`].
    pub fn retryable(msg: impl Into<String>) -> Outcome {
        Outcome::with(Kind::RetryableError, Vec::new(), "", msg.into())
    }
    /// Nothing took effect and retrying the same input cannot help.
    pub fn permanent(msg: impl Into<String>) -> Outcome {
        Outcome::with(Kind::PermanentError, Vec::new(), "", msg.into())
    }
    /// The attempt may have taken effect (sent, and the answer lost, timed
    /// out, or a 5xx to a POST): the host applies the recovery policy.
    pub fn uncertain(msg: impl Into<String>) -> Outcome {
        Outcome::with(Kind::Uncertain, Vec::new(), "", msg.into())
    }
    /// The provider is still processing an earlier request with this key
    /// (a 409): the host waits and asks again, never fails the call.
    pub fn in_progress(msg: impl Into<String>) -> Outcome {
        Outcome::with(Kind::InProgress, Vec::new(), "", msg.into())
    }
    /// Reconcile: authoritative evidence that the call had no effect.
    pub fn not_applied(msg: impl Into<String>) -> Outcome {
        Outcome::with(Kind::NotApplied, Vec::new(), "", msg.into())
    }
    /// Reconcile cannot decide.
    pub fn unknown(msg: impl Into<String>) -> Outcome {
        Outcome::with(Kind::Unknown, Vec::new(), "", msg.into())
    }

    /// The envelope: tag 0xC1, kind, result, receipt, error.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.clear();
        out.push(0xC1);
        out.push(self.kind as u8);
        put_bytes(out, &self.result);
        put_bytes(out, self.receipt.as_bytes());
        put_bytes(out, self.error.as_bytes());
    }
}

/// One header field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The field's name.
    pub name: String,
    /// The field's value.
    pub value: String,
}

/// An HTTP request the host sends for the connector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpRequest {
    /// GET, POST, …
    pub method: String,
    /// An absolute URL.
    pub url: String,
    /// Header fields, in order.
    pub headers: Vec<Header>,
    /// The body (may be empty).
    pub body: Vec<u8>,
    /// Bounds this request; 0 means the call's deadline.
    pub timeout_millis: u32,
}

impl HttpRequest {
    /// A request with method and url, no headers and no body.
    pub fn new(method: &str, url: impl Into<String>) -> HttpRequest {
        HttpRequest { method: method.to_string(), url: url.into(), headers: Vec::new(), body: Vec::new(), timeout_millis: 0 }
    }
    /// A GET request.
    pub fn get(url: impl Into<String>) -> HttpRequest {
        HttpRequest::new("GET", url)
    }
    /// A POST request with a body.
    pub fn post(url: impl Into<String>, body: impl Into<Vec<u8>>) -> HttpRequest {
        let mut r = HttpRequest::new("POST", url);
        r.body = body.into();
        r
    }
    /// Adds a header field.
    pub fn header(mut self, name: &str, value: &str) -> HttpRequest {
        self.headers.push(Header { name: name.to_string(), value: value.to_string() });
        self
    }
    /// The envelope: tag 0xD1, method, url, headers, body, timeout.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(32 + self.url.len() + self.body.len());
        out.push(0xD1);
        put_bytes(&mut out, self.method.as_bytes());
        put_bytes(&mut out, self.url.as_bytes());
        put_headers(&mut out, &self.headers);
        put_bytes(&mut out, &self.body);
        out.extend_from_slice(&self.timeout_millis.to_le_bytes());
        out
    }
}

/// Why the host did not complete a request (docs/abi.md, HTTP error codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HttpError {
    /// A response was received (any status).
    Ok = 0,
    /// The target is not in the manifest's capabilities.http: nothing was sent.
    Denied = 1,
    /// The request or the call's deadline ran out: it may have been acted on.
    Timeout = 2,
    /// DNS, connect, TLS or read failure: it may have been acted on.
    Network = 3,
    /// A body over the host's caps.
    TooLarge = 4,
    /// A malformed method, URL or header: nothing was sent.
    Invalid = 5,
}

/// The host's answer to an [`HttpRequest`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpResponse {
    /// [`HttpError::Ok`] when status, headers and body hold a response.
    pub err: HttpError,
    /// Why, when err is not Ok.
    pub message: String,
    /// The HTTP status.
    pub status: u32,
    /// Header fields (canonical names, sorted).
    pub headers: Vec<Header>,
    /// The body.
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// A response the host did not complete.
    pub fn failed(err: HttpError, message: impl Into<String>) -> HttpResponse {
        HttpResponse { err, message: message.into(), status: 0, headers: Vec::new(), body: Vec::new() }
    }
    /// The first value of the named header (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|h| h.name.eq_ignore_ascii_case(name)).map(|h| h.value.as_str())
    }
    /// True for a received response with a 2xx status.
    pub fn success(&self) -> bool {
        self.err == HttpError::Ok && (200..300).contains(&self.status)
    }
    /// The outcome a response that is not a 2xx proves, or None for a 2xx.
    /// `mutating` says whether the request may change the provider's
    /// state: then every answer that leaves the effect open is
    /// [`Outcome::uncertain`] (timeout, network error, 5xx), and a 409 is
    /// [`Outcome::in_progress`]. A denial or an invalid request was never
    /// sent: permanent. A 429 is retryable; any other status permanent.
    /// `what` starts the message (e.g. the operation's name).
    pub fn failure(&self, what: &str, mutating: bool) -> Option<Outcome> {
        let open = |m: String| if mutating { Outcome::uncertain(m) } else { Outcome::retryable(m) };
        match self.err {
            HttpError::Ok => {}
            HttpError::Denied | HttpError::Invalid => {
                return Some(Outcome::permanent(format!("{}: {:?}: {}", what, self.err, self.message)))
            }
            _ => return Some(open(format!("{}: {:?}: {}", what, self.err, self.message))),
        }
        let body = String::from_utf8_lossy(&self.body[..self.body.len().min(300)]).into_owned();
        match self.status {
            200..=299 => None,
            409 if mutating => Some(Outcome::in_progress(format!("{}: the provider is still processing this key: {}", what, body))),
            429 => Some(Outcome::retryable(format!("{}: rate limited: {}", what, body))),
            500..=599 => Some(open(format!("{}: provider error {}: {}", what, self.status, body))),
            s => Some(Outcome::permanent(format!("{}: status {}: {}", what, s, body))),
        }
    }
    /// Decodes the envelope (tag 0xD2).
    pub fn decode(b: &[u8]) -> Result<HttpResponse, String> {
        let mut r = Reader { b, at: 0 };
        if r.u8()? != 0xD2 {
            return Err("http response: bad tag".to_string());
        }
        let err = match r.u8()? {
            0 => HttpError::Ok,
            1 => HttpError::Denied,
            2 => HttpError::Timeout,
            3 => HttpError::Network,
            4 => HttpError::TooLarge,
            5 => HttpError::Invalid,
            n => return Err(format!("http response: unknown error code {}", n)),
        };
        let message = r.string()?;
        let status = r.u32()?;
        let n = r.u32()?;
        if n > 256 {
            return Err("http response: too many header fields".to_string());
        }
        let mut headers = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let name = r.string()?;
            let value = r.string()?;
            headers.push(Header { name, value });
        }
        let body = r.bytes()?.to_vec();
        if r.at != b.len() {
            return Err("http response: trailing bytes".to_string());
        }
        Ok(HttpResponse { err, message, status, headers, body })
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

fn put_headers(out: &mut Vec<u8>, h: &[Header]) {
    out.extend_from_slice(&(h.len() as u32).to_le_bytes());
    for f in h {
        put_bytes(out, f.name.as_bytes());
        put_bytes(out, f.value.as_bytes());
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.b.len() - self.at < n {
            return Err("envelope truncated".to_string());
        }
        let v = &self.b[self.at..self.at + n];
        self.at += n;
        Ok(v)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, String> {
        let v = self.take(4)?;
        Ok(u32::from_le_bytes([v[0], v[1], v[2], v[3]]))
    }
    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    fn string(&mut self) -> Result<String, String> {
        Ok(String::from_utf8_lossy(self.bytes()?).into_owned())
    }
}
