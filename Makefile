# make run     run a node on the embedded default (dir store under ./scafo-state)
# make test    every test: installs MinIO and builds Traefik v3.6.12 once (cached), then go test ./...
# make bench   the Go benchmarks; make report: the side-by-side performance report (README "Performance")

GO ?= go

.PHONY: run test deps build bench report vet

run:
	$(GO) run ./node/cmd/scafo-node

build:
	$(GO) build -o scafo-node ./node/cmd/scafo-node

deps:
	./.ci/minio.sh install
	./e2e/build-traefik.sh >/dev/null

vet:
	$(GO) vet ./...

test: deps vet
	TRAEFIK_BIN="$$(./e2e/build-traefik.sh)" $(GO) test -count=1 -timeout 60m ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./render/...

# The side-by-side report of issue 8 (wrk, nginx, Traefik): writes e2e/bench/REPORT.md.
report:
	./e2e/bench/run.sh
