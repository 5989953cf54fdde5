package systemd

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The child half of the tests below: a process started with descriptor 3 handed over,
// as systemd starts a socket-activated service. It prints what Inherited made of it.
func TestMain(m *testing.M) {
	if os.Getenv("SYSTEMD_TEST_CHILD") == "" {
		os.Exit(m.Run())
	}
	getenv := func(k string) string {
		if k == "LISTEN_PID" && os.Getenv("SYSTEMD_TEST_CHILD") == "self" {
			return strconv.Itoa(os.Getpid()) // systemd sets the child's pid; we cannot know it before the exec
		}
		return os.Getenv(k)
	}
	if os.Getenv("SYSTEMD_TEST_SOCKETS") != "" {
		s, err := inheritedSockets(getenv, os.Getpid())
		switch {
		case err != nil:
			fmt.Println("error:", err)
		case s == nil:
			fmt.Println("none")
		default:
			var b strings.Builder
			for _, l := range s.Stream {
				fmt.Fprintf(&b, " tcp %s", l.Addr())
			}
			for _, u := range s.Datagram {
				fmt.Fprintf(&b, " udp %s", u.LocalAddr())
			}
			fmt.Println("sockets" + b.String())
		}
		os.Exit(0)
	}
	ln, err := inherited(getenv, os.Getpid())
	switch {
	case err != nil:
		fmt.Println("error:", err)
	case ln == nil:
		fmt.Println("none")
	default:
		fmt.Println("listening", ln.Addr(), os.Getenv("LISTEN_FDS") == "")
		c, err := ln.Accept()
		if err != nil {
			fmt.Println("accept:", err)
			os.Exit(0)
		}
		c.Write([]byte("hello from the child\n"))
		c.Close()
	}
	os.Exit(0)
}

// child starts this test binary as a service with files as descriptors 3, 4, …
func child(t *testing.T, mode, fds string, files ...*os.File) (*bufio.Reader, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SYSTEMD_TEST_CHILD="+mode, "LISTEN_FDS="+fds, "LISTEN_PID=1")
	cmd.ExtraFiles = files
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return bufio.NewReader(out), cmd
}

func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("reading the child: %v (got %q)", err, line)
	}
	return strings.TrimSpace(line)
}

// tcpListenerFile is a listening TCP socket on 127.0.0.1 and a descriptor of it, closed
// at cleanup (as are those below).
func tcpListenerFile(t *testing.T) (*net.TCPListener, *os.File) {
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	return ln, fileOf(t, ln, err)
}

// udpSocketFile is a bound UDP socket and a descriptor of it.
func udpSocketFile(t *testing.T) (*net.UDPConn, *os.File) {
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	return pc, fileOf(t, pc, err)
}

// fileOf is a descriptor of the socket c (err: of making it).
func fileOf(t *testing.T, c interface {
	File() (*os.File, error)
	Close() error
}, err error) *os.File {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	f, err := c.File()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// plainFile is a regular file, not a socket.
func plainFile(t *testing.T) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestAHandedOverSocketIsServedAndItsQueueKept: the child serves the socket the parent
// holds (as systemd does), a connection made before the child accepts waits in the
// queue and reaches it, and the variables are unset for the child's own children.
func TestAHandedOverSocketIsServedAndItsQueueKept(t *testing.T) {
	ln, f := tcpListenerFile(t)
	// Connected before the child runs: it waits in the held socket's queue.
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, _ := child(t, "self", "1", f)
	if got, want := readLine(t, r), "listening "+ln.Addr().String()+" true"; got != want {
		t.Fatalf("the child printed %q, want %q", got, want)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || got != "hello from the child\n" {
		t.Fatalf("the queued connection read %q, %v", got, err)
	}
}

// TestWhatIsNotOneListeningTCPSocketIsRefused: LISTEN_PID naming another process (the
// variables leaked from a parent) and LISTEN_FDS=0 both mean no socket; a datagram
// socket, a plain file, two sockets and a LISTEN_FDS that is no number are each an
// error naming it.
func TestWhatIsNotOneListeningTCPSocketIsRefused(t *testing.T) {
	_, tcp := tcpListenerFile(t)
	_, udp := udpSocketFile(t)
	for _, tc := range []struct {
		mode, fds string
		files     []*os.File
		want      string // the child's line: "none", or an error holding it
	}{
		{"other", "1", []*os.File{tcp}, "none"},
		{"self", "0", []*os.File{tcp}, "none"},
		{"self", "1", []*os.File{udp}, "not a listening TCP socket"},
		{"self", "1", []*os.File{plainFile(t)}, "not a socket"},
		{"self", "2", []*os.File{tcp, tcp}, "handed over 2 sockets"},
		{"self", "x", []*os.File{tcp}, `LISTEN_FDS="x"`},
	} {
		r, _ := child(t, tc.mode, tc.fds, tc.files...)
		got := readLine(t, r)
		if got != tc.want && (tc.want == "none" || !strings.HasPrefix(got, "error:") || !strings.Contains(got, tc.want)) {
			t.Errorf("LISTEN_PID %s, LISTEN_FDS=%s, %s: the child printed %q, want %q", tc.mode, tc.fds, tc.want, got, tc.want)
		}
	}
}

// TestNotifyReachesTheServiceManagersSocket: READY=1 arrives as one datagram on
// NOTIFY_SOCKET; without the variable Notify does nothing.
func TestNotifyReachesTheServiceManagersSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	pc, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	t.Setenv("NOTIFY_SOCKET", path)
	if err := Notify("READY=1"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	pc.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := pc.Read(buf)
	if err != nil || string(buf[:n]) != "READY=1" {
		t.Fatalf("the manager read %q, %v", buf[:n], err)
	}
	t.Setenv("NOTIFY_SOCKET", "")
	if err := Notify("READY=1"); err != nil {
		t.Fatalf("without NOTIFY_SOCKET: %v", err)
	}
	t.Setenv("NOTIFY_SOCKET", "relative/path")
	if err := Notify("READY=1"); err == nil {
		t.Fatal("a relative NOTIFY_SOCKET was accepted")
	}
}

// TestAStreamAndADatagramSocketAreBothTaken: the front's unit hands over 443/tcp and
// 443/udp; InheritedSockets takes each as what it is, in order, and refuses a plain
// file and a connected TCP socket naming the descriptor.
func TestAStreamAndADatagramSocketAreBothTaken(t *testing.T) {
	ln, tcp := tcpListenerFile(t)
	pc, udp := udpSocketFile(t)
	t.Setenv("SYSTEMD_TEST_SOCKETS", "1")
	r, _ := child(t, "self", "2", tcp, udp)
	if got, want := readLine(t, r), "sockets tcp "+ln.Addr().String()+" udp "+pc.LocalAddr().String(); got != want {
		t.Fatalf("the child printed %q, want %q", got, want)
	}
	conn, err := net.DialTCP("tcp", nil, ln.Addr().(*net.TCPAddr))
	cf := fileOf(t, conn, err)
	for name, f := range map[string]*os.File{"file": plainFile(t), "connected": cf} {
		r, _ := child(t, "self", "2", tcp, f)
		if got := readLine(t, r); !strings.HasPrefix(got, "error: descriptor 4") {
			t.Errorf("%s: the child printed %q, want an error naming descriptor 4", name, got)
		}
	}
}
