# connhost developer targets. `make test` is the command README.md and
# .ci/run use; `make check` is what a change must pass before it lands.

GO        ?= go
PKGS      ?= ./...
# Packages with real concurrency (ledger stripes, executor flights, pools,
# the server and its HTTP API): run them under the race detector too.
RACE_PKGS ?= ./ledger/... ./host/... ./internal/wasmrt/... ./server ./server/httpapi/... ./devkit/sandbox/... ./server/console/...
# clients/go is a module of its own (the ADK and Eino adapters), so that the
# core module does not take those frameworks' dependencies: test, lint and
# tidy-check run there too.
GO_CLIENTS ?= clients/go
# cmd/connhost runs connhost as real processes through every crash point;
# on a loaded 2-core machine it outlasts go test's default 10m.
TIMEOUT   ?= 40m

.PHONY: test race fmt lint check tidy-check build dist

## test: the whole suite (builds connectors and the pinned Mailpit on demand), then the race run.
test:
	$(GO) test -count=1 -timeout $(TIMEOUT) $(PKGS)
	cd $(GO_CLIENTS) && $(GO) test -count=1 -timeout $(TIMEOUT) ./...
	$(GO) test -race -count=1 -timeout $(TIMEOUT) $(RACE_PKGS)

race:
	$(GO) test -race -count=1 -timeout $(TIMEOUT) $(RACE_PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	cd $(GO_CLIENTS) && $(GO) vet ./...
	GOOS=wasip1 GOARCH=wasm $(GO) vet ./abi/... ./plugins/... ./devkit/testing/testconnectors/...

tidy-check:
	$(GO) mod tidy -diff
	cd $(GO_CLIENTS) && $(GO) mod tidy -diff

check: lint tidy-check test

## build: the CLI into ./bin and the shipped connectors into ./build
build:
	$(GO) build -o bin/connhost ./cmd/connhost
	./bin/connhost build plugins/email
	./bin/connhost build plugins/payments

# dist: the platforms release archives are built for.
DIST_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64
VERSION        ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

## dist: a release archive of the CLI per OS and architecture in ./dist, and their SHA256SUMS.
## The binary is self-contained (the shipped connectors are built in); the archives are
## reproducible from the same commit and Go version (sorted, owner 0, mtime 0).
dist:
	rm -rf dist && mkdir -p dist
	set -e; for p in $(DIST_PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; ext=; if [ "$$os" = windows ]; then ext=.exe; fi; \
	  name=connhost_$(VERSION)_$${os}_$${arch}; mkdir -p dist/$$name; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -o dist/$$name/connhost$$ext ./cmd/connhost; \
	  cp -r README.md CHANGELOG.md docs dist/$$name/; \
	  tar -C dist --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - $$name | gzip -n > dist/$$name.tar.gz; \
	  rm -rf dist/$$name; \
	done
	cd dist && sha256sum *.tar.gz > SHA256SUMS
