package quic

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
)

var (
	saltV1 = []byte{0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17, 0x9a, 0xe6, 0xa4, 0xc8, 0x0c, 0xad, 0xcc, 0xbb, 0x7f, 0x0a} // RFC 9001 §5.2
	saltV2 = []byte{0x0d, 0xed, 0xe3, 0xde, 0xf7, 0x00, 0xa6, 0xdb, 0x81, 0x93, 0x81, 0xbe, 0x6e, 0x26, 0x9d, 0xcb, 0xf9, 0xbd, 0x2e, 0xd9} // RFC 9369 §3.3.1
)

// Keys protect one direction's Initial packets: the AEAD (AES-128-GCM), its IV and the
// header protection cipher (AES-128 on a 16-byte sample).
type Keys struct {
	Secret []byte // the client's or server's initial secret
	Key    []byte
	IV     []byte
	HP     []byte
	aead   cipher.AEAD
	hp     cipher.Block
}

// ClientInitialKeys derives the keys of a client's Initial packets from the first
// Destination Connection ID it sent (RFC 9001 §5.2; RFC 9369 §3.3 for v2's salt and
// labels).
func ClientInitialKeys(version uint32, dcid []byte) (*Keys, error) {
	return initialKeys(version, dcid, "client in")
}

// ServerInitialKeys derives the keys of a server's Initial packets (tests only need them).
func ServerInitialKeys(version uint32, dcid []byte) (*Keys, error) {
	return initialKeys(version, dcid, "server in")
}

func initialKeys(version uint32, dcid []byte, label string) (*Keys, error) {
	salt, prefix := saltV1, "quic "
	switch version {
	case Version1:
	case Version2:
		salt, prefix = saltV2, "quicv2 "
	default:
		return nil, ErrVersion
	}
	initial, err := hkdf.Extract(sha256.New, dcid, salt)
	if err != nil {
		return nil, err
	}
	k := &Keys{}
	if k.Secret, err = expandLabel(initial, label, sha256.Size); err != nil {
		return nil, err
	}
	if k.Key, err = expandLabel(k.Secret, prefix+"key", 16); err != nil {
		return nil, err
	}
	if k.IV, err = expandLabel(k.Secret, prefix+"iv", 12); err != nil {
		return nil, err
	}
	if k.HP, err = expandLabel(k.Secret, prefix+"hp", 16); err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(k.Key)
	if err != nil {
		return nil, err
	}
	if k.aead, err = cipher.NewGCM(block); err != nil {
		return nil, err
	}
	if k.hp, err = aes.NewCipher(k.HP); err != nil {
		return nil, err
	}
	return k, nil
}

// expandLabel is TLS 1.3's HKDF-Expand-Label with an empty context (RFC 8446 §7.1).
func expandLabel(secret []byte, label string, length int) ([]byte, error) {
	info := make([]byte, 0, 4+6+len(label))
	info = binary.BigEndian.AppendUint16(info, uint16(length))
	info = append(info, byte(6+len(label)))
	info = append(info, "tls13 "...)
	info = append(info, label...)
	info = append(info, 0)
	return hkdf.Expand(sha256.New, secret, string(info), length)
}

// Mask is the header protection mask of a 16-byte sample (RFC 9001 §5.4.3).
func (k *Keys) Mask(sample []byte) [16]byte {
	var m [16]byte
	k.hp.Encrypt(m[:], sample[:16])
	return m
}

// Open removes header protection from a long header packet p (h is its parsed header)
// and decrypts its payload. p is not modified: the result is a new slice holding the
// plaintext frames. pn is the packet number as truncated on the wire (the first packets
// of a connection, which are all a front reads, are numbered from 0).
func (k *Keys) Open(p []byte, h Header) (pn uint64, payload []byte, err error) {
	if h.Len > len(p) || h.PNOffset+4+16 > h.Len {
		return 0, nil, ErrShort
	}
	m := k.Mask(p[h.PNOffset+4 : h.PNOffset+20])
	first := p[0] ^ (m[0] & 0x0f)
	pnLen := int(first&3) + 1
	hdr := make([]byte, h.PNOffset+pnLen, h.Len)
	copy(hdr, p[:h.PNOffset+pnLen])
	hdr[0] = first
	for i := 0; i < pnLen; i++ {
		hdr[h.PNOffset+i] ^= m[1+i]
		pn = pn<<8 | uint64(hdr[h.PNOffset+i])
	}
	var nonce [12]byte
	copy(nonce[:], k.IV)
	for i := 0; i < 8; i++ {
		nonce[11-i] ^= byte(pn >> (8 * i))
	}
	ct := p[h.PNOffset+pnLen : h.Len]
	payload, err = k.aead.Open(nil, nonce[:], ct, hdr)
	if err != nil {
		return 0, nil, ErrDecrypt
	}
	return pn, payload, nil
}

// SealInitial builds a client Initial packet of version v with a 4-byte packet number:
// header fields, payload frames, and padding frames so that the packet is padTo bytes
// long (0: none). Tests use it to craft Initials; the front never sends one.
func SealInitial(v uint32, dcid, scid, token []byte, pn uint32, frames []byte, padTo int) ([]byte, error) {
	k, err := ClientInitialKeys(v, dcid)
	if err != nil {
		return nil, err
	}
	typeBits := byte(0)
	if v == Version2 {
		typeBits = 1
	}
	hdr := []byte{0xc0 | typeBits<<4 | 0x03}
	hdr = binary.BigEndian.AppendUint32(hdr, v)
	hdr = append(hdr, byte(len(dcid)))
	hdr = append(hdr, dcid...)
	hdr = append(hdr, byte(len(scid)))
	hdr = append(hdr, scid...)
	hdr = appendVarint(hdr, uint64(len(token)))
	hdr = append(hdr, token...)
	payload := append([]byte(nil), frames...)
	// The length field is written as 2 bytes (up to 16383).
	if fixed := len(hdr) + 2 + 4 + len(payload) + 16; padTo > fixed {
		payload = append(payload, make([]byte, padTo-fixed)...)
	}
	length := 4 + len(payload) + 16
	if length >= 1<<14 {
		return nil, ErrTooLarge
	}
	hdr = append(hdr, byte(length>>8)|0x40, byte(length))
	pnOff := len(hdr)
	hdr = binary.BigEndian.AppendUint32(hdr, pn)
	var nonce [12]byte
	copy(nonce[:], k.IV)
	for i := 0; i < 8; i++ {
		nonce[11-i] ^= byte(uint64(pn) >> (8 * i))
	}
	pkt := k.aead.Seal(hdr, nonce[:], payload, hdr)
	m := k.Mask(pkt[pnOff+4 : pnOff+20])
	pkt[0] ^= m[0] & 0x0f
	for i := 0; i < 4; i++ {
		pkt[pnOff+i] ^= m[1+i]
	}
	return pkt, nil
}

// CryptoFrame encodes a CRYPTO frame (RFC 9000 §19.6), for tests that craft Initials.
func CryptoFrame(offset uint64, data []byte) []byte {
	b := []byte{0x06}
	b = appendVarint(b, offset)
	b = appendVarint(b, uint64(len(data)))
	return append(b, data...)
}
