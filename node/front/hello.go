package front

import (
	"context"
	"crypto/tls"
	"errors"
)

var errHelloRead = errors.New("front: client hello read")

// ServerName returns the server name of a TLS ClientHello handshake message (the
// 4-byte handshake header included), as Go's crypto/tls parses it: ok is false when
// the message does not parse (crypto/tls refuses two names of one type in the list and
// a name with a trailing dot), or carries no server name. The same parser reads TCP
// and QUIC ClientHellos: the message is handed to a QUIC server connection, whose
// GetConfigForClient sees the parsed hello before any version or extension check, and
// stops the handshake there. Nothing is ever sent.
func ServerName(clientHello []byte) (name string, ok bool) {
	if len(clientHello) < 4 || clientHello[0] != 1 {
		return "", false
	}
	if n := int(clientHello[1])<<16 | int(clientHello[2])<<8 | int(clientHello[3]); n != len(clientHello)-4 {
		return "", false
	}
	var got string
	var seen bool
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(hi *tls.ClientHelloInfo) (*tls.Config, error) {
			got, seen = hi.ServerName, true
			return nil, errHelloRead
		},
	}
	q := tls.QUICServer(&tls.QUICConfig{TLSConfig: cfg})
	defer q.Close()
	if err := q.Start(context.Background()); err != nil {
		return "", false
	}
	_ = q.HandleData(tls.QUICEncryptionLevelInitial, clientHello)
	if !seen || got == "" {
		return "", false
	}
	return got, true
}
