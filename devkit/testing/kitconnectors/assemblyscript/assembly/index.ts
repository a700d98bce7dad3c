// payments, written again in AssemblyScript on @connhost/guest: the
// shipped payments connector's operations (manifests/payments.toml)
// against the Stripe API, proven by the same crashtest cells as the Go
// original.
//
//   create_payment  executeWithKey     idempotent-retry (Idempotency-Key)
//   refund_payment  executeWithKey +   reconcile (lists the intent's
//                   reconcile          refunds, finds metadata[connhost_key])
//   get_payment     execute            read
import { register, Operation, Call, Outcome, HttpRequest, HttpResponse, HttpError, Args, JsonObject, JsonValue, Form, pathEscape } from "@connhost/guest";
export * from "@connhost/guest/exports";

const META_KEY = "connhost_key";

register([
  Operation.named("create_payment").withExecuteWithKey(createPayment),
  Operation.named("refund_payment").withExecuteWithKey(refundPayment).withReconcile(reconcileRefund),
  Operation.named("get_payment").withExecute(getPayment),
]);

// Sends a Stripe request: base_url (default api.stripe.com) and api_key
// from config, the form body, and the call's key as Idempotency-Key.
function stripe(c: Call, method: string, path: string, form: Form | null, key: string): HttpResponse {
  let base = c.config("base_url");
  if (base == null || base.length == 0) base = "https://api.stripe.com";
  const apiKey = c.config("api_key");
  if (apiKey == null) return new HttpResponse(HttpError.Invalid, "config api_key has no value");
  const req = new HttpRequest(method, base! + path)
    .header("Authorization", "Bearer " + apiKey!)
    .header("Stripe-Version", "2024-06-20");
  if (form != null) {
    req.header("Content-Type", "application/x-www-form-urlencoded");
    req.body = form.encode();
  }
  if (key.length > 0) req.header("Idempotency-Key", key);
  return c.http(req);
}

function withMetadata(c: Call, form: Form): Form {
  const id = c.executionId();
  if (id.length > 0) form.add("metadata[connhost_execution_id]", id);
  return form.add("metadata[" + META_KEY + "]", c.key);
}

function createPayment(c: Call, args: Uint8Array): Outcome {
  const a = Args.parse(args);
  const amount = a.i64("amount");
  const currency = a.str("currency");
  const method = a.str("payment_method");
  const description = a.optStr("description");
  const email = a.optStr("customer_email");
  const err = a.finish();
  if (err != null) return Outcome.permanent("create_payment: invalid arguments: " + err);
  const form = new Form().add("amount", amount.toString()).add("confirm", "true").add("currency", currency.toLowerCase());
  if (description != null && description.length > 0) form.add("description", description);
  withMetadata(c, form).add("payment_method", method).add("payment_method_types[]", "card");
  if (email != null && email.length > 0) form.add("receipt_email", email);
  const resp = stripe(c, "POST", "/v1/payment_intents", form, c.key);
  const failed = resp.failure("create_payment: stripe", true);
  if (failed != null) return failed;
  const pi = resp.json();
  // A 2xx we cannot read may well be a created PaymentIntent.
  if (pi == null || !pi.strOf("id").startsWith("pi_")) return Outcome.uncertain("create_payment: unreadable 2xx response from Stripe");
  return Outcome.ok(new JsonObject().str("payment_intent", pi.strOf("id")).str("status", pi.strOf("status"))
    .int("amount", pi.i64Of("amount")).str("currency", pi.strOf("currency")).build(), pi.strOf("id"));
}

function refundResult(r: JsonValue): string {
  return new JsonObject().str("refund", r.strOf("id")).str("status", r.strOf("status")).int("amount", r.i64Of("amount"))
    .str("currency", r.strOf("currency")).str("payment_intent", r.strOf("payment_intent")).build();
}

