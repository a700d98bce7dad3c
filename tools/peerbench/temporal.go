package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
)

// openTemporal runs a Temporal server in this process, as the Temporal
// CLI's development server does (its four services, one history shard),
// on a SQLite file on the disk under test with SQLite's defaults
// (rollback journal, synchronous FULL) unless --temporal-sqlite-pragmas
// says otherwise, and a worker beside it. One
// execution is a workflow with one activity, started and awaited through
// the client.
func openTemporal(ctx context.Context, e *env) (func(context.Context) error, func(), error) {
	ports, err := freePorts(5)
	if err != nil {
		return nil, nil, err
	}
	const ip, cluster_ = "127.0.0.1", "active"
	front := ports[0]
	sqlConf := &config.SQL{PluginName: sqliteplugin.PluginName, DatabaseName: filepath.Join(e.dir, "temporal.db"),
		ConnectAttributes: map[string]string{"mode": "rwc"}}
	for _, kv := range strings.Split(e.temporalPragmas, ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(kv), "="); ok {
			sqlConf.ConnectAttributes[k] = v
		} else if kv != "" {
			return nil, nil, fmt.Errorf("temporal: --temporal-sqlite-pragmas: %q is not key=value", kv)
		}
	}
	if err := sqliteschema.SetupSchema(sqlConf); err != nil {
		return nil, nil, fmt.Errorf("temporal: sqlite schema: %w", err)
	}
	ns, err := sqliteschema.NewNamespaceConfig(cluster_, "default", false, nil)
	if err != nil {
		return nil, nil, err
	}
	if err := sqliteschema.CreateNamespaces(sqlConf, ns); err != nil {
		return nil, nil, err
	}
	var conf config.Config
	conf.Global.Membership.MaxJoinDuration = 30 * time.Second
	conf.Global.Membership.BroadcastAddress = ip
	conf.Persistence.DefaultStore = "sqlite"
	conf.Persistence.VisibilityStore = "sqlite"
	conf.Persistence.NumHistoryShards = 1
	conf.Persistence.DataStores = map[string]config.DataStore{"sqlite": {SQL: sqlConf}}
	conf.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: 10, MasterClusterName: cluster_, CurrentClusterName: cluster_,
		ClusterInformation: map[string]cluster.ClusterInformation{cluster_: {Enabled: true, InitialFailoverVersion: 1,
			RPCAddress: fmt.Sprintf("%s:%d", ip, front), HTTPAddress: fmt.Sprintf("%s:%d", ip, ports[4]), ClusterID: "peerbench"}},
	}
	conf.DCRedirectionPolicy.Policy = "noop"
	svc := func(grpc, http int) config.Service {
		var s config.Service
		s.RPC.GRPCPort, s.RPC.HTTPPort, s.RPC.BindOnIP = grpc, http, ip
		return s
	}
	conf.Services = map[string]config.Service{
		"frontend": svc(front, ports[4]), "history": svc(ports[1], 0), "matching": svc(ports[2], 0), "worker": svc(ports[3], 0),
	}
	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	conf.PublicClient.HostPort = fmt.Sprintf("%s:%d", ip, front)
	host := func(p int) static.Hosts { return static.SingleLocalHost(fmt.Sprintf("%s:%d", ip, p)) }
	srv, err := temporal.NewServer(
		temporal.WithConfig(&conf),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(map[primitives.ServiceName]static.Hosts{
			primitives.FrontendService: host(front), primitives.HistoryService: host(ports[1]),
			primitives.MatchingService: host(ports[2]), primitives.WorkerService: host(ports[3]),
		}),
		temporal.WithLogger(log.NewNoopLogger()),
		temporal.WithDynamicConfigClient(temporalDynamicConfig()),
	)
	if err != nil {
		return nil, nil, err
	}
	if err := srv.Start(); err != nil {
		return nil, nil, err
	}
	c, err := client.Dial(client.Options{HostPort: conf.PublicClient.HostPort, Namespace: "default", Logger: nopSDKLogger{}})
	if err != nil {
		_ = srv.Stop()
		return nil, nil, err
	}
	const queue = "peerbench"
	w := worker.New(c, queue, worker.Options{})
	activity := func(_ context.Context, i int64) (int64, error) { return effect(i) }
	wf := func(ctx workflow.Context, i int64) (int64, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
		var out int64
		err := workflow.ExecuteActivity(ctx, activity, i).Get(ctx, &out)
		return out, err
	}
	w.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: "OneStep"})
	w.RegisterActivity(activity)
	if err := w.Start(); err != nil {
		c.Close()
		_ = srv.Stop()
		return nil, nil, err
	}
	stop := func() { w.Stop(); c.Close(); _ = srv.Stop() }
	var seq atomic.Int64
	op := func(ctx context.Context) error {
		i := seq.Add(1)
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprint("peerbench-", i), TaskQueue: queue}, "OneStep", i)
		if err != nil {
			return err
		}
		var out int64
		if err := run.Get(ctx, &out); err != nil {
			return err
		}
		if out != i {
			return fmt.Errorf("temporal: workflow returned %d, want %d", out, i)
		}
		return nil
	}
	return op, stop, nil
}

// temporalDynamicConfig is the CLI dev server's dynamic configuration
// (its history cache size). One task queue partition instead of the
// default four made no difference to the figures.
func temporalDynamicConfig() dynamicconfig.StaticClient {
	return dynamicconfig.StaticClient{dynamicconfig.HistoryCacheHostLevelMaxSize.Key(): 8096}
}

// nopSDKLogger silences the Temporal client and worker.
type nopSDKLogger struct{}

func (nopSDKLogger) Debug(string, ...any) {}
func (nopSDKLogger) Info(string, ...any)  {}
func (nopSDKLogger) Warn(string, ...any)  {}
func (nopSDKLogger) Error(string, ...any) {}
