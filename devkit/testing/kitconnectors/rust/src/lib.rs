//! payments, written again in Rust on the connhost-guest kit: the shipped
//! payments connector's operations (manifests/payments.toml) against the
//! Stripe API, proven by the same crashtest cells as the Go original.
//!
//!   create_payment  execute_with_key     idempotent-retry (Idempotency-Key)
//!   refund_payment  execute_with_key +   reconcile (lists the intent's
//!                   reconcile            refunds, finds metadata[connhost_key])
//!   get_payment     execute              read

use connhost_guest::form::{path_escape, Form};
use connhost_guest::json::{self, Args, Json};
use connhost_guest::{Call, HttpRequest, HttpResponse, Outcome};

connhost_guest::operations! {
    "create_payment" => { execute_with_key: create_payment },
    "refund_payment" => { execute_with_key: refund_payment, reconcile: reconcile_refund },
    "get_payment" => { execute: get_payment },
}

const META_KEY: &str = "connhost_key";

/// Sends a Stripe request: base_url (default api.stripe.com) and api_key
/// from config, the form body, and the call's key as Idempotency-Key.
fn stripe(c: &mut Call, method: &str, path: &str, form: Option<Form>, key: &str) -> Result<HttpResponse, String> {
    let base = c.config("base_url").ok().filter(|b| !b.is_empty()).unwrap_or_else(|| "https://api.stripe.com".to_string());
    let api_key = c.config("api_key").map_err(|e| e.to_string())?;
    let mut req = HttpRequest::new(method, base.trim_end_matches('/').to_string() + path)
        .header("Authorization", &format!("Bearer {}", api_key))
        .header("Stripe-Version", "2024-06-20");
    if let Some(f) = form {
        req = req.header("Content-Type", "application/x-www-form-urlencoded");
        req.body = f.encode().into_bytes();
    }
    if !key.is_empty() {
        req = req.header("Idempotency-Key", key);
    }
    Ok(c.http(&req))
}

fn with_metadata(c: &mut Call, form: Form) -> Form {
    let id = c.execution_id();
    let form = if id.is_empty() { form } else { form.add("metadata[connhost_execution_id]", &id) };
    form.add("metadata[connhost_key]", c.key)
}

fn create_payment(c: &mut Call, args: &[u8]) -> Outcome {
    let parsed = Args::parse(args).and_then(|mut a| {
        let v = (a.i64("amount")?, a.str("currency")?, a.str("payment_method")?, a.opt_str("description")?, a.opt_str("customer_email")?);
        a.finish().map(|_| v)
    });
    let (amount, currency, method, description, email) = match parsed {
        Ok(v) => v,
        Err(e) => return Outcome::permanent(format!("create_payment: invalid arguments: {}", e)),
    };
    let mut form = Form::new().add("amount", &amount.to_string()).add("confirm", "true").add("currency", &currency.to_lowercase());
    if let Some(d) = description.filter(|d| !d.is_empty()) {
        form = form.add("description", &d);
    }
    form = with_metadata(c, form).add("payment_method", &method).add("payment_method_types[]", "card");
    if let Some(e) = email.filter(|e| !e.is_empty()) {
        form = form.add("receipt_email", &e);
    }
    let key = c.key.to_string();
    let resp = match stripe(c, "POST", "/v1/payment_intents", Some(form), &key) {
        Ok(r) => r,
        Err(e) => return Outcome::permanent(format!("create_payment: {}", e)),
    };
    if let Some(failed) = resp.failure("create_payment: stripe", true) {
        return failed;
    }
    match json::parse(&resp.body) {
        Ok(pi) if pi.str_of("id").starts_with("pi_") => Outcome::ok(payment_result(&pi), pi.str_of("id")),
        // A 2xx we cannot read may well be a created PaymentIntent.
        _ => Outcome::uncertain("create_payment: unreadable 2xx response from Stripe"),
    }
}

fn payment_result(pi: &Json) -> Vec<u8> {
    json::Object::new()
        .str("payment_intent", pi.str_of("id"))
        .str("status", pi.str_of("status"))
        .int("amount", pi.i64_of("amount"))
        .str("currency", pi.str_of("currency"))
        .build()
}

fn refund_args(args: &[u8]) -> Result<(String, Option<i64>, Option<String>), String> {
    let mut a = Args::parse(args)?;
    let v = (a.str("payment_intent")?, a.opt_i64("amount")?, a.opt_str("reason")?);
    a.finish()?;
    Ok(v)
}

fn refund_result(r: &Json) -> Vec<u8> {
    json::Object::new()
        .str("refund", r.str_of("id"))
        .str("status", r.str_of("status"))
        .int("amount", r.i64_of("amount"))
        .str("currency", r.str_of("currency"))
        .str("payment_intent", r.str_of("payment_intent"))
        .build()
}

