# make run     run a node on the embedded default (dir store under ./scafo-state)
# make test    every test: installs MinIO, Pebble, promtool (v0.316.0) and BIND 9 (apt) and builds Traefik v3.6.12 once (cached) and Caddy when deploy/caddy's inputs changed (.ci/caddy.sh, cached by their hash), runs the unit
#              packages under the race detector, then the end-to-end packages (without it); as root, the
#              packages' test boots Debian under systemd-nspawn from a rootfs .ci/rootfs.sh debootstraps once (cached)
# make echo    the demo's echo application into ./echo-app (the README and docs/api.md walkthroughs run two)
# make demo    two nodes, two echo applications and one Traefik on loopback: a flip and a failover
#              through Traefik (deploy/demo/demo.sh; DEMO_FLAGS=--once stops at the end)
# make caddy   Caddy v2.11.9 with scafo's modules into deploy/caddy/caddy (deploy/caddy/README.md)
# make package .deb packages scafo-node and scafo-caddy for amd64 and arm64 into dist/ (nfpm,
#              deploy/package; VERSION from deploy/package/version.sh, the binaries' -ldflags too)
# make bench   the Go benchmarks; make report: the side-by-side performance report (docs/performance.md)

GO ?= go

.PHONY: run test deps build echo bench report vet demo caddy package

# deploy/caddy is a Go module of its own (Caddy's dependency tree stays out of the node's).
CADDY_MOD = deploy/caddy

caddy:
	cd $(CADDY_MOD) && $(GO) build -o caddy .

run:
	$(GO) run ./node/cmd/scafo-node

build:
	$(GO) build -o scafo-node ./node/cmd/scafo-node

# The demo's echo application (deploy/demo/echo), for the walkthroughs' instances (README.md, docs/api.md).
echo:
	$(GO) build -o echo-app ./deploy/demo/echo

demo:
	./deploy/demo/demo.sh $(DEMO_FLAGS)

# Every installer at once, each cached (.ci/deps.sh): MinIO, Pebble, promtool, BIND 9, Traefik,
# Caddy and, as root, the systemd test's rootfs.
deps:
	./.ci/deps.sh

# -race: vet then compiles what the unit tests' -race build reuses, instead of a tree of its
# own (cold, Caddy's tree compiled once fewer: 1 138 -> 684 CPU-s; no file has a race build
# constraint, so vet checks the same files). The e2e suite's plain build is warmed by deps.
vet:
	$(GO) vet -race ./...
	cd $(CADDY_MOD) && $(GO) vet -race ./...
	cd $(PKG_MOD) && $(GO) vet ./...

# The packages (docs/install.md). The version is the binaries' and the packages' alike:
# `git describe` made a Debian version (deploy/package/version.sh); override with VERSION=.
# Static binaries (CGO_ENABLED=0), Caddy through .ci/caddy.sh (cached by its inputs and
# target, so a second run builds nothing). deploy/package is a Go module of its own (nfpm).
PKG_MOD = deploy/package
VERSION ?= $(shell ./deploy/package/version.sh)
COMMIT ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
LDFLAGS = -X main.version=$(VERSION) -X main.commit=$(COMMIT)
ARCHES ?= amd64 arm64
DIST ?= dist

package:
	cd $(PKG_MOD) && $(GO) build -o $(CURDIR)/$(DIST)/pkgbuild .
	set -e; for arch in $(ARCHES); do \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(DIST)/$$arch/scafo-node ./node/cmd/scafo-node; \
		cp "$$(env -u CADDY_BIN CGO_ENABLED=0 GOOS=linux GOARCH=$$arch ./.ci/caddy.sh)" $(DIST)/$$arch/caddy; \
		./$(DIST)/pkgbuild -version "$(VERSION)" -arch $$arch -bin $(DIST)/$$arch -out $(DIST); \
	done

# Every package must be in one of the two lists (make test refuses to run otherwise).
UNIT_PKGS = ./render/... ./node/... ./traefikprovider/... ./internal/... ./tools/... ./deploy/...
E2E_PKGS = ./e2e/...

test: deps vet
	@left=$$($(GO) list ./... | grep -vxF "$$($(GO) list $(UNIT_PKGS) $(E2E_PKGS))"); \
	if [ -n "$$left" ]; then echo "make test: packages in neither UNIT_PKGS nor E2E_PKGS:"; echo "$$left"; exit 1; fi
	SCAFO_TRAEFIK_DECODE=1 $(GO) test -race -count=1 -timeout 60m $(UNIT_PKGS)
	cd $(CADDY_MOD) && CI="$$CI" $(GO) test -race -count=1 -timeout 30m ./...
	cd $(PKG_MOD) && CI="$$CI" $(GO) test -count=1 ./...
	TRAEFIK_BIN="$$(./e2e/build-traefik.sh)" CADDY_BIN="$$(./.ci/caddy.sh)" $(GO) test -count=1 -timeout 60m $(E2E_PKGS)

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./render/...

# The side-by-side report of issue 8 (wrk, nginx, Traefik) and the issue-13 rows (flip latency by
# fleet size through both providers, store requests on MinIO, before and after): the program
# e2e/bench writes e2e/bench/REPORT.md (REPORT_FLAGS='-only front' measures one section; -list).
REPORT_FLAGS ?=
report:
	$(GO) run ./e2e/bench $(REPORT_FLAGS)
	$(GO) run ./tools/docs/cmd/plots e2e/bench/REPORT.md docs/img