function refundPayment(c: Call, args: Uint8Array): Outcome {
  const a = Args.parse(args);
  const intent = a.str("payment_intent");
  const amount = a.optI64("amount", 0);
  const reason = a.optStr("reason");
  const err = a.finish();
  if (err != null) return Outcome.permanent("refund_payment: invalid arguments: " + err);
  const form = new Form();
  if (amount > 0) form.add("amount", amount.toString());
  withMetadata(c, form).add("payment_intent", intent);
  if (reason != null && reason.length > 0) form.add("reason", reason);
  const resp = stripe(c, "POST", "/v1/refunds", form, c.key);
  const failed = resp.failure("refund_payment: stripe", true);
  if (failed != null) return failed;
  const r = resp.json();
  if (r == null || !r.strOf("id").startsWith("re_")) return Outcome.uncertain("refund_payment: unreadable 2xx response from Stripe");
  return Outcome.ok(refundResult(r), r.strOf("id"));
}

// Lists the intent's refunds (a list reads its own writes, unlike search):
// one carrying this call's key -> applied; the whole list read and none ->
// not applied; anything else -> unknown.
function reconcileRefund(c: Call, args: Uint8Array): Outcome {
  const a = Args.parse(args);
  const intent = a.str("payment_intent");
  a.optI64("amount", 0);
  a.optStr("reason");
  const err = a.finish();
  if (err != null) return Outcome.unknown("refund_payment reconcile: recorded arguments: " + err);
  let after = "";
  let seen = 0;
  for (let page = 0; page < 10; page++) {
    const q = new Form().add("limit", "100").add("payment_intent", intent);
    if (after.length > 0) q.add("starting_after", after);
    const resp = stripe(c, "GET", "/v1/refunds?" + q.encode(), null, "");
    const failed = resp.failure("refund_payment reconcile", false);
    if (failed != null) return Outcome.unknown(failed.error);
    const list = resp.json();
    const data: JsonValue | null = list != null ? list.get("data") : null;
    const more: JsonValue | null = list != null ? list.get("has_more") : null;
    if (data == null || more == null) return Outcome.unknown("refund_payment reconcile: unreadable refund list");
    const refunds = data!.asArray();
    seen += refunds.length;
    for (let i = 0; i < refunds.length; i++) {
      const meta = refunds[i].get("metadata");
      if (meta != null && meta.strOf(META_KEY) == c.key) return Outcome.applied(refundResult(refunds[i]), refunds[i].strOf("id"));
    }
    if (!more!.b) return Outcome.notApplied("refund_payment reconcile: none of the " + seen.toString() + " refunds of " + intent + " carries this key");
    if (refunds.length == 0) return Outcome.unknown("refund_payment reconcile: Stripe reported more refunds after an empty page");
    after = refunds[refunds.length - 1].strOf("id");
  }
  return Outcome.unknown("refund_payment reconcile: " + intent + " has more than 1000 refunds; not searched further");
}

function getPayment(c: Call, args: Uint8Array): Outcome {
  const a = Args.parse(args);
  const id = a.str("payment_intent");
  const err = a.finish();
  if (err != null) return Outcome.permanent("get_payment: invalid arguments: " + err);
  const resp = stripe(c, "GET", "/v1/payment_intents/" + pathEscape(id), null, "");
  const failed = resp.failure("get_payment: stripe", false);
  if (failed != null) return failed;
  const pi = resp.json();
  if (pi == null) return Outcome.permanent("get_payment: unreadable response from Stripe");
  const desc = pi.get("description");
  return Outcome.ok(new JsonObject().str("id", pi.strOf("id")).str("status", pi.strOf("status")).int("amount", pi.i64Of("amount"))
    .int("amount_received", pi.i64Of("amount_received")).str("currency", pi.strOf("currency"))
    .optStr("description", desc != null && desc.isString() ? desc.asString() : null).int("created", pi.i64Of("created")).build(), pi.strOf("id"));
}
