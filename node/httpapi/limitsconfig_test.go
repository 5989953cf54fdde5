package httpapi

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scafo/ingress/node/internal/fdlimit"

	ptypes "github.com/traefik/paerser/types"
)

// TestLimitsConfigValidate: the defaults pass; each bad value is refused naming its
// setting; Validate changes nothing.
func TestLimitsConfigValidate(t *testing.T) {
	if errs := DefaultLimits().Validate(); len(errs) != 0 {
		t.Fatalf("defaults: %v", errs)
	}
	for _, tc := range []struct {
		change func(*LimitsConfig)
		sub    string
	}{
		{func(l *LimitsConfig) { l.MaxConns = -1 }, "limits.maxConns -1"},
		{func(l *LimitsConfig) { l.MaxConns = 1 }, "limits.maxConns 1: at least 2"},
		{func(l *LimitsConfig) { l.MaxConnsPerSource = -1 }, "limits.maxConnsPerSource"},
		{func(l *LimitsConfig) { l.ReservedConns = -1 }, "limits.reservedConns -1"},
		{func(l *LimitsConfig) { l.MaxConns, l.ReservedConns = 10, 10 }, "must be below limits.maxConns 10"},
		{func(l *LimitsConfig) { l.HeaderTimeout = 0 }, "limits.headerTimeout"},
		{func(l *LimitsConfig) { l.BodyTimeout = 0 }, "limits.bodyTimeout"},
		{func(l *LimitsConfig) { l.WriteTimeout = -1 }, "limits.writeTimeout"},
		{func(l *LimitsConfig) { l.IdleTimeout = 0 }, "limits.idleTimeout"},
		{func(l *LimitsConfig) { l.RejectLog = 0 }, "limits.rejectLog"},
		{func(l *LimitsConfig) { l.ConnMaxAge = 0 }, "limits.connMaxAge"},
	} {
		l := DefaultLimits()
		tc.change(&l)
		before := l
		errs := l.Validate()
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.sub) {
			t.Errorf("%+v: %v, want one error containing %q", l, errs, tc.sub)
		}
		if l != before {
			t.Errorf("Validate changed %+v to %+v", before, l)
		}
	}
}

// TestLimitsConfigDerived: set caps are kept, a zero reserve is an eighth (at least one,
// below the cap), a zero per-source cap a quarter of the general connections (at least
// 16), and FillDefaults fills only the zero timeouts. A derived cap leaves files free
// under the process's open-file limit (issue 12 item 5: 500 slow-body connections on a
// node allowed 256 files starved its polls): with the limit lowered to what the process
// holds plus 160, the cap is at most what is left less 64.
func TestLimitsConfigDerived(t *testing.T) {
	for _, tc := range []struct {
		max, reserved, wantTotal, wantReserved int
	}{
		{100, 10, 100, 10},
		{100, 0, 100, 12},
		{2, 0, 2, 1},
		{4, 0, 4, 1},
	} {
		l := LimitsConfig{MaxConns: tc.max, ReservedConns: tc.reserved}
		if total, reserved := l.Conns(); total != tc.wantTotal || reserved != tc.wantReserved {
			t.Errorf("maxConns %d reservedConns %d: %d/%d, want %d/%d", tc.max, tc.reserved, total, reserved, tc.wantTotal, tc.wantReserved)
		}
	}
	if total, reserved := (LimitsConfig{}).Conns(); total < MinConns || total > MaxDerivedConns || reserved != max(1, total/8) {
		t.Errorf("derived: %d/%d, want %d..%d and an eighth reserved", total, reserved, MinConns, MaxDerivedConns)
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < uint64(fdlimit.Open()+160) {
		t.Errorf("getrlimit: %v (%d), want room for the lowered limit", err, lim.Cur)
	} else {
		lowered := lim
		lowered.Cur = uint64(fdlimit.Open() + 160)
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lowered); err != nil {
			t.Fatal(err)
		}
		total, _ := (LimitsConfig{}).Conns()
		files := fdlimit.Limit() - fdlimit.Open()
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
		if total > files-64 || total < MinConns {
			t.Errorf("derived under a limit leaving %d files: %d connections, want %d..%d", files, total, MinConns, files-64)
		}
	}
	if got := (LimitsConfig{MaxConnsPerSource: 3}).PerSource(400); got != 3 {
		t.Errorf("set per-source cap: %d, want 3", got)
	}
	if got, got2 := (LimitsConfig{}).PerSource(400), (LimitsConfig{}).PerSource(20); got != 100 || got2 != 16 {
		t.Errorf("derived per-source caps: %d, %d; want 100, 16", got, got2)
	}
	l := LimitsConfig{BodyTimeout: ptypes.Duration(3 * time.Second)}
	l.FillDefaults()
	want := DefaultLimits()
	want.BodyTimeout = ptypes.Duration(3 * time.Second)
	if l != want {
		t.Errorf("FillDefaults: %+v, want %+v", l, want)
	}
}