fn refund_payment(c: &mut Call, args: &[u8]) -> Outcome {
    let (intent, amount, reason) = match refund_args(args) {
        Ok(v) => v,
        Err(e) => return Outcome::permanent(format!("refund_payment: invalid arguments: {}", e)),
    };
    let mut form = Form::new();
    if let Some(a) = amount {
        form = form.add("amount", &a.to_string());
    }
    form = with_metadata(c, form).add("payment_intent", &intent);
    if let Some(r) = reason.filter(|r| !r.is_empty()) {
        form = form.add("reason", &r);
    }
    let key = c.key.to_string();
    let resp = match stripe(c, "POST", "/v1/refunds", Some(form), &key) {
        Ok(r) => r,
        Err(e) => return Outcome::permanent(format!("refund_payment: {}", e)),
    };
    if let Some(failed) = resp.failure("refund_payment: stripe", true) {
        return failed;
    }
    match json::parse(&resp.body) {
        Ok(r) if r.str_of("id").starts_with("re_") => Outcome::ok(refund_result(&r), r.str_of("id")),
        _ => Outcome::uncertain("refund_payment: unreadable 2xx response from Stripe"),
    }
}

/// Lists the intent's refunds (a list reads its own writes, unlike
/// search): one carrying this call's key -> applied; the whole list read
/// and none -> not applied; anything else -> unknown.
fn reconcile_refund(c: &mut Call, args: &[u8]) -> Outcome {
    let intent = match refund_args(args) {
        Ok(v) => v.0,
        Err(e) => return Outcome::unknown(format!("refund_payment reconcile: recorded arguments: {}", e)),
    };
    let (mut after, mut seen) = (String::new(), 0);
    for _ in 0..10 {
        let mut q = Form::new().add("limit", "100").add("payment_intent", &intent);
        if !after.is_empty() {
            q = q.add("starting_after", &after);
        }
        let resp = match stripe(c, "GET", &format!("/v1/refunds?{}", q.encode()), None, "") {
            Ok(r) => r,
            Err(e) => return Outcome::unknown(format!("refund_payment reconcile: {}", e)),
        };
        if let Some(failed) = resp.failure("refund_payment reconcile", false) {
            return Outcome::unknown(failed.error);
        }
        let list = match json::parse(&resp.body) {
            Ok(l) => l,
            Err(e) => return Outcome::unknown(format!("refund_payment reconcile: unreadable refund list: {}", e)),
        };
        let (data, more) = match (list.get("data").and_then(Json::as_array), list.get("has_more").and_then(Json::as_bool)) {
            (Some(d), Some(m)) => (d, m),
            _ => return Outcome::unknown("refund_payment reconcile: unreadable refund list"),
        };
        seen += data.len();
        if let Some(r) = data.iter().find(|r| r.get("metadata").map(|m| m.str_of(META_KEY)) == Some(c.key)) {
            return Outcome::applied(refund_result(r), r.str_of("id"));
        }
        if !more {
            return Outcome::not_applied(format!("refund_payment reconcile: none of the {} refunds of {} carries this key", seen, intent));
        }
        match data.last() {
            Some(r) => after = r.str_of("id").to_string(),
            None => return Outcome::unknown("refund_payment reconcile: Stripe reported more refunds after an empty page"),
        }
    }
    Outcome::unknown(format!("refund_payment reconcile: {} has more than 1000 refunds; not searched further", intent))
}

fn get_payment(c: &mut Call, args: &[u8]) -> Outcome {
    let id = match Args::parse(args).and_then(|mut a| {
        let id = a.str("payment_intent")?;
        a.finish().map(|_| id)
    }) {
        Ok(id) => id,
        Err(e) => return Outcome::permanent(format!("get_payment: invalid arguments: {}", e)),
    };
    let resp = match stripe(c, "GET", &format!("/v1/payment_intents/{}", path_escape(&id)), None, "") {
        Ok(r) => r,
        Err(e) => return Outcome::permanent(format!("get_payment: {}", e)),
    };
    if let Some(failed) = resp.failure("get_payment: stripe", false) {
        return failed;
    }
    let pi = match json::parse(&resp.body) {
        Ok(pi) => pi,
        Err(e) => return Outcome::permanent(format!("get_payment: unreadable response from Stripe: {}", e)),
    };
    let view = json::Object::new()
        .str("id", pi.str_of("id"))
        .str("status", pi.str_of("status"))
        .int("amount", pi.i64_of("amount"))
        .int("amount_received", pi.i64_of("amount_received"))
        .str("currency", pi.str_of("currency"))
        .opt_str("description", pi.get("description").and_then(Json::as_str))
        .int("created", pi.i64_of("created"))
        .build();
    Outcome::ok(view, pi.str_of("id"))
}
