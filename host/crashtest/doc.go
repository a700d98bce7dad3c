// Package crashtest crash-tests a connector's declared recovery policies
// against its own provider, with real process kills: the fault-injection
// matrix of connhost's design, for any connector.
//
// For every crash point × operation × approval variant (a "cell") Run
// drives one tool call through separate connhost processes the way an
// agent runtime would, with CONNHOST_CRASH_AT set so that a process
// SIGKILLs itself at the point; it restarts connhost on the same data
// directory (opening runs recovery), drives the call to a final status and
// judges what the provider saw against the operation's declared policy: a
// duplicate effect, a lost call, a manual call re-executed, a recovery
// decision other than the policy's, a receipt naming nothing. With a
// provider that can hold a request, the row PointInFlight kills the host
// while the provider still processes the call, for longer than the host's
// whole retry budget. The connector's module runs unchanged; only the
// provider is a test instance.
//
// `connhost crashtest --provider-url URL` runs the same matrix from the
// command line; a connector's own module can run it from its tests:
//
//	bin, err := crashtest.BuildConnhost(ctx, t.TempDir())
//	digest, err := crashtest.BuildModule(ctx, "./plugins/webhook", filepath.Join(dir, "webhook.wasm"))
//	rep, err := crashtest.Run(ctx, crashtest.Options{
//		Binary:      bin,
//		Manifest:    "manifests/webhook.toml",
//		Module:      filepath.Join(dir, "webhook.wasm"),
//		ProviderURL: srv.URL,                  // the test provider
//		Provider:    crashtest.NewProbe(srv.URL + "/_crashtest"),
//	})
//	for _, row := range rep.Failed() { t.Errorf("%s × %s: %s", row.Point, row.Operation, row.Problem) }
//
// # The probe contract
//
// The matrix judges by what the provider holds, so the test provider
// answers a few questions over HTTP, under a prefix of its choosing (the
// probe URL; connhost crashtest's default is the provider URL followed by
// /_crashtest). Every answer is JSON.
//
//	GET  {probe}/effects              200 {"effects": N}
//	     Required. N is how many effects the provider has applied so far,
//	     in total (deliveries stored, charges made, messages sent), read
//	     after write. The matrix takes the difference before and after a
//	     cell, so cells run one at a time.
//	GET  {probe}/receipts/{receipt}   200 {"exists": true|false}
//	     Optional (404 on the route: receipts are not checked). Whether the
//	     object a succeeded call's receipt names exists.
//	GET  {probe}/args/{operation}     200 {…sample arguments…}
//	     Optional (404: give the operation's arguments in Options.Args).
//	     Arguments for one call; it may create what they refer to (a read
//	     names an object that exists). Called before the effect count of
//	     each cell is taken.
//	POST {probe}/hold                 {"operation": "deliver"} → 204
//	     Optional (404 or 501: the in-flight row is n/a). Hold the next
//	     effectful request of the operation: receive it and keep it, not
//	     yet applied, until released.
//	GET  {probe}/held                 200 {"held": N}
//	     Requests held now (required with hold).
//	POST {probe}/release              204
//	     Let held requests go on and take effect, whether or not their
//	     client is still there (required with hold).
//
// The webhook fixture in testdata/webhook is a connector of its own module
// with a provider that serves this contract; its deliberately broken
// variants (a fresh key per attempt; reconcile answering not_applied
// without looking) are what the matrix catches.
package crashtest
